"""One name server's day, walked event by event with the server's own route-table code.

The rebuild hands each server's interesting events (``jobs.rebuild.marking.with_interesting``) to
:func:`walk_day`, which applies them with ``RouteReplayer`` (so the lake means exactly what the
server did) and turns the ``RouteInfoManager`` journal into validity intervals clipped to the UTC
day (:class:`DayWalk`; docs/audit.md, "Rebuild").
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from common.timeutil import DAY_MS, day_start_ms
from jobs.rebuild import state as rebuild_state
from nameserver.routes.manager import RouteInfoManager
from nameserver.routes.replay import RouteReplayer

QUEUE, ADDR, CLUSTER, FILTER = "queue", "addr", "cluster", "filter"

# (key, value, valid_from_ms, valid_to_ms or None, from_seq, to_seq or None); key = (kind, *cell)
IntervalRow = tuple[tuple[Any, ...], Any, int, int | None, int | None, int | None]
# (start_ms, stop_ms or None, start_seq, stop_seq, stop_reason)
RunRow = tuple[int, int | None, int | None, int | None, str]


@dataclass
class DayResult:
    """What one server's day produced.

    Attributes:
        intervals: validity intervals of every cell, in the order they were closed.
        runs: up intervals (``ns_runs``).
        state: the end-of-day state object (``jobs.rebuild.state``).
        up_at_start: whether the server was up at 00:00 (from the previous state; True without one).
        started_without_state: no previous state and the day did not begin with ``ns_start``.
        unresolved_topics: 103 events whose topic list was never logged (applied with no topics).
        walked: events applied one by one.
    """

    intervals: list[IntervalRow] = field(default_factory=list)
    runs: list[RunRow] = field(default_factory=list)
    state: dict[str, Any] = field(default_factory=dict)
    up_at_start: bool = True
    started_without_state: bool = False
    unresolved_topics: int = 0
    walked: int = 0


def _cell_key(entry: tuple[Any, ...]) -> tuple[Any, ...]:
    """Journal entry (``RouteInfoManager`` docstring) -> cell key."""
    kind = entry[0]
    if kind == QUEUE or kind == CLUSTER:
        return (kind, entry[1], entry[2])
    if kind == ADDR:
        return (ADDR, entry[1], entry[2])
    return (FILTER, entry[1])


def _cell_value(routes: RouteInfoManager, key: tuple[Any, ...]) -> Any:
    """The cell's current value, or None when the cell is absent."""
    kind = key[0]
    if kind == QUEUE:
        qd = routes.topic_queue_table.get(key[1], {}).get(key[2])
        return None if qd is None else (qd.read_queue_nums, qd.write_queue_nums, qd.perm, qd.topic_sys_flag)
    if kind == ADDR:
        broker_data = routes.broker_addr_table.get(key[1])
        if broker_data is None:
            return None
        addr = broker_data.broker_addrs.get(key[2])
        return None if addr is None else (broker_data.cluster, addr)
    if kind == CLUSTER:
        return True if key[2] in routes.cluster_addr_table.get(key[1], ()) else None
    servers = routes.filter_server_table.get(key[1])
    return tuple(servers) if servers else None


class DayWalk:
    """Walks one server's day; feed events in seq order to :meth:`apply`, then :meth:`finish`.

    * A cell touched by an event is *dirty*; when the clock moves past that event's ``ts`` the cell's
      value is compared with its open interval, which is closed (``to`` = that ts, ``to_seq`` = the
      seq of the last event that touched it) and a new one opened when the value differs. Values
      that lived for less than a millisecond are therefore never written: the state at T is the
      state after *every* event with ``ts <= T``, so no instant saw them.
    * ``ns_start``/``ns_stop`` clear the tables through ``RouteInfoManager.clear``, whose journal
      closes every interval.
    * Intervals are clipped to the UTC day: the walk starts from the previous day's state with every
      interval open at 00:00, and ends with the open ones (``to`` null) and the new state.

    Time is the event's ``ts`` clamped to the running maximum (a decreasing ``ts`` is a data-quality
    finding, docs/event-log.md) and to the day, so intervals are well-formed whatever the clocks did.
    The replayer itself gets the raw ``ts``, as the server stored it.
    """

    def __init__(self, ns: str, day: dt.date, state: Mapping[str, Any] | None, first_type: str | None = None):
        """
        Args:
            ns: the name server.
            day: the UTC day walked.
            state: the previous day's state object, or None when the lake has none.
            first_type: type of the server's first event of the day (decides whether a missing
                state matters: a day beginning with ``ns_start`` needs none).
        """
        self.ns, self.day = ns, day
        self.day_start = day_start_ms(day)
        self.day_last = self.day_start + DAY_MS - 1
        self.journal: list[Any] = []
        self.result = DayResult()
        if state is not None:
            carried = rebuild_state.restore(dict(state), self.journal, self.day_start)
        else:
            carried = rebuild_state.CarriedState(RouteReplayer(journal=self.journal))
            self.result.started_without_state = first_type not in (None, "ns_start")
        self.replayer = carried.replayer
        self.open = carried.open_cells
        self.live_digest = carried.live_digest
        self.topics_by_digest = carried.topics_by_digest
        self.last_seq, self.last_ts = carried.last_seq, carried.last_ts
        self.result.up_at_start = self.replayer.up
        # the run open at 00:00; a server with no state whose day begins with ns_start has none yet
        self.run: list[Any] | None = None
        if self.replayer.up and not (state is None and first_type == "ns_start"):
            self.run = [self.day_start, carried.run_start_seq]
        self._clock = self.day_start
        self._pending_ts: int | None = None
        self._dirty: dict[tuple[Any, ...], int | None] = {}

    # ---------------------------------------------------------------- events

    def apply(self, event: Mapping[str, Any]) -> None:
        """Apply one event (event-log keys; ``ts`` in ms; ``topics`` resolved where known)."""
        ts = min(max(self._clock, event["ts"], self.day_start), self.day_last)
        if self._pending_ts is not None and ts != self._pending_ts:
            self._flush()
        self._pending_ts = self._clock = ts
        seq = event.get("seq")
        kind = event["type"]
        if kind == "ns_start":
            if self.run is not None:
                self._close_run(ts, seq, "restart")  # no ns_stop before it: the server crashed
            self.run = [ts, seq]
        elif kind == "ns_stop" and self.run is not None:
            self._close_run(ts, seq, "ns_stop")
            self.run = None
        event = self._with_topics(event)
        self.replayer.apply(event)
        self.result.walked += 1
        if kind in ("register", "heartbeat") and event.get("request_code") == 103:
            self.live_digest[event["broker_addr"]] = event.get("topics_digest")
        for entry in self.journal:
            self._dirty[_cell_key(entry)] = seq
        self.journal.clear()

    def _with_topics(self, event: Mapping[str, Any]) -> Mapping[str, Any]:
        """Learn a carried topic list, or give an unresolvable 103 an empty one (counted)."""
        if event["type"] not in ("register", "heartbeat") or event.get("request_code") != 103:
            return event
        digest, topics = event.get("topics_digest"), event.get("topics")
        if topics is not None:
            if digest is not None and digest not in self.topics_by_digest:
                self.topics_by_digest[digest] = list(topics)
            return event
        if digest is not None and digest in self.topics_by_digest:
            return event  # the replayer learned it with the list
        # the contract guarantees the list in the same segment; a lost line breaks that, and one
        # unresolvable registration must not stop the day's rebuild
        self.result.unresolved_topics += 1
        return {**event, "topics": []}

    def _close_run(self, ts: int, seq: int | None, reason: str) -> None:
        start, start_seq = self.run  # type: ignore[misc]  # called only while a run is open
        self.result.runs.append((start, ts, start_seq, seq, reason))

    def _flush(self) -> None:
        """Turn the dirty cells of the events at ``_pending_ts`` into interval changes."""
        ts = self._pending_ts
        routes = self.replayer.routes
        for key, seq in self._dirty.items():
            value = _cell_value(routes, key)
            current = self.open.get(key)
            if current is not None:
                if current[0] == value:
                    continue
                if current[1] < ts:  # zero-length values were never visible
                    self.result.intervals.append((key, current[0], current[1], ts, current[2], seq))
                del self.open[key]
            if value is not None:
                self.open[key] = [value, ts, seq]
        self._dirty.clear()

    # ---------------------------------------------------------------- end of day

    def finish(self, last_seq: int | None = None, last_ts: int | None = None) -> DayResult:
        """Close the day: open intervals and run stay open (``to`` null), and the state is taken.

        Args:
            last_seq / last_ts: the server's last event of the day when the walk did not see it
                (the rebuild walks only interesting events); default: the last one walked.
        """
        if self._pending_ts is not None:
            self._flush()
        for key, (value, from_ms, from_seq) in sorted(self.open.items(), key=lambda kv: kv[0]):
            self.result.intervals.append((key, value, from_ms, None, from_seq, None))
        if self.run is not None:
            self.result.runs.append((self.run[0], None, self.run[1], None, "open"))
        walked_seq, walked_ts = self.replayer.last_seq, self.replayer.last_ts
        if last_seq is None or (walked_seq is not None and walked_seq > last_seq):
            last_seq, last_ts = walked_seq, walked_ts
        self.result.state = rebuild_state.snapshot(
            self.ns,
            self.day.isoformat(),
            self.replayer,
            self.open,
            self.live_digest,
            self.topics_by_digest,
            None if self.run is None else self.run[1],
            last_seq,
            last_ts,
        )
        return self.result


def walk_day(
    ns: str,
    day: dt.date,
    state: Mapping[str, Any] | None,
    events: Iterable[Mapping[str, Any]],
    last_seq: int | None = None,
    last_ts: int | None = None,
) -> DayResult:
    """Walk ``events`` (one server, one day, ascending seq) from ``state``; see :class:`DayWalk`."""
    events = list(events)
    walk = DayWalk(ns, day, state, events[0]["type"] if events else None)
    for event in events:
        walk.apply(event)
    return walk.finish(last_seq, last_ts)


# ---------------------------------------------------------------------------- Arrow adapter

# the walk's output rows, one Arrow/Spark schema for every kind (jobs.rebuild.walker.WALK_OUTPUT_SCHEMA)
OUTPUT_COLUMNS = (
    "kind",
    "ns",
    "topic",
    "broker_name",
    "cluster",
    "broker_id",
    "broker_addr",
    "read_queue_nums",
    "write_queue_nums",
    "perm",
    "topic_sys_flag",
    "filter_servers",
    "valid_from_ms",
    "valid_to_ms",
    "from_seq",
    "to_seq",
    "stop_reason",
    "up",
    "up_at_start",
    "last_seq",
    "last_ts_ms",
    "events",
    "interesting_events",
    "started_without_state",
    "unresolved_topics",
    "state_json",
)


def walk_rows(rows: list[dict[str, Any]], day: dt.date) -> dict[str, list[Any]]:
    """Walk one server's group of the rebuild's walk input and return the output as columns.

    Args:
        rows: the server's ``meta`` row (``is_meta``: previous ``state_json`` and the day's
            ``day_events``, ``day_last_seq``, ``day_last_ts``, ``day_first_type``) and its
            interesting events (event-log keys, ``ts`` in ms), in any order.
        day: the UTC day.
    """
    meta = next(r for r in rows if r["is_meta"])
    events = sorted((r for r in rows if not r["is_meta"]), key=lambda r: r["seq"])
    state = rebuild_state.loads(meta["prev_state_json"]) if meta["prev_state_json"] is not None else None
    ns = meta["ns"]
    walk = DayWalk(ns, day, state, meta["day_first_type"])
    for event in events:
        walk.apply(event)
    result = walk.finish(meta["day_last_seq"], meta["day_last_ts"])
    out: dict[str, list[Any]] = {name: [] for name in OUTPUT_COLUMNS}

    def add(**values: Any) -> None:
        for name in OUTPUT_COLUMNS:
            out[name].append(values.get(name))

    for interval in result.intervals:
        add(**_interval_values(ns, interval))
    for start_ms, stop_ms, start_seq, stop_seq, reason in result.runs:
        add(
            kind="run",
            ns=ns,
            valid_from_ms=start_ms,
            valid_to_ms=stop_ms,
            from_seq=start_seq,
            to_seq=stop_seq,
            stop_reason=reason,
        )
    add(
        kind="state",
        ns=ns,
        up=result.state["up"],
        up_at_start=result.up_at_start,
        last_seq=result.state["last_seq"],
        last_ts_ms=result.state["last_ts"],
        events=meta["day_events"] or 0,
        interesting_events=result.walked,
        started_without_state=result.started_without_state,
        unresolved_topics=result.unresolved_topics,
        state_json=rebuild_state.dumps(result.state),
    )
    return out


def _interval_values(ns: str, interval: IntervalRow) -> dict[str, Any]:
    """The output values of one validity interval of a cell, by the cell's kind."""
    key, value, from_ms, to_ms, from_seq, to_seq = interval
    common = dict(ns=ns, kind=key[0], valid_from_ms=from_ms, valid_to_ms=to_ms, from_seq=from_seq, to_seq=to_seq)
    if key[0] == QUEUE:
        return dict(
            common,
            topic=key[1],
            broker_name=key[2],
            read_queue_nums=value[0],
            write_queue_nums=value[1],
            perm=value[2],
            topic_sys_flag=value[3],
        )
    if key[0] == ADDR:
        return dict(common, broker_name=key[1], broker_id=key[2], cluster=value[0], broker_addr=value[1])
    if key[0] == CLUSTER:
        return dict(common, cluster=key[1], broker_name=key[2])
    return dict(common, broker_addr=key[1], filter_servers=list(value))
