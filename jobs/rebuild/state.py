"""A name server's end-of-day state (``ns_state.state_json``), written by one day's rebuild and read
by the next, so a broker registered yesterday and heartbeating today is in today's tables.

The JSON object (format 1; keys sorted, compact) is described in docs/audit.md, "Rebuild".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from nameserver.model import DataVersion, QueueData
from nameserver.routes.manager import BrokerLiveInfo
from nameserver.routes.replay import RouteReplayer

STATE_FORMAT = 1

# an open interval: (value, valid_from_ms, from_seq); cells are keyed as in jobs.rebuild.walk
OpenCells = dict[tuple[Any, ...], list[Any]]


@dataclass
class CarriedState:
    """What a day's walk starts from: tables, open intervals, and what the tables cannot hold."""

    replayer: RouteReplayer
    open_cells: OpenCells = field(default_factory=dict)
    live_digest: dict[str, str | None] = field(default_factory=dict)
    topics_by_digest: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    run_start_seq: int | None = None
    last_seq: int | None = None
    last_ts: int | None = None


def restore(state: dict[str, Any], journal: list[Any], day_start_ms: int) -> CarriedState:
    """Rebuild a replayer from a state object; every open interval restarts at ``day_start_ms``.

    The tables are filled directly, not through operations, so nothing is journaled.
    """
    if state.get("format") != STATE_FORMAT:
        raise ValueError(f"ns_state format {state.get('format')!r} is not {STATE_FORMAT}")
    replayer = RouteReplayer(state.get("broker_expiry_ms") or 120_000, journal=journal)
    replayer.up = bool(state["up"])
    replayer.last_seq, replayer.last_ts = state.get("last_seq"), state.get("last_ts")
    routes = replayer.routes
    carried = CarriedState(
        replayer, run_start_seq=state.get("run_start_seq"), last_seq=state.get("last_seq"), last_ts=state.get("last_ts")
    )
    cells = carried.open_cells
    routes.load_cells(
        queues=[
            (t, QueueData(name, read, write, perm, flag)) for t, name, read, write, perm, flag, _ in state["queues"]
        ],
        addrs=[(name, cluster, broker_id, addr) for name, broker_id, cluster, addr, _ in state["addrs"]],
        clusters=[(cluster, name) for cluster, name, _ in state["clusters"]],
        filters=[(addr, servers) for addr, servers, _ in state["filters"]],
    )
    for topic, name, read, write, perm, sys_flag, seq in state["queues"]:
        cells[("queue", topic, name)] = [(read, write, perm, sys_flag), day_start_ms, seq]
    for name, broker_id, cluster, addr, seq in state["addrs"]:
        cells[("addr", name, broker_id)] = [(cluster, addr), day_start_ms, seq]
    for cluster, name, seq in state["clusters"]:
        cells[("cluster", cluster, name)] = [True, day_start_ms, seq]
    for addr, servers, seq in state["filters"]:
        cells[("filter", addr)] = [tuple(servers), day_start_ms, seq]
    # ascending last_update keeps the live table's scan order (RouteInfoManager's invariant)
    for live in sorted(state["live"], key=lambda e: (e["last_update"], e["broker_addr"])):
        dv = live["data_version"]
        routes._put_live(
            live["broker_addr"],
            BrokerLiveInfo(
                live["last_update"],
                DataVersion(dv["timestamp"], dv["counter"]),
                live["channel"],
                live["ha_server_addr"],
                live["cluster"],
                live["broker_name"],
                live["broker_id"],
            ),
        )
        carried.live_digest[live["broker_addr"]] = live["topics_digest"]
    for digest, topics in state["topics_by_digest"].items():
        replayer.learn_topics(digest, topics)
        carried.topics_by_digest[digest] = topics
    return carried


def snapshot(
    ns: str,
    day: str,
    replayer: RouteReplayer,
    open_cells: OpenCells,
    live_digest: dict[str, str | None],
    topics_by_digest: dict[str, list[dict[str, Any]]],
    run_start_seq: int | None,
    last_seq: int | None,
    last_ts: int | None,
) -> dict[str, Any]:
    """The state object of a walk's end (``open_cells`` must equal the tables: the walk flushed).

    Its keys (format 1) are listed in docs/audit.md, "Rebuild"; ``from_seq`` is the seq of the event
    that set a value and survives the day boundary, so a history row continued at 00:00 still names
    the event it came from.
    """
    queues, addrs, clusters, filters = [], [], [], []
    for key, (value, _from_ms, seq) in open_cells.items():
        kind = key[0]
        if kind == "queue":
            queues.append([key[1], key[2], *value, seq])
        elif kind == "addr":
            addrs.append([key[1], key[2], value[0], value[1], seq])
        elif kind == "cluster":
            clusters.append([key[1], key[2], seq])
        else:
            filters.append([key[1], list(value), seq])
    live = _live_entries(replayer, live_digest)
    digests = sorted({e["topics_digest"] for e in live if e["topics_digest"] in topics_by_digest})
    return {
        "addrs": sorted(addrs),
        "broker_expiry_ms": replayer.routes.broker_expiry_ms,
        "clusters": sorted(clusters),
        "date": day,
        "filters": sorted(filters),
        "format": STATE_FORMAT,
        "last_seq": last_seq,
        "last_ts": last_ts,
        "live": live,
        "ns": ns,
        "queues": sorted(queues),
        "run_start_seq": run_start_seq,
        "topics_by_digest": {d: topics_by_digest[d] for d in digests},
        "up": replayer.up,
    }


def _live_entries(replayer: RouteReplayer, live_digest: dict[str, str | None]) -> list[dict[str, Any]]:
    """The state's ``live`` entries: the ``broker_live_table``, by broker address."""
    live = []
    for addr in sorted(replayer.routes.broker_live_table):
        info = replayer.routes.broker_live_table[addr]
        live.append(
            {
                "broker_addr": addr,
                "broker_id": info.broker_id,
                "broker_name": info.broker_name,
                "channel": info.channel,
                "cluster": info.cluster,
                "data_version": {"counter": info.data_version.counter, "timestamp": info.data_version.timestamp},
                "ha_server_addr": info.ha_server_addr,
                "last_update": info.last_update,
                "topics_digest": live_digest.get(addr),
            }
        )
    return live


def dumps(state: dict[str, Any]) -> str:
    """Compact JSON text with sorted keys (a rerun writes the same bytes)."""
    return orjson.dumps(state, option=orjson.OPT_SORT_KEYS).decode()


def loads(text: str) -> dict[str, Any]:
    """Inverse of :func:`dumps`."""
    state: dict[str, Any] = orjson.loads(text)
    return state
