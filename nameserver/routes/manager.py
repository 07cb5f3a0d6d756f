"""The five route tables and every operation on them (docs/nameserver-semantics.md §1-§2),
RocketMQ 4.9 rules: :class:`RouteInfoManager`, which the asyncio server, the simulator and the
Spark replay all drive, so the log means exactly what the server did.

Its layers are re-exported here (import from this module): the tables, their indexes and cell
writes (:mod:`nameserver.routes.tables`), the reads the lookups answer
(:mod:`nameserver.routes.lookups`), the admin requests' writes (:mod:`nameserver.routes.admin`, §2.8-§2.9)
and the events the operations return (built by :mod:`nameserver.events`, through
:mod:`nameserver.routes.events`); the other operations of §2 are here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nameserver.events import channel_close_event, expire_event, heartbeat_event, register_event, unregister_event
from nameserver.model import MASTER_ID, DataVersion, QueueData, TopicConfig, topics_digest
from nameserver.routes.admin import RouteAdmin
from nameserver.routes.events import (
    Event,
    RequestContext,
    iter_topic_configs,
    ns_start_event,
    ns_stop_event,
    rejected_event,
    topic_key,
)
from nameserver.routes.lookups import UNIT_FLAGS, ClusterInfo, RouteAnswers, TopicRouteData
from nameserver.routes.tables import BrokerData, BrokerLiveInfo, RouteTables

__all__ = [
    "UNIT_FLAGS",
    "BrokerData",
    "BrokerLiveInfo",
    "ClusterInfo",
    "Event",
    "RegisterResult",
    "RequestContext",
    "RouteAnswers",
    "RouteInfoManager",
    "RouteTables",
    "TopicRouteData",
    "iter_topic_configs",
    "ns_start_event",
    "ns_stop_event",
    "rejected_event",
]


@dataclass(frozen=True, slots=True)
class RegisterResult:
    """What REGISTER_BROKER answers (§2.1 step 8) and the events it caused."""

    master_addr: str | None
    ha_server_addr: str | None
    events: list[Event]


class RouteInfoManager(RouteAdmin):
    """Owns ``topic_queue_table``, ``broker_addr_table``, ``cluster_addr_table``,
    ``broker_live_table`` and ``filter_server_table`` (RocketMQ's ``RouteInfoManager``).

    The tables and their cell writes are :class:`nameserver.routes.tables.RouteTables`, the reads
    :class:`nameserver.routes.lookups.RouteAnswers`, the admin requests'
    :class:`nameserver.routes.admin.RouteAdmin`; this class adds the other operations of §2.

    Pure: time is the ``now`` argument; there is no lock, socket or file. Every mutation returns the
    events it caused, which the caller writes to the event log. Event values are plain JSON types or
    frozen dataclasses (``DataVersion``, ``TopicConfig``); orjson writes dataclasses as objects in
    field order, which is the event-log key order.

    Args:
        broker_expiry_ms: a live entry with ``last_update + expiry < now`` is removed by a scan.
        journal: when a list is given, every table-cell change is appended to it as a tuple
            (used by the Spark rebuild; :class:`RouteTables` lists the tuples).
    """

    def __init__(self, broker_expiry_ms: int = 120_000, journal: list[Any] | None = None) -> None:
        super().__init__(journal)
        self.broker_expiry_ms = broker_expiry_ms

    # ------------------------------------------------------------------ operations (§2)

    def register_broker(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_addr: str | None,
        data_version: DataVersion,
        topics: Sequence[TopicConfig],
        filter_servers: list[str] | None,
        now: int,
        ctx: RequestContext,
        *,
        request_version: int = 407,
        digest: str | None = None,
    ) -> RegisterResult:
        """REGISTER_BROKER (103), §2.1 steps 1-8.

        Args:
            topics: the broker's topic configs. Pass them sorted by topic together with their
                ``digest`` to skip re-sorting and hashing (the simulator does; the server lets
                this method compute both).
            filter_servers: ``None`` when the request used the pre-3.0.11 body (no change).
        """
        if digest is None:
            topics = tuple(sorted(topics, key=topic_key))
            digest = topics_digest(topics)
        # a registration from a live address is logged as a heartbeat (docs/event-log.md)
        build = heartbeat_event if broker_addr in self.broker_live_table else register_event
        event = build(
            now,
            ctx,
            cluster,
            broker_name,
            broker_id,
            broker_addr,
            ha_addr,
            data_version,
            digest,
            topics,
            filter_servers,
            request_version,
        )
        # 1-4. cluster set, group, role switch and put
        broker_data, register_first = self._put_broker_addr(cluster, broker_addr, broker_name, broker_id)
        # 5. topics, masters only, when the address's stored data version differs or first
        if broker_id == MASTER_ID:
            live = self.broker_live_table.get(broker_addr)
            # ``is`` first: a re-sent body is decoded once (the body cache), so the stored
            # version is then the very same object and the dataclass comparison is skipped
            stored = live.data_version if live is not None else None
            if live is None or (stored is not data_version and stored != data_version) or register_first:
                self._create_and_update_queue_data(broker_name, topics)
        # 6. live entry, always replaced (connection and data version too)
        self._update_live(cluster, broker_addr, broker_name, broker_id, ha_addr, data_version, now, ctx.channel)
        # 7. filter servers: None = untouched, [] = cleared
        if filter_servers is not None:
            self._set_filter(broker_addr, filter_servers)
        # 8. result: slaves learn their master while it is live
        return self._register_result(broker_data, broker_id, event)

    def _register_result(self, broker_data: BrokerData, broker_id: int, event: Event) -> RegisterResult:
        """registerBroker step 8: the answer (a slave's master and its HA address while it is live)."""
        if broker_id != MASTER_ID:
            master = broker_data.broker_addrs.get(MASTER_ID)
            if master is not None:
                master_live = self.broker_live_table.get(master)
                if master_live is not None:
                    return RegisterResult(master, master_live.ha_server_addr, [event])
        return RegisterResult(None, None, [event])

    def _put_broker_addr(
        self, cluster: str, broker_addr: str, broker_name: str, broker_id: int
    ) -> tuple[BrokerData, bool]:
        """registerBroker steps 1-4: the cluster set, the group, the role switch and the put of
        ``broker_id -> broker_addr``; returns the group and RocketMQ's ``registerFirst``."""
        # 1. cluster set (never removed from another cluster's set)
        self._cluster_add(cluster, broker_name)
        # 2. group
        register_first = False
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is None:
            broker_data = self._add_group(cluster, broker_name)
            register_first = True
        # 3. role switch: one address holds one id per group (nothing to look for when the
        # group holds just this id with this address, as on every periodic re-registration)
        addrs = broker_data.broker_addrs
        previous = addrs.get(broker_id)
        if previous != broker_addr or len(addrs) > 1:
            for other_id in [i for i, a in addrs.items() if a == broker_addr and i != broker_id]:
                self._set_addr(broker_data, other_id, None)
        # 4. put
        if previous != broker_addr:
            self._set_addr(broker_data, broker_id, broker_addr)
        return broker_data, register_first or previous is None

    def _create_and_update_queue_data(self, broker_name: str, topics: Sequence[TopicConfig]) -> None:
        """registerBroker step 5: one QueueData per topic config (RocketMQ's createAndUpdateQueueData)."""
        pool = self._queue_data_pool
        for topic in topics:
            key = (broker_name, topic.read_queue_nums, topic.write_queue_nums, topic.perm, topic.topic_sys_flag)
            queue_data = pool.get(key)
            if queue_data is None:
                queue_data = pool[key] = QueueData(*key)
            self._put_queue(topic.topic, queue_data)

    def _update_live(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        ha_addr: str | None,
        data_version: DataVersion,
        now: int,
        channel: str,
    ) -> None:
        """registerBroker step 6: the address's live entry, always replaced."""
        live_info = self.broker_live_table.get(broker_addr)
        if live_info is not None and live_info.channel == channel and now >= self._live_max_update:
            # fast path for the steady heartbeat: same connection, update in place
            self._renew_live(broker_addr, live_info, data_version, ha_addr, cluster, broker_name, broker_id, now)
        else:
            self._put_live(
                broker_addr, BrokerLiveInfo(now, data_version, channel, ha_addr, cluster, broker_name, broker_id)
            )

    def unregister_broker(
        self, cluster: str, broker_addr: str, broker_name: str, broker_id: int, now: int, ctx: RequestContext
    ) -> list[Event]:
        """UNREGISTER_BROKER (104) by address (D2, §2.2); ``broker_id`` is only logged."""
        live = self._del_live(broker_addr)
        event = unregister_event(
            now, ctx, cluster, broker_name, broker_id, broker_addr, live.ha_server_addr if live is not None else None
        )
        self._set_filter(broker_addr, None)
        broker_data = self.broker_addr_table.get(broker_name)
        if broker_data is not None:
            for i in [i for i, a in broker_data.broker_addrs.items() if a == broker_addr]:
                self._set_addr(broker_data, i, None)
            if not broker_data.broker_addrs:
                self._del_group(broker_name)
                self._cluster_remove(cluster, broker_name)  # the request's cluster only
                self._drop_queue_datas({broker_name})
        return [event]

    def remove_address(self, addr: str) -> None:
        """removeAddress(X), shared by channel close and expiry (§2.3, A1)."""
        self._del_live(addr)
        self._set_filter(addr, None)
        emptied: set[str] = set()
        for name in sorted(self._addr_groups.get(addr, ())):
            broker_data = self.broker_addr_table[name]
            hits = [i for i, a in broker_data.broker_addrs.items() if a == addr]
            if not hits:
                continue
            for i in hits:
                self._set_addr(broker_data, i, None)
            if not broker_data.broker_addrs:
                self._del_group(name)
                emptied.add(name)
        if emptied:
            for cluster in sorted(self.cluster_addr_table):
                for name in sorted(emptied & self.cluster_addr_table[cluster]):
                    self._cluster_remove(cluster, name)
            self._drop_queue_datas(emptied)

    def _drop_queue_datas(self, broker_names: set[str]) -> None:
        for topic in sorted(self.topic_queue_table):
            for name in sorted(broker_names & self.topic_queue_table[topic].keys()):
                self._del_queue(topic, name)

    def on_channel_close(self, channel: str, now: int, remote: str = "") -> list[Event]:
        """A connection ended (§2.4): one ``channel_close`` per live address registered over it."""
        addrs = sorted(self._channel_addrs.get(channel, ()))
        if not addrs:
            return [channel_close_event(now, channel, remote)]
        events = []
        for addr in addrs:
            live = self.broker_live_table[addr]
            events.append(
                channel_close_event(now, channel, remote, addr, live.cluster, live.broker_name, live.broker_id)
            )
            self.remove_address(addr)
        return events

    def scan_not_active_broker(self, now: int) -> tuple[list[Event], list[str]]:
        """The expiry scan (§2.5): remove every live entry with ``last_update + expiry < now``.

        Returns:
            The ``expire`` events (ascending address) and the channels the caller must close,
            as RocketMQ closes an expired broker's connection.
        """
        if not self._live_sorted:
            ordered = sorted(self.broker_live_table.items(), key=lambda kv: kv[1].last_update)
            self.broker_live_table = dict(ordered)
            self._live_sorted = True
        deadline = now - self.broker_expiry_ms  # expired iff last_update < deadline
        expired = []
        for addr, info in self.broker_live_table.items():
            if info.last_update >= deadline:
                break
            expired.append(addr)
        events, channels = [], []
        for addr in sorted(expired):
            info = self.broker_live_table[addr]
            events.append(expire_event(now, addr, info.last_update, info.cluster, info.broker_name, info.broker_id))
            channels.append(info.channel)
            self.remove_address(addr)
        return events, sorted(set(channels))

    def broker_heartbeat(
        self, cluster: str, broker_addr: str, broker_name: str, now: int, ctx: RequestContext
    ) -> list[Event]:
        """BROKER_HEARTBEAT (904, D4): refresh a live address; nothing else changes."""
        live = self.broker_live_table.get(broker_addr)
        if live is not None:
            self._refresh_live(broker_addr, live, now)
        return [heartbeat_event(now, ctx, cluster, broker_name, None, broker_addr, None)]  # 904 has no id

    def query_data_version(
        self,
        cluster: str,
        broker_addr: str,
        broker_name: str,
        broker_id: int,
        data_version: DataVersion,
        now: int,
        ctx: RequestContext,
    ) -> tuple[bool, DataVersion | None, list[Event]]:
        """QUERY_DATA_VERSION (322, D5): refresh only when the sent version equals the stored one.

        Returns:
            ``(changed, stored data version or None, events)``.
        """
        live = self.broker_live_table.get(broker_addr)
        changed = live is None or live.data_version != data_version
        stored = live.data_version if live is not None else None
        if not changed:
            self._refresh_live(broker_addr, live, now)  # type: ignore[arg-type]  # unchanged: live is set
        # 322 carries no HA address
        return (
            changed,
            stored,
            [heartbeat_event(now, ctx, cluster, broker_name, broker_id, broker_addr, None, data_version)],
        )

    # ------------------------------------------------------------------ refreshes refused in an outage (§2.13)

    def refreshed_by(self, event: Event) -> str | None:
        """The live address a request's event refreshes, or None: a 103 from a live address
        (§2.1 step 6), a 904 (§2.6), a 322 whose data version equals the stored one (§2.7).

        Read before the request is applied (or after it was undone): a server that cannot log the
        request refuses it, and remembers this instead (docs/nameserver-semantics.md §2.13).
        """
        if event.get("type") not in ("heartbeat", "register"):
            return None
        addr = event.get("broker_addr")
        live = self.broker_live_table.get(addr)  # type: ignore[arg-type]  # None finds no entry
        if live is None or (event.get("request_code") == 322 and live.data_version != event.get("data_version")):
            return None
        return addr

    def refresh_credits(self, refused: Mapping[str, int]) -> list[Event]:
        """What :meth:`apply_refreshes` would do with the last refused refresh of each address:
        ``{"broker_addr", "last_update_ts"}`` for every address still live whose entry is older,
        ascending by address (the ``refreshes`` of the ``log_unavailable`` event)."""
        credits = []
        for addr in sorted(refused):
            live = self.broker_live_table.get(addr)
            if live is not None and refused[addr] > live.last_update:
                credits.append({"broker_addr": addr, "last_update_ts": refused[addr]})
        return credits

    def apply_refreshes(self, refreshes: Iterable[Mapping[str, Any]]) -> None:
        """Refresh each listed live address to its ``last_update_ts`` (never backwards)."""
        for credit in refreshes:
            addr, ts = credit["broker_addr"], credit["last_update_ts"]
            live = self.broker_live_table.get(addr)
            if live is not None and ts > live.last_update:
                self._refresh_live(addr, live, ts)
