"""One observed server's answers as the indices live judgement reads, and its own conditions.

A :class:`KnownServer` indexes the last :class:`~nameserver.collect.view.ServerView` of a server in a
known period (docs/audit.md, "Observed servers") with what the nightly audit's tables give of it:
the QueueData of each topic (``topic_route_history``) and the BrokerData of each broker name
(``broker_addr_history``, from the cluster info, GET_BROKER_CLUSTER_INFO 106). A round that changed
a few entries updates only those (:meth:`KnownServer.apply`).

Example:
    >>> view = ServerView({"b": {"cluster": "C", "broker_name": "b",
    ...                          "broker_addrs": [{"broker_id": 1, "broker_addr": "h:1"}]}},
    ...                   {"T": {"queue_datas": [{"broker_name": "b", "read_queue_nums": 4, "write_queue_nums": 4,
    ...                                           "perm": 6, "topic_sys_flag": 0}],
    ...                          "broker_datas": [], "filter_server_table": []}})
    >>> server = KnownServer(view)
    >>> server.no_writable_queue("T")["brokers_with_master"], server.masterless("b")
    (0, True)
"""

from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping
from typing import Any

from nameserver.collect.view import ServerView
from nameserver.model import MASTER_ID, PERM_READ, PERM_WRITE

# a QueueData as the live judge keeps it: (read_queue_nums, write_queue_nums, perm, topic_sys_flag,
# its queue_text), the text made once per answer, not per comparison
QueueValue = tuple[int, int, int, int, str]
Cells = dict[str, QueueValue]  # a topic's QueueData on one server, by broker name
# the QueueValues made so far, by their four numbers: a fleet's QueueData take a few distinct values,
# made once each (emptied when it grows past VALUES_KEPT, so odd answers cannot grow it without end)
_values: dict[tuple[int, int, int, int], QueueValue] = {}
VALUES_KEPT = 4096
_numbers = operator.itemgetter("read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag")


def queue_text(read: int, write: int, perm: int, sys_flag: int) -> str:
    """The ``queue_data_mismatch`` view of a QueueData, ``read/write/perm/sysflag`` (``8/8/6/0``)."""
    return f"{read}/{write}/{perm}/{sys_flag}"


def addrs_text(broker_addrs: list[dict[str, Any]]) -> str:
    """The ``broker_addrs_mismatch`` view of a BrokerData: ``{"0":"h:1","1":"h:2"}``, ascending id."""
    cells = sorted((a["broker_id"], a["broker_addr"]) for a in broker_addrs)
    return "{" + ",".join(f'"{i}":"{a}"' for i, a in cells) + "}"


class KnownServer:
    """The indices of one server's last answers.

    It keeps no reference to the view itself: the collector frees a replaced view on its own thread.

    Attributes:
        qd: topic -> broker name -> :data:`QueueValue`, for topics with at least one QueueData.
        brokers: broker name -> its cluster-info entry, for names with at least one address.
        addrs: broker address -> (broker name, broker id), from the cluster info.
        topics_of: broker name -> topics with a QueueData of it (made when first read: a server's
            first round, which compares every topic anyway, never needs it).
        unwritable: the topics with a QueueData without write perm.
        unread: the topics with a readable and writable QueueData of fewer read than write queues.
    """

    def __init__(self, view: ServerView) -> None:
        self.qd: dict[str, Cells] = {}
        self.brokers: dict[str, dict[str, Any]] = {}
        self.addrs: dict[str, tuple[str, int]] = {}
        self._topics_of: dict[str, set[str]] | None = None
        self.masters: set[str] = set()  # broker names whose BrokerData lists id 0
        self.unwritable: set[str] = set()
        self.unread: set[str] = set()
        self._set_topics(view.routes)
        self._set_brokers(view.broker_addr_table)

    def apply(self, view: ServerView, topics: Iterable[str], brokers: Iterable[str]) -> tuple[set[str], set[str]]:
        """Take a new view of which only ``topics`` and ``brokers`` changed.

        Returns:
            The broker addresses that left the cluster info and those that entered it.
        """
        for topic in topics:
            for name in self.qd.pop(topic, {}):
                if self._topics_of is not None:
                    self._topics_of.get(name, set()).discard(topic)
            self.unwritable.discard(topic)
            self.unread.discard(topic)
        self._set_topics({t: view.routes.get(t) for t in topics})
        before = {a for name in brokers for a in self._addrs_of(self.brokers.get(name))}
        for name in brokers:
            self.masters.discard(name)
            for addr in self._addrs_of(self.brokers.pop(name, None)):
                if self.addrs.get(addr, (None,))[0] == name:
                    del self.addrs[addr]
        self._set_brokers({n: view.broker_addr_table.get(n) for n in brokers})
        after = {a for name in brokers for a in self._addrs_of(self.brokers.get(name))}
        return before - after, after - before

    @staticmethod
    def _addrs_of(entry: dict[str, Any] | None) -> list[str]:
        return [a["broker_addr"] for a in entry["broker_addrs"]] if entry else []

    def _set_topics(self, routes: Mapping[str, dict[str, Any] | None]) -> None:
        topics_of, values = self._topics_of, _values
        for topic, route in routes.items():
            if not route or not route.get("queue_datas"):
                continue
            cells = {}
            for q in route["queue_datas"]:
                numbers = _numbers(q)
                value = values.get(numbers)
                if value is None:
                    if len(values) >= VALUES_KEPT:
                        values.clear()
                    value = values[numbers] = (*numbers, queue_text(*numbers))
                if not value[2] & PERM_WRITE:
                    self.unwritable.add(topic)
                elif value[2] & PERM_READ and value[0] < value[1]:
                    self.unread.add(topic)
                cells[q["broker_name"]] = value
            self.qd[topic] = cells
            if topics_of is not None:
                for name in cells:
                    topics_of.setdefault(name, set()).add(topic)

    @property
    def topics_of(self) -> dict[str, set[str]]:
        if self._topics_of is None:
            self._topics_of = {}
            for topic, cells in self.qd.items():
                for name in cells:
                    self._topics_of.setdefault(name, set()).add(topic)
        return self._topics_of

    def _set_brokers(self, table: Mapping[str, dict[str, Any] | None]) -> None:
        for name, entry in table.items():
            if not entry or not entry["broker_addrs"]:
                continue
            self.brokers[name] = entry
            for a in entry["broker_addrs"]:
                self.addrs[a["broker_addr"]] = (name, a["broker_id"])
                if a["broker_id"] == MASTER_ID:
                    self.masters.add(name)

    def has_master(self, broker_name: str) -> bool:
        """The group's BrokerData (cluster info) lists id 0."""
        return broker_name in self.masters

    def masterless(self, broker_name: str) -> bool:
        """A BrokerData with addresses but none of id 0 (``no_master``, before the starting rule)."""
        return broker_name in self.brokers and not self.has_master(broker_name)

    def no_writable_queue(self, topic: str) -> dict[str, Any] | None:
        """The detail of ``no_writable_queue`` when a producer gets no queue from the topic's route
        (no QueueData with write perm and write queues on a group with a master) while some
        QueueData may be read or written; None otherwise (docs/audit.md, "Distribution")."""
        cells = self.qd.get(topic)
        if not cells or _publishes(cells, self.masters):
            return None  # the usual answer, found without the detail's counts
        publish = writable = readable = masters = write_queues = 0
        lost = []
        for name, (_, write, perm, _, _) in cells.items():
            master = self.has_master(name)
            masters += master
            writable += bool(perm & PERM_WRITE)
            readable += bool(perm & PERM_READ)
            write_queues += write
            if perm & PERM_WRITE and master:
                publish += max(write, 0)
            if not master or not perm & PERM_WRITE:
                lost.append(name)
        if publish or not (writable or readable):
            return None
        return {
            "brokers": len(cells),
            "brokers_with_master": masters,
            "writable_brokers": writable,
            "write_queues": write_queues,
            "culprit": min(lost) if lost else None,
        }

    def unpublishable(self) -> set[str]:
        """The topics :meth:`no_writable_queue` may find something for: one pass over every topic,
        for a server's first round."""
        masters = self.masters
        return {topic for topic, cells in self.qd.items() if not _publishes(cells, masters)}

    def read_write_mismatch(self, topic: str) -> dict[str, Any] | None:
        """The detail of ``read_write_mismatch`` when a readable and writable QueueData has fewer
        read than write queues (messages nobody reads); None otherwise."""
        if topic not in self.unread:
            return None
        unread = [
            (name, read, write)
            for name, (read, write, perm, _, _) in sorted(self.qd.get(topic, {}).items())
            if perm & PERM_READ and perm & PERM_WRITE and read < write
        ]
        if not unread:
            return None
        return {
            "unread_write_queues": sum(w - max(r, 0) for _, r, w in unread),
            "queue_datas": [{"broker_name": n, "read_queue_nums": r, "write_queue_nums": w} for n, r, w in unread],
        }


def _publishes(cells: Cells, masters: set[str]) -> bool:
    """A producer gets a queue: a QueueData with write perm and write queues on a group with a master."""
    for name, value in cells.items():
        if value[2] & PERM_WRITE and value[1] > 0 and name in masters:
            return True
    return False
