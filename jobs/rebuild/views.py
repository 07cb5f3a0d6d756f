"""The JSON views of ``nsaudit route``/``cluster``/``diff``, built from either side of the audit.

The Python side is a replayed ``RouteInfoManager`` (what the server itself answers:
``pickup_topic_route_data`` and ``get_all_cluster_info``); the lake side is the history rows valid at
an instant, gathered into a :class:`TableState`. Both end in the same plain dicts, so the equality
tests compare like with like and the CLI prints exactly what the tests checked.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# QueueData as (read_queue_nums, write_queue_nums, perm, topic_sys_flag)
Queue = tuple[int, int, int, int]


@dataclass
class TableState:
    """The four route tables a view needs, as plain values (the live table is not part of a route).

    Attributes:
        topic_queue_table: topic -> broker name -> QueueData tuple.
        broker_addr_table: broker name -> (cluster, broker id -> address).
        cluster_addr_table: cluster -> broker names.
        filter_server_table: broker address -> filter-server addresses (non-empty).
    """

    topic_queue_table: dict[str, dict[str, Queue]] = field(default_factory=dict)
    broker_addr_table: dict[str, tuple[str, dict[int, str]]] = field(default_factory=dict)
    cluster_addr_table: dict[str, set[str]] = field(default_factory=dict)
    filter_server_table: dict[str, list[str]] = field(default_factory=dict)

    def put_queue(self, topic: str, broker_name: str, queue: Queue) -> None:
        """Set ``topicQueueTable[topic][broker_name]``."""
        self.topic_queue_table.setdefault(topic, {})[broker_name] = queue

    def put_addr(self, broker_name: str, broker_id: int, cluster: str, addr: str) -> None:
        """Set ``brokerAddrTable[broker_name].brokerAddrs[broker_id]`` (one cluster per BrokerData)."""
        self.broker_addr_table.setdefault(broker_name, (cluster, {}))[1][broker_id] = addr

    def put_cluster(self, cluster: str, broker_name: str) -> None:
        """Add ``broker_name`` to ``clusterAddrTable[cluster]``."""
        self.cluster_addr_table.setdefault(cluster, set()).add(broker_name)

    def put_filter(self, addr: str, servers: list[str]) -> None:
        """Set ``filterServerTable[addr]``."""
        self.filter_server_table[addr] = list(servers)


# ---------------------------------------------------------------------------- views


def broker_data_view(cluster: str, broker_name: str, broker_addrs: dict[int, str]) -> dict[str, Any]:
    return {
        "brokerAddrs": {i: broker_addrs[i] for i in sorted(broker_addrs)},
        "brokerName": broker_name,
        "cluster": cluster,
    }


def queue_data_view(broker_name: str, queue: Queue) -> dict[str, Any]:
    read, write, perm, sys_flag = queue
    return {
        "brokerName": broker_name,
        "perm": perm,
        "readQueueNums": read,
        "topicSysFlag": sys_flag,
        "writeQueueNums": write,
    }


def route_view(state: TableState, topic: str) -> dict[str, Any] | None:
    """GET_ROUTEINFO_BY_TOPIC's TopicRouteData (docs/nameserver-semantics.md §2.10); ``None`` means TOPIC_NOT_EXIST.

    Views are RocketMQ's JSON shapes as plain data (docs/remoting-protocol.md §10.6): fields in
    alphabetical order, lists sorted by broker name, ``brokerAddrs`` keyed by int broker id in numeric
    order. ``nameserver.codec.fastjson.dumps(view, standard=True)`` writes the standard form the CLI
    prints.

    Example:
        >>> state = TableState()
        >>> state.put_queue("TopicA", "broker-a", (8, 8, 6, 0))
        >>> state.put_addr("broker-a", 0, "C1", "10.0.0.1:10911")
        >>> fastjson.dumps(route_view(state, "TopicA"), standard=True)
        b'{"brokerDatas":[{"brokerAddrs":{"0":"10.0.0.1:10911"},"brokerName":"broker-a","cluster":"C1"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]}'
    """
    queues = state.topic_queue_table.get(topic)
    if not queues:
        return None
    names = sorted(queues)
    broker_datas = []
    filter_table: dict[str, list[str]] = {}
    for name in names:
        entry = state.broker_addr_table.get(name)
        if entry is None or not entry[1]:
            continue
        cluster, addrs = entry
        broker_datas.append(broker_data_view(cluster, name, addrs))
        for addr in addrs.values():
            servers = state.filter_server_table.get(addr)
            if servers:
                filter_table[addr] = list(servers)
    if not broker_datas:  # §2.10 step 4: impossible by I4, kept for fidelity
        return None
    return {
        "brokerDatas": broker_datas,
        "filterServerTable": {a: filter_table[a] for a in sorted(filter_table)},
        "queueDatas": [queue_data_view(n, queues[n]) for n in names],
    }


def cluster_info_view(state: TableState) -> dict[str, Any]:
    """GET_BROKER_CLUSTER_INFO's ClusterInfo (docs/nameserver-semantics.md §2.11): dangling names
    included; shaped as :func:`route_view` says."""
    return {
        "brokerAddrTable": {
            name: broker_data_view(state.broker_addr_table[name][0], name, state.broker_addr_table[name][1])
            for name in sorted(state.broker_addr_table)
            if state.broker_addr_table[name][1]
        },
        "clusterAddrTable": {
            cluster: sorted(state.cluster_addr_table[cluster])
            for cluster in sorted(state.cluster_addr_table)
            if state.cluster_addr_table[cluster]
        },
    }


# ---------------------------------------------------------------------------- diff

# table name in the view -> (key field names, value field names or None for set membership)
_DIFF_TABLES = (
    ("topicQueueTable", ("topic", "brokerName"), ("readQueueNums", "writeQueueNums", "perm", "topicSysFlag")),
    ("brokerAddrTable", ("brokerName", "brokerId"), ("cluster", "brokerAddr")),
    ("clusterAddrTable", ("cluster", "brokerName"), None),
    ("filterServerTable", ("brokerAddr",), ("filterServers",)),
)


def _cells(state: TableState) -> dict[str, dict[tuple[Any, ...], tuple[Any, ...]]]:
    """Every table as a flat map key tuple -> value tuple (membership has the empty tuple)."""
    return {
        "topicQueueTable": {
            (topic, name): queue for topic, queues in state.topic_queue_table.items() for name, queue in queues.items()
        },
        "brokerAddrTable": {
            (name, broker_id): (cluster, addr)
            for name, (cluster, addrs) in state.broker_addr_table.items()
            for broker_id, addr in addrs.items()
        },
        "clusterAddrTable": {
            (cluster, name): () for cluster, names in state.cluster_addr_table.items() for name in names
        },
        "filterServerTable": {(addr,): (list(servers),) for addr, servers in state.filter_server_table.items()},
    }


def diff_view(before: TableState, after: TableState) -> dict[str, Any]:
    """What changed per table between two states: ``added``, ``removed`` and ``changed`` cells.

    Each entry names its key fields; ``added`` carries ``after``, ``removed`` carries ``before``,
    ``changed`` both. Set membership (``clusterAddrTable``) has no value, so it is never ``changed``.
    Entries are sorted by key.

    Example:
        ``{"topicQueueTable":{"added":[],"changed":[{"after":{"perm":4,...},"before":{"perm":6,...},
        "brokerName":"broker-a","topic":"TopicA"}],"removed":[]},...}``
    """
    cells_before, cells_after = _cells(before), _cells(after)
    result: dict[str, Any] = {}
    for table, key_fields, value_fields in _DIFF_TABLES:
        old, new = cells_before[table], cells_after[table]
        added, removed, changed = [], [], []
        for key in sorted(old.keys() | new.keys()):
            entry = dict(zip(key_fields, key, strict=True))
            if key not in old:
                added.append(_with_values(entry, value_fields, None, new[key]))
            elif key not in new:
                removed.append(_with_values(entry, value_fields, old[key], None))
            elif old[key] != new[key]:
                changed.append(_with_values(entry, value_fields, old[key], new[key]))
        result[table] = {"added": added, "changed": changed, "removed": removed}
    return result


def _with_values(
    entry: dict[str, Any],
    value_fields: tuple[Any, ...] | None,
    before: tuple[Any, ...] | None,
    after: tuple[Any, ...] | None,
) -> dict[str, Any]:
    if value_fields is not None:
        if after is not None:
            entry["after"] = dict(sorted(zip(value_fields, after, strict=True)))
        if before is not None:
            entry["before"] = dict(sorted(zip(value_fields, before, strict=True)))
    return dict(sorted(entry.items()))
