"""The Python side of the rebuild's equality tests: the views of what a replayed ``RouteInfoManager``
answers, and the tables at an instant from the walk's interval rows, in the CLI's view shapes
(:mod:`jobs.rebuild.views`)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from jobs.rebuild.views import TableState, broker_data_view, queue_data_view
from jobs.rebuild.walk import ADDR, CLUSTER, QUEUE, IntervalRow
from nameserver.routes.manager import BrokerData, ClusterInfo, RouteInfoManager, TopicRouteData


def table_state_from_routes(routes: RouteInfoManager) -> TableState:
    """The tables of a (replayed) ``RouteInfoManager``, copied."""
    state = TableState()
    for topic, queues in routes.topic_queue_table.items():
        for name, qd in queues.items():
            state.put_queue(topic, name, (qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag))
    for name, broker_data in routes.broker_addr_table.items():
        for broker_id, addr in broker_data.broker_addrs.items():
            state.put_addr(name, broker_id, broker_data.cluster, addr)
    for cluster, names in routes.cluster_addr_table.items():
        for name in names:
            state.put_cluster(cluster, name)
    for addr, servers in routes.filter_server_table.items():
        state.put_filter(addr, servers)
    return state


def route_view_of(route: TopicRouteData | None) -> dict[str, Any] | None:
    """The view of what ``RouteInfoManager.pickup_topic_route_data`` answered (the server's own code)."""
    if route is None:
        return None
    return {
        "brokerDatas": [_broker_view_of(b) for b in route.broker_datas],
        "filterServerTable": {a: list(route.filter_server_table[a]) for a in sorted(route.filter_server_table)},
        "queueDatas": [
            queue_data_view(q.broker_name, (q.read_queue_nums, q.write_queue_nums, q.perm, q.topic_sys_flag))
            for q in route.queue_datas
        ],
    }


def cluster_info_view_of(info: ClusterInfo) -> dict[str, Any]:
    """The view of what ``RouteInfoManager.get_all_cluster_info`` answered."""
    return {
        "brokerAddrTable": {n: _broker_view_of(info.broker_addr_table[n]) for n in sorted(info.broker_addr_table)},
        "clusterAddrTable": {c: sorted(info.cluster_addr_table[c]) for c in sorted(info.cluster_addr_table)},
    }


def _broker_view_of(broker_data: BrokerData) -> dict[str, Any]:
    return broker_data_view(broker_data.cluster, broker_data.broker_name, broker_data.broker_addrs)


def table_state_at(intervals: Iterable[IntervalRow], at_ms: int) -> TableState:
    """The tables at instant ``at_ms`` from interval rows: ``from <= at < to`` (``to`` null = open)."""
    state = TableState()
    for key, value, from_ms, to_ms, _from_seq, _to_seq in intervals:
        if from_ms <= at_ms and (to_ms is None or at_ms < to_ms):
            put_cell(state, key, value)
    return state


def put_cell(state: TableState, key: tuple, value: Any) -> None:
    """Add one cell (walk key and value) to a :class:`TableState`."""
    kind = key[0]
    if kind == QUEUE:
        state.put_queue(key[1], key[2], tuple(value))
    elif kind == ADDR:
        state.put_addr(key[1], key[2], value[0], value[1])
    elif kind == CLUSTER:
        state.put_cluster(key[1], key[2])
    else:
        state.put_filter(key[1], list(value))
