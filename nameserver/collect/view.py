"""One complete observation of a name server, as plain values (no I/O).

A :class:`ServerView` is what GET_BROKER_CLUSTER_INFO (106), GET_ALL_TOPIC_LIST_FROM_NAMESERVER
(206) and GET_ROUTEINFO_BY_TOPIC (105) answered in one round, in the canonical form the
``observed_broker`` and ``observed_route`` events carry (docs/event-log.md, Observations): lists
sorted by broker name, broker ids ascending, so two views compare equal exactly when the server
answered the same.

Example:
    >>> broker_entry({"cluster": "C", "broker_name": "b", "broker_addrs": {1: "h:2", 0: "h:1"}})["broker_addrs"]
    [{'broker_id': 0, 'broker_addr': 'h:1'}, {'broker_id': 1, 'broker_addr': 'h:2'}]
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class ServerView:
    """What one server answered in one round.

    Attributes:
        broker_addr_table: broker name -> :func:`broker_entry` of its ClusterInfo BrokerData.
        routes: topic (every topic of the topic list) -> :func:`route_entry`, or None where the
            server answered TOPIC_NOT_EXIST.
    """

    broker_addr_table: Mapping[str, dict[str, Any]] = field(default_factory=dict)
    routes: Mapping[str, dict[str, Any] | None] = field(default_factory=dict)


def _addrs(addrs: Mapping[int, str]) -> list[dict[str, Any]]:
    return [{"broker_id": int(i), "broker_addr": a} for i, a in sorted(addrs.items()) if a is not None]


def broker_entry(broker_data: Mapping[str, Any]) -> dict[str, Any]:
    """A parsed BrokerData (``fastjson.parse_route`` shape) in the events' form; a missing cluster
    or name (a body that lacks it) becomes ``""``."""
    return {
        "cluster": broker_data.get("cluster") or "",
        "broker_name": broker_data.get("broker_name") or "",
        "broker_addrs": _addrs(broker_data.get("broker_addrs") or {}),
    }


def cluster_view(cluster_info: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """A parsed ClusterInfo (``fastjson.parse_cluster_info``) as broker name -> :func:`broker_entry`."""
    return {name: broker_entry(data) for name, data in sorted(cluster_info["broker_addr_table"].items())}


def route_entry(route: Mapping[str, Any]) -> dict[str, Any]:
    """A parsed TopicRouteData (``fastjson.parse_route``) as the keys of an ``observed_route``."""
    queue_datas = sorted(
        (
            {
                "broker_name": q.get("broker_name") or "",
                "read_queue_nums": q["read_queue_nums"],
                "write_queue_nums": q["write_queue_nums"],
                "perm": q["perm"],
                "topic_sys_flag": q["topic_sys_flag"],
            }
            for q in route["queue_datas"]
        ),
        key=lambda q: (q["broker_name"], q["read_queue_nums"], q["write_queue_nums"], q["perm"], q["topic_sys_flag"]),
    )
    broker_datas = sorted(
        (broker_entry(b) for b in route["broker_datas"]), key=lambda b: (b["broker_name"], b["cluster"])
    )
    filters = [
        {"broker_addr": addr, "filter_servers": [s for s in servers if s is not None]}
        for addr, servers in sorted(route["filter_server_table"].items())
    ]
    return {"queue_datas": queue_datas, "broker_datas": broker_datas, "filter_server_table": filters}
