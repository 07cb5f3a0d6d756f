"""``nsaudit lake optimize | vacuum | retention | history``: each goes over the lake's tables, does
one Delta operation per table that needs it, and prints what it did.

The figures come from the tables' logs (:mod:`jobs.housekeeping.files`), the same whichever engine
ran the operation; ``optimize`` and ``retention`` only replace or remove files in the log (readers of
older versions still find them), ``vacuum`` deletes files from disk.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from common.config import load_config
from common.errors import UserError
from jobs import lake
from jobs.housekeeping.engines import Engine, open_engine
from jobs.housekeeping.files import TableFiles, file_bytes, table_files
from jobs.lake.tables import check_readable, has_log, open_delta
from jobs.storage import files as storage_files
from jobs.storage import locations
from schemas import tables

# Columns the queries filter on beyond the partitions, Z-ordered by ``optimize`` (the route query
# reads one server's rows of a day; reports and notebooks pick topics). Tables not named here are
# bin-packed only: ``events`` is partitioned by date and server already and read whole per server.
ZORDER_BY = {
    tables.TOPIC_ROUTE_HISTORY: ("ns", "topic"),
    tables.BROKER_ADDR_HISTORY: ("ns",),
    tables.CLUSTER_HISTORY: ("ns",),
    tables.FILTER_SERVER_HISTORY: ("ns",),
    tables.NS_RUNS: ("ns",),
    tables.ROUTE_SNAPSHOTS: ("ns", "topic"),
    tables.TOPIC_DISTRIBUTION: ("ns", "topic"),
    tables.QUEUE_DISTRIBUTION: ("ns",),
}
# Delta's own default for how long removed files stay (delta.deletedFileRetentionDuration): running
# readers of older versions, and time travel, still need them.
SAFE_RETAIN_HOURS = 168
TABLE_NAMES = tuple(getattr(tables, name) for name in dir(tables) if name.isupper())


@dataclass(frozen=True)
class TableChange:
    """One table before and after an operation (``files``/``bytes``: the current version's data files).

    Attributes:
        table: the table's name.
        before: its files before.
        after: its files after.
        freed_files: files deleted from disk.
        freed_bytes: their bytes.
        days: the days the operation touched.
    """

    table: str
    before: TableFiles
    after: TableFiles
    freed_files: int = 0
    freed_bytes: int = 0
    days: tuple[dt.date, ...] = ()


def lake_tables(lake_dir: str) -> list[tuple[str, str]]:
    """``(name, path)`` of the lake's Delta tables, by name, each checked readable first: a
    command that changes tables changes none when one of them is damaged (retention must not
    delete some tables' days and leave another's, nor vacuum run past a log it cannot read).

    Raises:
        UserError: ``lake_dir`` holds none.
        LakeDamaged: a table's log cannot be read (:mod:`jobs.lake.delta.health`).
    """
    found = _table_folders(lake_dir)
    if not found:
        raise UserError(f"--lake {lake_dir}: no lake tables here; run nsaudit audit for a day first")
    for _, path in found:
        check_readable(path)
    return found


def _table_folders(lake_dir: str) -> list[tuple[str, str]]:
    """``(name, path)`` of the lake's table folders that hold a Delta log, readable or not."""
    found = [(name, lake.table_path(lake_dir, name)) for name in sorted(TABLE_NAMES)]
    return [(name, path) for name, path in found if has_log(path)]


def optimize_lake(lake_dir: str, engine: Engine) -> list[TableChange]:
    """Compact every day that has a partition of more than one file, Z-ordering the tables of
    :data:`ZORDER_BY`; days already compacted are left alone, so a second run commits nothing."""
    changes = []
    for name, path in lake_tables(lake_dir):
        before = table_files(path)
        days = before.crowded_days()
        if days:
            engine.optimize(path, days, ZORDER_BY.get(name, ()))
        changes.append(TableChange(name, before, table_files(path) if days else before, days=tuple(days)))
    return changes


def check_retain_hours(retain_hours: int, force: bool) -> None:
    """Refuse a vacuum that would delete files Delta's safety default still keeps, unless forced.

    Raises:
        UserError: ``retain_hours`` is negative, or below :data:`SAFE_RETAIN_HOURS` without ``force``.
    """
    if retain_hours < 0:
        raise UserError(f"--retain-hours must be >= 0, not {retain_hours}")
    if retain_hours < SAFE_RETAIN_HOURS and not force:
        raise UserError(
            f"--retain-hours {retain_hours} is below Delta's safety default of {SAFE_RETAIN_HOURS} h "
            "(time travel and running readers may still need those files); add --force to vacuum anyway"
        )


def vacuum_lake(lake_dir: str, engine: Engine, retain_hours: int, dry_run: bool = False) -> list[TableChange]:
    """Delete from every table the files no version of the last ``retain_hours`` needs (and files
    no commit references); ``dry_run`` only counts them. The caller checks ``retain_hours``."""
    changes = []
    for name, path in lake_tables(lake_dir):
        before = table_files(path)
        listed = engine.vacuum(path, retain_hours, True)
        freed = file_bytes(listed)  # measured before they go
        if listed and not dry_run:
            engine.vacuum(path, retain_hours, False)
        changes.append(TableChange(name, before, table_files(path), len(listed), freed))
    return changes


def latest_day(lake_dir: str) -> dt.date | None:
    """The latest day ``audit_runs`` has a row for (any status), or None."""
    path = lake.table_path(lake_dir, lake.AUDIT_RUNS)
    try:
        days = table_files(path).days
    except FileNotFoundError:  # no audit_runs table: no audited day (a damaged one raises)
        return None
    return max(days) if days else None


def retain_days(lake_dir: str, engine: Engine, keep_days: int) -> tuple[dt.date | None, list[TableChange]]:
    """Delete from every table the days before the last ``keep_days`` (counted back from the
    latest day in ``audit_runs``), one commit per table, and those days' reports and logs.

    Returns:
        The first day kept (None when there is nothing to keep from) and each table's change.
    """
    latest = latest_day(lake_dir)
    if latest is None or keep_days <= 0:
        return None, []
    # at most back to the first date there is: a keep_days past it keeps every day
    first_kept = latest - dt.timedelta(days=min(keep_days - 1, (latest - dt.date.min).days))
    changes = []
    for name, path in lake_tables(lake_dir):
        before = table_files(path)
        old = tuple(sorted(d for d in before.days if d < first_kept))
        if old:
            engine.delete_before(path, first_kept)
        changes.append(TableChange(name, before, table_files(path) if old else before, days=old))
    _remove_day_outputs(lake_dir, first_kept)
    return first_kept, changes


def _remove_day_outputs(lake_dir: str, first_kept: dt.date) -> None:
    """Remove ``reports/<date>/`` and ``_logs/<date>.log*`` of the days before ``first_kept``."""
    for folder in ("reports", "_logs"):
        root = locations.join(lake_dir, folder)
        for entry in storage_files.list_entries(root):
            try:
                day = dt.date.fromisoformat(entry[:10])
            except ValueError:
                continue
            if day < first_kept:
                storage_files.delete(locations.join(root, entry))


def table_history(lake_dir: str, name: str, limit: int | None = None) -> list[dict[str, Any]]:
    """A table's commits, newest first: version, UTC time, operation, its parameters and metrics,
    and the engine that committed it (read with ``deltalake``, whichever engine wrote them).

    Raises:
        UserError: no such table in the lake.
        LakeDamaged: its log cannot be read.
    """
    path = lake.table_path(lake_dir, name)
    if name not in TABLE_NAMES or not has_log(path):
        known = ", ".join(n for n, _ in _table_folders(lake_dir))
        raise UserError(f"no table {name!r} in {lake_dir}; tables: {known or 'none'}")
    check_readable(path)
    commits = sorted(open_delta(path).history(limit), key=lambda c: c["version"], reverse=True)
    return [_commit_line(c) for c in commits]


def _commit_line(commit: dict[str, Any]) -> dict[str, Any]:
    when = dt.datetime.fromtimestamp(commit["timestamp"] / 1000, dt.UTC)
    return {
        "version": commit["version"],
        "timestamp": when.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "operation": commit.get("operation"),
        "parameters": commit.get("operationParameters") or {},
        "metrics": commit.get("operationMetrics") or {},
        "engine": commit.get("engineInfo") or commit.get("clientVersion"),
    }


# ---------------------------------------------------------------------------- printing


def _size(n: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if n < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _days(days: tuple[dt.date, ...]) -> str:
    if not days:
        return "-"
    return days[0].isoformat() if len(days) == 1 else f"{days[0]}..{days[-1]} ({len(days)} days)"


def print_changes(verb: str, engine: Engine, changes: list[TableChange]) -> None:
    """One line per table and a total: files before and after, bytes freed, days touched."""
    for c in changes:
        freed = f", deleted {c.freed_files} files ({_size(c.freed_bytes)} freed)" if verb.startswith("vacuum") else ""
        print(
            f"{c.table:<22} files {c.before.files:>5} -> {c.after.files:<5} data {_size(c.before.bytes):>10} -> "
            f"{_size(c.after.bytes):<10} days {_days(c.days)}{freed}"
        )
    files_before, files_after = sum(c.before.files for c in changes), sum(c.after.files for c in changes)
    freed_files, freed_bytes = sum(c.freed_files for c in changes), sum(c.freed_bytes for c in changes)
    touched = sum(1 for c in changes if c.days or c.freed_files)
    print(
        f"{verb} ({engine.name}): {touched} of {len(changes)} tables changed; files {files_before} -> {files_after}; "
        f"deleted {freed_files} files, {_size(freed_bytes)} freed"
        + ("" if verb.startswith("vacuum") else " (replaced files stay on disk until nsaudit lake vacuum)")
    )


# ---------------------------------------------------------------------------- CLI


def _log_file(lake_dir: str) -> str:
    # a remote lake's stays on this host: the log is Spark's, for native housekeeping only
    return storage_files.local_log_path(locations.normalize(lake_dir), "housekeeping.log")


def optimize_from_cli(args: argparse.Namespace) -> int:
    """``nsaudit lake optimize``."""
    config = load_config(args.config)
    lake_tables(args.lake)  # a bad --lake or a damaged table stops it before any engine starts
    with open_engine(config, _log_file(args.lake), args.lake) as engine:
        print_changes("optimize", engine, optimize_lake(args.lake, engine))
    return 0


def vacuum_from_cli(args: argparse.Namespace) -> int:
    """``nsaudit lake vacuum``."""
    check_retain_hours(args.retain_hours, args.force)
    config = load_config(args.config)
    lake_tables(args.lake)  # a bad --lake or a damaged table stops it before any engine starts
    with open_engine(config, _log_file(args.lake), args.lake) as engine:
        print_changes(
            "vacuum" if not args.dry_run else "vacuum --dry-run",
            engine,
            vacuum_lake(args.lake, engine, args.retain_hours, args.dry_run),
        )
    return 0


def retention_from_cli(args: argparse.Namespace) -> int:
    """``nsaudit lake retention``: ``--keep-days`` or ``[lake] keep_days``."""
    if args.keep_days is not None and args.keep_days < 0:
        raise UserError(f"--keep-days must be >= 0 (0 keeps every day), not {args.keep_days}")
    config = load_config(args.config)
    keep = config.lake.keep_days if args.keep_days is None else args.keep_days
    if keep == 0:
        print("retention: keep_days is 0, every day is kept")
        return 0
    lake_tables(args.lake)  # a bad --lake or a damaged table stops it before any engine starts
    with open_engine(config, _log_file(args.lake), args.lake) as engine:
        first_kept, changes = retain_days(args.lake, engine, keep)
        if first_kept is not None:
            print(f"retention: keeping {keep} days, {first_kept} to {latest_day(args.lake)}")
        print_changes("retention", engine, changes)
    return 0


def history_from_cli(args: argparse.Namespace) -> int:
    """``nsaudit lake history TABLE``: one JSON line per commit, newest first."""
    if args.limit is not None and args.limit < 1:
        raise UserError(f"--limit must be >= 1, not {args.limit}")
    for line in table_history(args.lake, args.table, args.limit):
        print(json.dumps(line, sort_keys=False, default=str))
    return 0
