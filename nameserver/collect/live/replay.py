"""Collected streams fed back through the live judge, as the collector fed it.

The rounds of every stream (``observe_*`` and ``observed_*`` events, docs/event-log.md,
Observations) are merged in ``ts`` order and each round's answers rebuilt as a
:class:`~nameserver.collect.view.ServerView`, then given to a :class:`~.judge.LiveJudge`. What
comes out is every live finding, with its start and end, and every ``live_incident`` event the
judge wrote: what the collector would have judged live from the same answers. The tests compare
it with the nightly audit of the same streams.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from nameserver.collect.live.findings import LiveFinding, StreamEvent
from nameserver.collect.live.judge import LiveJudge
from nameserver.collect.live.rules import INSTANT_KINDS
from nameserver.collect.view import ServerView
from nameserver.eventlog.segments import read_events


@dataclass
class Replayed:
    """What a replay judged.

    Attributes:
        findings: every finding that held for a millisecond or more (or is of an instant, a
            ``topic_perm_changed``), in the order they opened.
        events: the ``(stream, live_incident event)`` pairs the judge wrote.
        recorded: the ``live_incident`` events the streams already held (what was judged live).
    """

    findings: list[LiveFinding] = field(default_factory=list)
    events: list[StreamEvent] = field(default_factory=list)
    recorded: list[dict[str, Any]] = field(default_factory=list)


def _rounds(events: Iterable[dict[str, Any]]) -> Iterator[list[dict[str, Any]]]:
    """Consecutive events of one stream with one ``ts`` (a round's answers share it)."""
    batch: list[dict[str, Any]] = []
    for event in events:
        if batch and (event["ts"] != batch[0]["ts"] or event["ns"] != batch[0]["ns"]):
            yield batch
            batch = []
        batch.append(event)
    if batch:
        yield batch


def replay(events_dir: str | Path, streams: Iterable[str], grace_ms: int) -> Replayed:
    """Judge the collected ``streams`` under ``events_dir`` round by round.

    Args:
        events_dir: the collector's ``--events``.
        streams: the observation streams (``ns``) to read.
        grace_ms: the divergence grace (:func:`~.rules.live_grace_ms`).
    """
    judge = LiveJudge(grace_ms)
    judge.book.log = []
    out = Replayed()
    logs = [read_events(events_dir, ns, []) for ns in streams]
    merged = heapq.merge(*logs, key=lambda e: (e["ts"], e["ns"], e["seq"]))
    views: dict[str, ServerView] = {}
    for batch in _rounds(merged):
        ns, now = batch[0]["ns"], batch[0]["ts"]
        types = {e["type"] for e in batch}
        for e in batch:
            if e["type"] == "observe_start" and e.get("interval_ms"):
                # the nightly audit's poll interval of a stream: the longest it logged
                judge.perms.polls[ns] = max(judge.perms.polls.get(ns, 0), int(e["interval_ms"]))
        out.recorded += [e for e in batch if e["type"] == "live_incident"]
        written: list[StreamEvent] = []
        if types & {"observe_start", "observe_stop"}:
            views.pop(ns, None)
            written += judge.stopped(ns, now)
        if "observe_error" in types:
            views.pop(ns, None)
            written += judge.failed(ns, now)
        topics: set[str] | None
        brokers: set[str] | None
        if "observe_snapshot" in types:
            views[ns] = ServerView({}, {})
            topics = brokers = None
        else:
            topics, brokers = set(), set()
        entries = [e for e in batch if e["type"] in ("observed_broker", "observed_route")]
        if entries and ns in views:
            views[ns] = _applied(views[ns], entries, topics, brokers)
            written += judge.observed(ns, now, views[ns], topics, brokers)
        elif "observe_snapshot" in types:
            written += judge.observed(ns, now, views[ns], None, None)
        out.events += written
    out.findings = [f for f in judge.book.log if f.end_ms is None or f.end_ms > f.start_ms or f.kind in INSTANT_KINDS]
    return out


def _applied(
    view: ServerView, entries: list[dict[str, Any]], topics: set[str] | None, brokers: set[str] | None
) -> ServerView:
    """``view`` with a round's ``observed_broker`` / ``observed_route`` entries applied; the
    brokers and topics they name are added to ``brokers`` and ``topics`` (None: a snapshot round)."""
    table, routes = dict(view.broker_addr_table), dict(view.routes)
    for e in entries:
        if e["type"] == "observed_broker":
            if brokers is not None:
                brokers.add(e["broker_name"])
            if e["broker_addrs"] is None:
                table.pop(e["broker_name"], None)
            else:
                table[e["broker_name"]] = {
                    "cluster": e["cluster"],
                    "broker_name": e["broker_name"],
                    "broker_addrs": e["broker_addrs"],
                }
        else:
            if topics is not None:
                topics.add(e["topic"])
            routes[e["topic"]] = (
                None
                if e["queue_datas"] is None
                else {k: e[k] for k in ("queue_datas", "broker_datas", "filter_server_table")}
            )
    return ServerView(table, routes)
