"""``nsaudit route``, ``cluster`` and ``diff``: a name server's route tables at an instant, read from
the lake without Spark (``deltalake`` + pyarrow, pruned to one day's partition), so a question is
answered in about a second.

"State at T" is the state after every event with ``ts <= T`` (docs/interfaces.md, "Details scripts rely
on"): the history rows of partition ``date(T)`` with ``valid_from_ts <= T < valid_to_ts`` (or
``valid_to_ts`` null). When the lake has no rebuilt day ``date(T)`` for the server but an earlier
one, the answer is that day's end state (the rows still open at its end). ``up`` comes from
``ns_runs`` and ``ns_state.up_at_start`` (``schemas.routes``). A stopped server's tables are
empty, so its route is null and its cluster info empty.

Answers never claim more than the lake holds: a server the lake has never seen is a bad argument,
and an instant whose day ``audit_runs`` does not record ``ok`` (never audited, or an audit that
did not finish) is answered with ``"audited": false``, a ``reason``, ``up`` null and no tables.

With ``--version V`` every answer comes from the lake as it stood at version V of ``audit_runs``
(:mod:`jobs.query.versions`): the audit as it was before a rerun.
"""

from __future__ import annotations

import argparse
import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from common.errors import UserError
from common.timeutil import parse_time, utc_date
from jobs import lake
from jobs.lake.tables import MissingDataFiles, damaged, has_log, open_delta
from jobs.query.reads import ABSENT, micros, read_all, read_day, valid_rows
from jobs.query.versions import LakeVersion
from jobs.rebuild.views import TableState, cluster_info_view, diff_view, route_view
from jobs.storage.problems import describe
from nameserver.codec import fastjson

_HISTORY = (lake.TOPIC_ROUTE_HISTORY, lake.BROKER_ADDR_HISTORY, lake.CLUSTER_HISTORY, lake.FILTER_SERVER_HISTORY)
_COLUMNS = {
    lake.TOPIC_ROUTE_HISTORY: ["topic", "broker_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag"],
    lake.BROKER_ADDR_HISTORY: ["broker_name", "broker_id", "cluster", "broker_addr"],
    lake.CLUSTER_HISTORY: ["cluster", "broker_name"],
    lake.FILTER_SERVER_HISTORY: ["broker_addr", "filter_servers"],
}
_INTERVAL_COLUMNS = ["valid_from_ts", "valid_to_ts"]


@dataclass(frozen=True)
class ServerState:
    """A server's tables at an instant.

    Attributes:
        tables: the four route tables (empty before any data).
        up: False between ``ns_stop`` and the next ``ns_start``.
        day: the lake day answered from; ``None`` before any data of this server.
        observed: an observed server (``nsaudit collect``): ``up`` says whether its state was known.
        observed_ms: observed servers: when the observation the tables reflect was made (the last
            change seen at or before the instant, or the snapshot that began the known period);
            ``None`` outside a known period.
        resolution_ms: observed servers: the poll interval (None when unknown).
    """

    tables: TableState
    up: bool
    day: dt.date | None
    observed: bool = False
    observed_ms: int | None = None
    resolution_ms: int | None = None


class RouteLake:
    """Point reads of the rebuilt route tables of one lake; each day partition is read once.

    Raises (from every method):
        UserError: the lake has no rebuilt route tables, or ``version`` is one whose files
            ``nsaudit lake vacuum`` removed.
        LakeDamaged: a table's log cannot be read, or a file of its latest version is gone.
    """

    def __init__(self, lake_dir: str, version: int | None = None) -> None:
        self.lake_dir = lake_dir
        self._state_path = lake.table_path(lake_dir, lake.NS_STATE)
        self._runs: dict[dt.date, str] | None = None
        self._partitions: dict[tuple[Any, ...], Any] = {}
        self._as_of = LakeVersion(lake_dir, version) if version is not None else None
        state_version = self._version(self._state_path)
        try:
            present = has_log(self._state_path)
        except Exception as exc:  # noqa: BLE001 - a store's refusal, an unreachable store
            raise UserError(f"cannot read {lake.NS_STATE}: {describe(exc, self._state_path)}") from None
        if not present or state_version == ABSENT:
            raise UserError(
                f"{lake_dir}: no rebuilt route tables (no Delta table {lake.NS_STATE}"
                f"{' at ' + self._as_of.describe() if self._as_of else ''}); "
                "run nsaudit audit for a day first"
            )
        self._ns_state = open_delta(self._state_path, state_version)

    def _read_once(self, path: str, columns: tuple[str, ...], day: dt.date, ns: str) -> Any:
        """:func:`read_day` at this lake's version, each partition once per ``RouteLake`` (a diff reads
        one day twice); a new ``RouteLake`` sees the tables' latest commits."""
        key = (path, columns, day, ns)
        if key not in self._partitions:
            self._partitions[key] = self._checked(read_day, path, list(columns), day, ns, self._version(path))
        return self._partitions[key]

    def _checked(self, read: Callable[..., Any], *args: Any) -> Any:
        """``read(*args)``, a version whose files ``nsaudit lake vacuum`` removed said to be so (a
        bad ``--version``); gone files of the latest version are damage."""
        try:
            return read(*args)
        except MissingDataFiles as exc:
            if self._as_of is None or exc.version is None:
                raise
            raise UserError(
                f"--version {self._as_of.version}: {self._as_of.describe()} can no longer be read: "
                f"nsaudit lake vacuum removed its files (table {exc.table} version {exc.version} "
                f"lacks {exc.file}); a version from the last --retain-hours of the vacuum can be "
                "read"
            ) from None

    def _version(self, path: str) -> int | None:
        """The version of a table to read: None for the latest, :data:`ABSENT` when it did not
        exist at ``--version``."""
        if self._as_of is None:
            return None
        found = self._as_of.table_version(path)
        return ABSENT if found is None else found

    def check_server(self, ns: str) -> None:
        """Raise a UserError naming the known servers when the lake has never seen ``ns``."""
        table = self._checked(read_all, self._state_path, ["ns"], self._version(self._state_path))
        known = sorted(set(table.column("ns").to_pylist())) if table is not None else []
        if ns not in known:
            raise UserError(f"--ns {ns!r}: no such name server in {self.lake_dir}; known: {', '.join(known) or 'none'}")

    def not_audited(self, at_ms: int) -> str | None:
        """Why no audited day covers ``at_ms``, or None when its day's audit is ``ok``."""
        if self._runs is None:
            path = lake.table_path(self.lake_dir, lake.AUDIT_RUNS)
            table = self._checked(read_all, path, ["date", "status"], self._version(path))
            self._runs = {} if table is None else {r["date"]: r["status"] for r in table.to_pylist()}
        day = utc_date(at_ms)
        status = self._runs.get(day)
        if status == "ok":
            return None
        if status is None:
            ok_days = sorted(d for d, s in self._runs.items() if s == "ok")
            span = f"audited days: {ok_days[0]} to {ok_days[-1]}" if ok_days else "no day is audited"
            return f"{day} has not been audited ({span})"
        return f"the audit of {day} did not finish (status {status}); rerun nsaudit audit --date {day}"

    def state_at(self, ns: str, at_ms: int) -> ServerState:
        """The server's tables and ``up`` after every event with ``ts <= at_ms``."""
        wanted = utc_date(at_ms)
        for day in self._days_of(ns):
            if day > wanted:
                continue
            row = self._state_row(ns, day)
            if row is None:
                continue
            if row["observed"]:
                return self._observed_at(ns, day if day == wanted else None, at_ms, row["resolution_ms"])
            if day == wanted:
                return ServerState(self._tables(ns, day, at_ms), self._up(ns, day, at_ms, row["up_at_start"]), day)
            return ServerState(self._tables(ns, day, None), row["up"], day)  # that day's end state
        return ServerState(TableState(), True, None)

    # ---------------------------------------------------------------- reads

    def _days_of(self, ns: str) -> list[dt.date]:
        """Days whose ``ns_state`` files may hold the server (partition values and statistics), newest first."""
        try:
            parts = self._ns_state.partitions(file_pruning_predicate=[("ns", "=", ns)])
        except Exception as exc:  # noqa: BLE001 - deltalake's own error types
            raise damaged(self._state_path, exc) from None
        return sorted({dt.date.fromisoformat(p["date"]) for p in parts}, reverse=True)

    def _state_row(self, ns: str, day: dt.date) -> dict[str, Any] | None:
        table = self._checked(
            read_day,
            self._state_path,
            ["up", "up_at_start", "observed", "resolution_ms"],
            day,
            ns,
            self._version(self._state_path),
        )
        return table.to_pylist()[0] if table is not None and table.num_rows else None

    def _observed_at(self, ns: str, day: dt.date | None, at_ms: int, resolution_ms: int | None) -> ServerState:
        """An observed server at ``at_ms``: the last observation at or before it, inside a known
        period (an ``ns_runs`` run) of ``day``; outside one (or with no observation that day:
        ``day`` None) nothing is known, and the answer is that of a server that is down."""
        unknown = ServerState(TableState(), False, day, True, None, resolution_ms)
        if day is None:
            return unknown
        path = lake.table_path(self.lake_dir, lake.NS_RUNS)
        runs = self._read_once(path, ("start_ts", "stop_ts", "start_seq", "stop_seq", "stop_reason"), day, ns)
        at_us = at_ms * 1000
        starts = [
            micros(r["start_ts"])
            for r in ([] if runs is None else runs.to_pylist())
            if micros(r["start_ts"]) <= at_us and (r["stop_ts"] is None or at_us < micros(r["stop_ts"]))
        ]
        if not starts:
            return unknown
        # the last change at or before the instant: an interval that began, or ended, then
        seen = starts[0]
        for name in _HISTORY:
            table = self._read_once(
                lake.table_path(self.lake_dir, name), tuple(_COLUMNS[name] + _INTERVAL_COLUMNS), day, ns
            )
            for column in [] if table is None else _INTERVAL_COLUMNS:
                for value in table.column(column).to_pylist():
                    value_us = micros(value)
                    if value_us is not None and seen < value_us <= at_us:
                        seen = value_us
        return ServerState(self._tables(ns, day, at_ms), True, day, True, seen // 1000, resolution_ms)

    def _tables(self, ns: str, day: dt.date, at_ms: int | None) -> TableState:
        """The cells valid at ``at_ms`` of ``day``, or open at its end when ``at_ms`` is None."""
        state = TableState()
        rows = {name: self._history(name, ns, day, at_ms) for name in _HISTORY}
        for r in rows[lake.TOPIC_ROUTE_HISTORY]:
            state.put_queue(
                r["topic"],
                r["broker_name"],
                (r["read_queue_nums"], r["write_queue_nums"], r["perm"], r["topic_sys_flag"]),
            )
        for r in rows[lake.BROKER_ADDR_HISTORY]:
            state.put_addr(r["broker_name"], r["broker_id"], r["cluster"], r["broker_addr"])
        for r in rows[lake.CLUSTER_HISTORY]:
            state.put_cluster(r["cluster"], r["broker_name"])
        for r in rows[lake.FILTER_SERVER_HISTORY]:
            state.put_filter(r["broker_addr"], r["filter_servers"])
        return state

    def _history(self, name: str, ns: str, day: dt.date, at_ms: int | None) -> list[dict[str, Any]]:
        path = lake.table_path(self.lake_dir, name)
        table = self._read_once(path, tuple(_COLUMNS[name] + _INTERVAL_COLUMNS), day, ns)
        return [] if table is None else valid_rows(table, at_ms)

    def _up(self, ns: str, day: dt.date, at_ms: int, up_at_start: bool) -> bool:
        """Up inside a run; after a run stopped by ``ns_stop``, down; before the day's first run,
        as at 00:00."""
        path = lake.table_path(self.lake_dir, lake.NS_RUNS)
        table = self._read_once(path, ("start_ts", "stop_ts", "start_seq", "stop_seq", "stop_reason"), day, ns)
        runs = [] if table is None else table.to_pylist()
        at_us = at_ms * 1000
        last_stop: tuple[tuple[int, int], str | None] | None = None  # ((stop, stop_seq), stop_reason)
        for run in runs:
            start, stop = micros(run["start_ts"]), micros(run["stop_ts"])
            if start <= at_us and (stop is None or at_us < stop):
                return True
            if stop is not None and stop <= at_us:
                key = (stop, run["stop_seq"] if run["stop_seq"] is not None else -1)
                if last_stop is None or key > last_stop[0]:
                    last_stop = (key, run["stop_reason"])
        if last_stop is not None:
            return last_stop[1] != "ns_stop"
        return up_at_start


# ---------------------------------------------------------------------------- answers


def route_answer(route_lake: RouteLake, ns: str, topic: str, at_ms: int) -> dict[str, Any]:
    """``{"ns", "topic", "at", "route", "up", "audited"}``: GET_ROUTEINFO_BY_TOPIC's answer at
    ``at_ms``; when no audited day covers it, ``route`` and ``up`` are null and ``reason`` says why.
    An observed server's answer adds ``observed_ts`` and ``resolution_ms`` (:class:`ServerState`).

    Raises:
        UserError: the lake has never seen ``ns``.
    """
    route_lake.check_server(ns)
    reason = route_lake.not_audited(at_ms)
    if reason is not None:
        return {"ns": ns, "topic": topic, "at": at_ms, "route": None, "up": None, "audited": False, "reason": reason}
    state = route_lake.state_at(ns, at_ms)
    return {
        "ns": ns,
        "topic": topic,
        "at": at_ms,
        "route": route_view(state.tables, topic),
        "up": state.up,
        "audited": True,
        **_observed_keys(state),
    }


def cluster_answer(route_lake: RouteLake, ns: str, at_ms: int) -> dict[str, Any]:
    """``{"ns", "at", "cluster_info", "up", "audited"}``: GET_BROKER_CLUSTER_INFO's answer at
    ``at_ms``; when no audited day covers it, ``cluster_info`` and ``up`` are null and ``reason`` says why.

    Raises:
        UserError: the lake has never seen ``ns``.
    """
    route_lake.check_server(ns)
    reason = route_lake.not_audited(at_ms)
    if reason is not None:
        return {"ns": ns, "at": at_ms, "cluster_info": None, "up": None, "audited": False, "reason": reason}
    state = route_lake.state_at(ns, at_ms)
    return {
        "ns": ns,
        "at": at_ms,
        "cluster_info": cluster_info_view(state.tables),
        "up": state.up,
        "audited": True,
        **_observed_keys(state),
    }


def diff_answer(route_lake: RouteLake, ns: str, from_ms: int, to_ms: int) -> dict[str, Any]:
    """``{"ns", "from", "to", "up": {"from", "to"}, "tables": {table: {added, changed, removed}}, "audited"}``;
    when no audited day covers one of the instants, its ``up`` and ``tables`` are null and ``reason`` says why.

    Raises:
        UserError: the lake has never seen ``ns``.
    """
    route_lake.check_server(ns)
    reasons = [r for r in (route_lake.not_audited(from_ms), route_lake.not_audited(to_ms)) if r is not None]
    if reasons:
        up = {
            side: None if route_lake.not_audited(at) else route_lake.state_at(ns, at).up
            for side, at in (("from", from_ms), ("to", to_ms))
        }
        return {
            "ns": ns,
            "from": from_ms,
            "to": to_ms,
            "up": up,
            "tables": None,
            "audited": False,
            "reason": "; ".join(dict.fromkeys(reasons)),
        }
    before, after = route_lake.state_at(ns, from_ms), route_lake.state_at(ns, to_ms)
    return {
        "ns": ns,
        "from": from_ms,
        "to": to_ms,
        "up": {"from": before.up, "to": after.up},
        "tables": diff_view(before.tables, after.tables),
        "audited": True,
        **(
            {"observed_ts": {"from": before.observed_ms, "to": after.observed_ms}, "resolution_ms": after.resolution_ms}
            if after.observed
            else {}
        ),
    }


def _observed_keys(state: ServerState) -> dict[str, Any]:
    """The keys an observed server's answer adds: ``observed_ts`` (ms; null outside a known period)
    and ``resolution_ms``."""
    return {"observed_ts": state.observed_ms, "resolution_ms": state.resolution_ms} if state.observed else {}


# Route-table bodies, printed in fastjson's standard form; the other keys are plain JSON values, and
# a null in them (``up`` of an instant no audited day covers) stays in the output.
_BODIES = {"route", "cluster_info", "tables"}


def dumps_answer(answer: dict[str, Any]) -> str:
    """One line: the answer's keys in the order of docs/interfaces.md, route-table bodies in
    fastjson's standard form (quoted broker ids, fields sorted)."""
    import orjson

    parts = [
        fastjson.quote(key, True)
        + ":"
        + (fastjson.dumps(value, standard=True) if key in _BODIES else orjson.dumps(value)).decode()
        for key, value in answer.items()
    ]
    return "{" + ",".join(parts) + "}"


# ---------------------------------------------------------------------------- CLI


def _time(text: str, option: str) -> int:
    try:
        return parse_time(text)
    except ValueError as exc:
        raise UserError(f"{option}: {exc}") from None


def route_from_cli(args: argparse.Namespace) -> int:
    """``nsaudit route``: print one JSON line; exit 0 for every well-formed question."""
    at = _time(args.at, "--at")
    print(dumps_answer(route_answer(RouteLake(args.lake, args.version), args.ns, args.topic, at)))
    return 0


def cluster_from_cli(args: argparse.Namespace) -> int:
    """``nsaudit cluster``: print one JSON line."""
    at = _time(args.at, "--at")
    print(dumps_answer(cluster_answer(RouteLake(args.lake, args.version), args.ns, at)))
    return 0


def diff_from_cli(args: argparse.Namespace) -> int:
    """``nsaudit diff``: print one JSON line of what changed from ``--from`` to ``--to``."""
    from_ms, to_ms = _time(args.from_, "--from"), _time(args.to, "--to")
    if from_ms > to_ms:
        raise UserError(f"--from ({args.from_}) is after --to ({args.to})")
    print(dumps_answer(diff_answer(RouteLake(args.lake, args.version), args.ns, from_ms, to_ms)))
    return 0
