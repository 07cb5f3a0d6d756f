"""The five route tables, their indexes and every cell write (docs/nameserver-semantics.md §1).

:class:`RouteTables` holds ``topic_queue_table``, ``broker_addr_table``, ``cluster_addr_table``,
``broker_live_table`` and ``filter_server_table`` and the indexes that keep the operations off full
scans; every change of a cell goes through one of its methods, which keep the indexes and the
journal in step and, inside a change begun with :meth:`RouteTables.begin_change`, record how to
take the write back (:meth:`RouteTables.undo_change`). The operations of docs/nameserver-semantics.md §2 are
:class:`nameserver.routes.manager.RouteInfoManager`, built on this class; import from
:mod:`nameserver.routes.manager`. Pure: no clock, lock, socket or file.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from nameserver.model import DataVersion, QueueData


@dataclass(slots=True)
class BrokerData:
    """A broker group: ``cluster`` is fixed at creation and never updated (§1.1)."""

    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)

    def copy(self) -> BrokerData:
        """A detached copy with ids in ascending order (A3)."""
        return BrokerData(self.cluster, self.broker_name, dict(sorted(self.broker_addrs.items())))


@dataclass(slots=True)
class BrokerLiveInfo:
    """A live address: refreshed by registrations and heartbeats, removed by expiry or close."""

    last_update: int
    data_version: DataVersion
    channel: str
    ha_server_addr: str | None
    # identity of the latest registration; fills the broker keys of expire/channel_close events
    cluster: str
    broker_name: str
    broker_id: int


class RouteTables:
    """The tables and their indexes, written only through the cell methods below.

    Args:
        journal: when a list is given, every table-cell change is appended to it as a tuple
            (used by the Spark rebuild to turn changes into validity intervals):
            ``("queue", topic, broker_name, QueueData | None)``,
            ``("addr", broker_name, broker_id, addr | None, cluster)``,
            ``("cluster", cluster, broker_name, present: bool)``,
            ``("filter", addr, tuple | None)``.

    Undo: between :meth:`begin_change` and :meth:`keep_change` or :meth:`undo_change` every cell
    write records its inverse, so a change whose event cannot be logged is taken back whole
    (docs/nameserver-semantics.md §2.13). Outside a change nothing is recorded.

    Attributes:
        revision: moves on every change of a cell of ``topic_queue_table``, ``broker_addr_table``,
            ``cluster_addr_table`` or ``filter_server_table`` (not ``broker_live_table``, which no
            lookup answer shows), and only then: an answer computed from these four tables stays
            true while the revision is the same (the processor's encoded-answer caches rely on
            it). A steady re-registration changes no cell, so it leaves the revision alone.
    """

    def __init__(self, journal: list[Any] | None = None) -> None:
        self.journal = journal
        self.topic_queue_table: dict[str, dict[str, QueueData]] = {}
        self.broker_addr_table: dict[str, BrokerData] = {}
        self.cluster_addr_table: dict[str, set[str]] = {}
        # Insertion order is kept ascending by last_update while the clock never goes back,
        # so a scan reads only the expired prefix instead of every entry.
        self.broker_live_table: dict[str, BrokerLiveInfo] = {}
        self.filter_server_table: dict[str, list[str]] = {}
        self._channel_addrs: dict[str, set[str]] = {}
        # address -> broker names whose brokerAddrs hold it: removeAddress visits only those
        self._addr_groups: dict[str, set[str]] = {}
        # equal QueueData values share one object: 1,000 brokers x 2,000 topics mostly repeat a
        # handful of (name, queues, perm, flag) tuples, so this cuts the tables' memory ~4x
        self._queue_data_pool: dict[tuple[Any, ...], QueueData] = {}
        self._live_max_update = -(2**63)
        self._live_sorted = True
        self.revision = 0
        self._undo: list[tuple[Any, ...]] | None = None  # inverse cell writes of the change in progress

    # ------------------------------------------------------------------ undo

    def begin_change(self) -> None:
        """From now on record the inverse of every cell write, until the change is kept or undone."""
        self._undo = []

    def keep_change(self) -> None:
        """Keep the writes since :meth:`begin_change`; stop recording."""
        self._undo = None

    def undo_change(self) -> None:
        """Take back every write since :meth:`begin_change`, newest first (indexes included); stop
        recording. Without a change in progress, nothing happens."""
        undo, self._undo = self._undo, None
        for inverse, *args in reversed(undo or ()):
            inverse(*args)

    # ------------------------------------------------------------------ low-level cell writes

    def _put_queue(self, topic: str, queue_data: QueueData) -> None:
        queues = self.topic_queue_table.get(topic)
        if queues is None:
            queues = self.topic_queue_table[topic] = {}
        old = queues.get(queue_data.broker_name)
        if old is not queue_data and old != queue_data:  # pooled values: usually the same object
            queues[queue_data.broker_name] = queue_data
            self.revision += 1
            if self._undo is not None:
                self._undo.append((self._restore_queue, topic, queue_data.broker_name, old))
            if self.journal is not None:
                self.journal.append(("queue", topic, queue_data.broker_name, queue_data))

    def _del_queue(self, topic: str, broker_name: str) -> None:
        queues = self.topic_queue_table[topic]
        old = queues.pop(broker_name)
        if self._undo is not None:
            self._undo.append((self._put_queue, topic, old))
        if not queues:  # I1: no topic maps to an empty map
            del self.topic_queue_table[topic]
        self.revision += 1
        if self.journal is not None:
            self.journal.append(("queue", topic, broker_name, None))

    def _restore_queue(self, topic: str, broker_name: str, old: QueueData | None) -> None:
        if old is None:
            self._del_queue(topic, broker_name)
        else:
            self._put_queue(topic, old)

    def _set_addr(self, broker_data: BrokerData, broker_id: int, addr: str | None) -> None:
        old = broker_data.broker_addrs.get(broker_id)
        if self._undo is not None:
            self._undo.append((self._set_addr, broker_data, broker_id, old))
        if addr is None:
            del broker_data.broker_addrs[broker_id]
        else:
            broker_data.broker_addrs[broker_id] = addr
            self._addr_groups.setdefault(addr, set()).add(broker_data.broker_name)
        if old is not None and old != addr and old not in broker_data.broker_addrs.values():
            names = self._addr_groups.get(old)
            if names is not None:
                names.discard(broker_data.broker_name)
                if not names:
                    del self._addr_groups[old]
        self.revision += 1
        if self.journal is not None:
            self.journal.append(("addr", broker_data.broker_name, broker_id, addr, broker_data.cluster))

    def _add_group(self, cluster: str, broker_name: str) -> BrokerData:
        broker_data = self.broker_addr_table[broker_name] = BrokerData(cluster, broker_name)
        self.revision += 1
        if self._undo is not None:
            self._undo.append((self._del_group, broker_name))
        return broker_data

    def _del_group(self, broker_name: str) -> None:
        broker_data = self.broker_addr_table.pop(broker_name)
        self.revision += 1
        if self._undo is not None:
            self._undo.append((self._restore_group, broker_data))

    def _restore_group(self, broker_data: BrokerData) -> None:
        # the very object: the undone address writes that follow refill it
        self.broker_addr_table[broker_data.broker_name] = broker_data
        self.revision += 1

    def _cluster_add(self, cluster: str, broker_name: str) -> None:
        names = self.cluster_addr_table.get(cluster)
        if names is None:
            names = self.cluster_addr_table[cluster] = set()
        if broker_name not in names:
            names.add(broker_name)
            self.revision += 1
            if self._undo is not None:
                self._undo.append((self._cluster_remove, cluster, broker_name))
            if self.journal is not None:
                self.journal.append(("cluster", cluster, broker_name, True))

    def _cluster_remove(self, cluster: str, broker_name: str) -> None:
        names = self.cluster_addr_table.get(cluster)
        if names is None or broker_name not in names:
            return
        names.discard(broker_name)
        if not names:  # I3: no cluster set is empty
            del self.cluster_addr_table[cluster]
        self.revision += 1
        if self._undo is not None:
            self._undo.append((self._cluster_add, cluster, broker_name))
        if self.journal is not None:
            self.journal.append(("cluster", cluster, broker_name, False))

    def _set_filter(self, addr: str, servers: list[str] | None) -> None:
        old = self.filter_server_table.get(addr)
        if servers:
            if old == servers:
                return
            self.filter_server_table[addr] = list(servers)
        elif self.filter_server_table.pop(addr, None) is None:
            return
        self.revision += 1
        if self._undo is not None:
            self._undo.append((self._set_filter, addr, old))
        if self.journal is not None:
            self.journal.append(("filter", addr, tuple(servers) if servers else None))

    def _put_live(self, addr: str, info: BrokerLiveInfo) -> None:
        old = self.broker_live_table.pop(addr, None)
        if old is not None:
            self._unlink_channel(addr, old.channel)
        if self._undo is not None:
            self._undo.append((self._restore_live, addr, old))
        self.broker_live_table[addr] = info
        self._channel_addrs.setdefault(info.channel, set()).add(addr)
        self._note_update(info.last_update)

    def _restore_live(self, addr: str, old: BrokerLiveInfo | None) -> None:
        if old is None:
            self._del_live(addr)
        else:
            self._put_live(addr, old)

    def _renew_live(
        self,
        addr: str,
        info: BrokerLiveInfo,
        data_version: DataVersion,
        ha_server_addr: str | None,
        cluster: str,
        broker_name: str,
        broker_id: int,
        now: int,
    ) -> None:
        """A registration over the entry's own connection: new values in place, then a refresh."""
        if self._undo is not None:
            self._undo.append(
                (
                    self._set_live_values,
                    info,
                    info.data_version,
                    info.ha_server_addr,
                    info.cluster,
                    info.broker_name,
                    info.broker_id,
                )
            )
        self._set_live_values(info, data_version, ha_server_addr, cluster, broker_name, broker_id)
        self._refresh_live(addr, info, now)

    @staticmethod
    def _set_live_values(
        info: BrokerLiveInfo,
        data_version: DataVersion,
        ha_server_addr: str | None,
        cluster: str,
        broker_name: str,
        broker_id: int,
    ) -> None:
        info.data_version, info.ha_server_addr = data_version, ha_server_addr
        info.cluster, info.broker_name, info.broker_id = cluster, broker_name, broker_id

    def _refresh_live(self, addr: str, info: BrokerLiveInfo, now: int) -> None:
        if self._undo is not None:
            self._undo.append((self._refresh_live, addr, info, info.last_update))
        info.last_update = now
        # re-insert to move to the end, keeping the order ascending by last_update
        del self.broker_live_table[addr]
        self.broker_live_table[addr] = info
        self._note_update(now)

    def _note_update(self, now: int) -> None:
        if now < self._live_max_update:
            self._live_sorted = False  # clock went back: the next scan sorts once
        else:
            self._live_max_update = now

    def _del_live(self, addr: str) -> BrokerLiveInfo | None:
        info = self.broker_live_table.pop(addr, None)
        if info is not None:
            self._unlink_channel(addr, info.channel)
            if self._undo is not None:
                self._undo.append((self._put_live, addr, info))
        return info

    def _unlink_channel(self, addr: str, channel: str) -> None:
        addrs = self._channel_addrs.get(channel)
        if addrs is not None:
            addrs.discard(addr)
            if not addrs:
                del self._channel_addrs[channel]

    def load_cells(
        self,
        queues: Iterable[tuple[str, QueueData]] = (),
        addrs: Iterable[tuple[str, str, int, str]] = (),
        clusters: Iterable[tuple[str, str]] = (),
        filters: Iterable[tuple[str, list[str]]] = (),
    ) -> None:
        """Fill the tables with saved cells, unjournaled, keeping every index (a saved state's restore).

        Args:
            queues: ``(topic, QueueData)``.
            addrs: ``(broker_name, cluster, broker_id, addr)``.
            clusters: ``(cluster, broker_name)``.
            filters: ``(broker_addr, filter servers)``.
        """
        journal, self.journal = self.journal, None
        try:
            for topic, queue_data in queues:
                key = (
                    queue_data.broker_name,
                    queue_data.read_queue_nums,
                    queue_data.write_queue_nums,
                    queue_data.perm,
                    queue_data.topic_sys_flag,
                )
                self._put_queue(topic, self._queue_data_pool.setdefault(key, queue_data))
            for name, cluster, broker_id, addr in addrs:
                broker_data = self.broker_addr_table.get(name)
                if broker_data is None:
                    broker_data = self._add_group(cluster, name)
                self._set_addr(broker_data, broker_id, addr)
            for cluster, name in clusters:
                self._cluster_add(cluster, name)
            for addr, servers in filters:
                self._set_filter(addr, list(servers))
        finally:
            self.journal = journal

    def clear(self) -> None:
        """Empty every table: a (re)started server (§2.12). Journals the removals."""
        if self.journal is not None:
            for topic in sorted(self.topic_queue_table):
                for name in sorted(self.topic_queue_table[topic]):
                    self.journal.append(("queue", topic, name, None))
            for name in sorted(self.broker_addr_table):
                broker_data = self.broker_addr_table[name]
                for i in sorted(broker_data.broker_addrs):
                    self.journal.append(("addr", name, i, None, broker_data.cluster))
            for cluster in sorted(self.cluster_addr_table):
                for name in sorted(self.cluster_addr_table[cluster]):
                    self.journal.append(("cluster", cluster, name, False))
            for addr in sorted(self.filter_server_table):
                self.journal.append(("filter", addr, None))
        self.topic_queue_table.clear()
        self.broker_addr_table.clear()
        self.cluster_addr_table.clear()
        self.broker_live_table.clear()
        self.filter_server_table.clear()
        self.revision += 1
        self._channel_addrs.clear()
        self._addr_groups.clear()
        self._queue_data_pool.clear()
        self._live_max_update = -(2**63)
        self._live_sorted = True
