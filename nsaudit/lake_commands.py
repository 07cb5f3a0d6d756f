"""The commands that read a lake (docs/interfaces.md): the queries ``route``, ``cluster``, ``diff`` and
``incidents``, and the ``lake`` housekeeping commands; their parsers and what each one runs.

What they run is imported when they run (Spark, pyarrow, delta-rs), not when the parser is built.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import TypeAlias

from common.arguments import OneLineParser, date_arg, int_arg, time_arg
from common.config import MAX_COUNT, MAX_DAYS, MAX_DURATION_MS

# what OneLineParser.add_subparsers returns (a string: the class is not subscriptable at run time)
Subparsers: TypeAlias = "argparse._SubParsersAction[OneLineParser]"

# what a command runs, given its parsed arguments
Run: TypeAlias = Callable[[argparse.Namespace], int]

TIMES_EPILOG = (
    "Times are ISO-8601 with a zone (2026-11-21T03:00:00Z) or epoch milliseconds, from "
    "0001-01-02T00:00:00Z to 9999-12-30T23:59:59.999Z."
)
_QUERY_EPILOG = (
    TIMES_EPILOG + " An instant whose UTC day the lake does not record audited ok (never audited, "
    'or a run that did not finish) is answered with "audited": false, a "reason" and no tables; '
    "a server the lake never saw is an error. An observed server (nsaudit collect, --ns obs-...) "
    'is answered with its last observation at or before the instant, with "observed_ts" and '
    '"resolution_ms" (the poll interval); outside a period its state was known, "up" is false. '
    "A lake table that cannot be read (its _delta_log, or a file its latest version names) is one "
    "line naming it and exit 1; a --version whose files nsaudit lake vacuum removed says so."
)


def _run_route(args: argparse.Namespace) -> int:
    from jobs.query import lookup

    return lookup.route_from_cli(args)


def _run_cluster(args: argparse.Namespace) -> int:
    from jobs.query import lookup

    return lookup.cluster_from_cli(args)


def _run_diff(args: argparse.Namespace) -> int:
    from jobs.query import lookup

    return lookup.diff_from_cli(args)


def _run_incidents(args: argparse.Namespace) -> int:
    from jobs.query import incidents

    return incidents.incidents_from_cli(args)


def _run_optimize(args: argparse.Namespace) -> int:
    from jobs.housekeeping import commands

    return commands.optimize_from_cli(args)


def _run_vacuum(args: argparse.Namespace) -> int:
    from jobs.housekeeping import commands

    return commands.vacuum_from_cli(args)


def _run_retention(args: argparse.Namespace) -> int:
    from jobs.housekeeping import commands

    return commands.retention_from_cli(args)


def _run_history(args: argparse.Namespace) -> int:
    from jobs.housekeeping import commands

    return commands.history_from_cli(args)


def _version_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--version",
        type=int_arg(0, 2**63 - 1, "a Delta version is a signed 64-bit integer"),
        default=None,
        metavar="V",
        help="answer from the lake as it stood at version V of audit_runs (one version when an audit "
        "starts, one when it ends: nsaudit lake history audit_runs lists them); default: the latest",
    )


_CONFIG_HELP = "TOML config (default conf/nsaudit.toml): [storage] says how to reach an s3a:// lake"


def _lake_arg(p: argparse.ArgumentParser, must_exist: bool = True) -> None:
    from jobs.storage.arguments import existing_lake_arg, location_arg

    p.add_argument(
        "--lake",
        required=True,
        metavar="DIR",
        type=existing_lake_arg if must_exist else location_arg,
        help="the lake: a folder or s3a://bucket/prefix",
    )
    p.add_argument("--config", default=None, metavar="FILE", help=_CONFIG_HELP)


def add_queries(sub: Subparsers) -> None:
    p = sub.add_parser(
        "route",
        help="what a name server answered for a topic at an instant",
        epilog=_QUERY_EPILOG,
        description="Print the TopicRouteData that GET_ROUTEINFO_BY_TOPIC would have answered.",
    )
    _lake_arg(p, must_exist=False)  # a missing lake is answered as one without route tables
    p.add_argument("--ns", required=True, metavar="ID")
    p.add_argument("--topic", required=True)
    p.add_argument("--at", required=True, metavar="TIME", type=time_arg)
    _version_arg(p)
    p.set_defaults(run=_run_route)
    p = sub.add_parser(
        "cluster",
        help="a name server's cluster info at an instant",
        epilog=_QUERY_EPILOG,
        description="Print the ClusterInfo that GET_BROKER_CLUSTER_INFO would have answered.",
    )
    _lake_arg(p, must_exist=False)
    p.add_argument("--ns", required=True, metavar="ID")
    p.add_argument("--at", required=True, metavar="TIME", type=time_arg)
    _version_arg(p)
    p.set_defaults(run=_run_cluster)
    p = sub.add_parser(
        "diff",
        help="what changed in a server's route tables between two instants",
        epilog=_QUERY_EPILOG,
        description="Print the route-table changes between two instants.",
    )
    _lake_arg(p, must_exist=False)
    p.add_argument("--ns", required=True, metavar="ID")
    p.add_argument("--from", dest="from_", required=True, metavar="TIME", type=time_arg)
    p.add_argument("--to", required=True, metavar="TIME", type=time_arg)
    _version_arg(p)
    p.set_defaults(run=_run_diff)


_LAKE_EPILOG = (
    "The engine is the audit's writer ([lake] writer in --config): delta-rs without a JVM, or "
    "delta-spark in a local Spark session when its jars are there (docs/audit.md, Housekeeping). "
    "Every table is read before any is changed: one whose _delta_log cannot be read stops the "
    "command with one line naming it and exit 1, nothing changed."
)


def add_lake(sub: Subparsers) -> None:
    lake_parser = sub.add_parser(
        "lake",
        help="housekeeping of a lake: optimize, vacuum, retention, history",
        description="Housekeeping of a lake's Delta tables after many nightly audits.",
    )
    commands = lake_parser.add_subparsers(dest="lake_command", required=True, metavar="LAKE_COMMAND")

    def command(name: str, help: str, description: str, run: Run) -> argparse.ArgumentParser:
        p = commands.add_parser(name, help=help, description=description, epilog=_LAKE_EPILOG)
        _lake_arg(p)
        p.set_defaults(run=run)
        return p

    command(
        "optimize",
        "compact small files per partition, Z-order the often-filtered columns",
        "Rewrite every day that has a partition of more than one file into as few files as the size limit "
        "allows (one commit per table), Z-ordered by ns and topic where the queries filter on them. Prints "
        "files before and after; the replaced files stay on disk (older versions read them) until vacuum.",
        _run_optimize,
    )
    p = command(
        "vacuum",
        "delete files no recent version needs",
        "Delete from every table the data files that no version of the last --retain-hours needs, and "
        "files no commit references (a failed write's). Prints files deleted and bytes freed. Versions "
        "older than that can no longer be read (time travel, route --version).",
        _run_vacuum,
    )
    p.add_argument(
        "--retain-hours",
        type=int_arg(0, MAX_DURATION_MS // 3_600_000, "ten years"),
        default=168,
        metavar="N",
        help="keep what the versions of the last N hours need, at most 87600 (ten years) (default and "
        "minimum without --force: 168, Delta's safety default)",
    )
    p.add_argument("--force", action="store_true", help="allow --retain-hours below 168")
    p.add_argument("--dry-run", action="store_true", help="only count what would be deleted")
    p = command(
        "retention",
        "delete the days before the last N",
        "Delete from every table the days before the last N (counted back from the latest day in "
        "audit_runs), one commit per table, and those days' reports and logs. The files stay on disk "
        "for older versions until vacuum.",
        _run_retention,
    )
    p.add_argument(
        "--keep-days",
        type=int_arg(0, MAX_DAYS),
        default=None,
        metavar="N",
        help=f"days to keep, 0..{MAX_DAYS} (default: [lake] keep_days of the config; 0 keeps every day)",
    )
    _add_history(commands)


def _add_history(commands: Subparsers) -> None:
    """``nsaudit lake history``: one table's commits, newest first."""
    p = commands.add_parser(
        "history",
        help="a table's commits, newest first",
        description="Print one JSON line per commit of a lake table, newest first: version, "
        "timestamp, operation, its parameters and metrics, and the engine that wrote it. "
        "nsaudit route --version takes a version of audit_runs.",
    )
    p.add_argument("table", metavar="TABLE", help="table name (events, topic_route_history, audit_runs, ...)")
    _lake_arg(p)
    p.add_argument("--limit", type=int_arg(1, MAX_COUNT), default=None, metavar="N", help="only the N newest commits")
    p.set_defaults(run=_run_history)


def add_incidents(sub: Subparsers) -> None:
    p = sub.add_parser(
        "incidents",
        help="a day's incidents (findings grouped by root cause), worst first",
        description="Print the incidents of an audited day: severity, root cause, subject, servers, span, "
        "impact (topics producers could not write, share of clients exposed) and the incident id; critical "
        "first, then by impact. A day not audited ok says so.",
    )
    _lake_arg(p)
    p.add_argument("--date", required=True, metavar="YYYY-MM-DD", type=date_arg, help="the audited UTC day")
    p.add_argument(
        "--min-severity",
        choices=("info", "warning", "critical"),
        default="info",
        help="leave out incidents below this severity (default info: all)",
    )
    p.add_argument(
        "--format",
        choices=("table", "json", "prometheus"),
        default="table",
        help="table (default), one JSON object, or Prometheus text exposition",
    )
    p.set_defaults(run=_run_incidents)
