"""``nsaudit``: the command line (docs/interfaces.md). Each command's work lives in its own module.

Every command exits non-zero with one clear line on stderr for bad arguments or bad input and
never shows a traceback for a user error. Spark is imported only by the commands that need it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from typing import TypeAlias

from common.arguments import OneLineParser, date_arg, output_dir_arg, time_arg
from common.errors import LakeDamaged, UserError
from jobs import nightly_audit
from nameserver import cli as command
from nameserver.layout import FAULTS  # one fault vocabulary for simulate and fleet

# what OneLineParser.add_subparsers returns (a string: the class is not subscriptable at run time)
_Subparsers: TypeAlias = "argparse._SubParsersAction[OneLineParser]"

_EPILOG = (
    "Times are ISO-8601 with a zone (2026-11-21T03:00:00Z) or epoch milliseconds, from "
    "0001-01-02T00:00:00Z to 9999-12-30T23:59:59.999Z."
)
_QUERY_EPILOG = (
    _EPILOG + " An instant whose UTC day the lake does not record audited ok (never audited, "
    'or a run that did not finish) is answered with "audited": false, a "reason" and no tables; '
    "a server the lake never saw is an error. An observed server (nsaudit collect, --ns obs-...) "
    'is answered with its last observation at or before the instant, with "observed_ts" and '
    '"resolution_ms" (the poll interval); outside a period its state was known, "up" is false. '
    "A lake table that cannot be read (its _delta_log, or a file its latest version names) is one "
    "line naming it and exit 1; a --version whose files nsaudit lake vacuum removed says so."
)


# What each command runs, given its parsed arguments. The commands whose module is heavy (Spark,
# pyarrow, the simulator) import it when they run, not when the parser is built.
_Run: TypeAlias = Callable[[argparse.Namespace], int]


def _run_simulate(args: argparse.Namespace) -> int:
    from nameserver.sim import run

    return run.run_from_cli(args)


def _run_fleet(args: argparse.Namespace) -> int:
    from nameserver.fleet import launcher

    return launcher.run_from_cli(args)


def _run_backfill(args: argparse.Namespace) -> int:
    from jobs import backfill

    return backfill.run_from_cli(args)


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


def _run_demo(args: argparse.Namespace) -> int:
    from nsaudit import demo

    return demo.run_from_cli(args)


def _host_ports(text: str) -> str:
    """``HOST:PORT,...`` with every port in 1..65535."""
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, port = item.rpartition(":")
        if not (sep and host and port.isdigit() and 0 < int(port) <= 65535):
            raise argparse.ArgumentTypeError(f"{item!r} is not HOST:PORT with a port in 1..65535")
    return text


def _nameserver(sub: _Subparsers) -> None:
    p = sub.add_parser("nameserver", help="run one name server in the foreground", description=command.DESCRIPTION)
    command.add_arguments(p)
    p.set_defaults(run=command.run)


def _collect(sub: _Subparsers) -> None:
    from nameserver.collect import cli as collect_cli

    p = sub.add_parser(
        "collect",
        help="poll real name servers and log what each answers",
        description=collect_cli.DESCRIPTION,
        epilog=collect_cli.EPILOG,
    )
    collect_cli.add_arguments(p)
    p.set_defaults(run=collect_cli.run)


def _simulate(sub: _Subparsers) -> None:
    p = sub.add_parser(
        "simulate",
        help="write a simulated fleet's event logs, fast",
        description="Write, at simulated time, the event logs that N name servers would write for a "
        "broker fleet, using the same route-table code as the server. Deterministic per seed.",
        epilog=_EPILOG,
    )
    p.add_argument("--events", required=True, metavar="DIR", type=output_dir_arg, help="event-log directory to write")
    p.add_argument("--ns", type=int, default=3, help="name servers (default 3)")
    p.add_argument(
        "--brokers", type=int, default=20, help="broker processes, in groups of one master and K slaves (default 20)"
    )
    p.add_argument("--slaves", type=int, default=1, help="slaves per group, K (default 1)")
    p.add_argument("--topics", type=int, default=100, help="topics (default 100)")
    p.add_argument("--start", default=None, metavar="TIME", type=time_arg, help="default: start of the current UTC day")
    p.add_argument("--hours", type=float, default=24.0, help="simulated hours (default 24)")
    p.add_argument("--seed", type=int, default=1, help="random seed (default 1)")
    p.add_argument(
        "--faults",
        default="all",
        metavar="LIST",
        help="comma-separated faults to inject, 'all' (default) or 'none' (a balanced fleet, nothing "
        f"injected); any of: {', '.join(FAULTS)}. read_lt_write and queue_skew are built into the "
        "layout; the others strike during the run (ground truth in DIR/_truth/faults.jsonl)",
    )
    p.add_argument(
        "--fault-rate",
        type=float,
        default=1.0,
        help="multiplier on the default rates of the faults that strike during the run (default 1.0)",
    )
    p.add_argument("--quiet", action="store_true", help="no progress lines on stderr")
    p.set_defaults(run=_run_simulate)


def _fleet(sub: _Subparsers) -> None:
    p = sub.add_parser(
        "fleet",
        help="run live broker agents against real name servers",
        description="Run broker agents over real sockets against running name servers: one long-lived "
        "connection per server, re-registration every period, clean unregister on stop.",
    )
    p.add_argument(
        "--ns", required=True, metavar="HOST:PORT,...", type=_host_ports, help="name servers to register with"
    )
    p.add_argument("--brokers", type=int, default=4, help="broker processes (default 4)")
    p.add_argument("--slaves", type=int, default=1, help="slaves per group (default 1)")
    p.add_argument("--topics", type=int, default=10, help="topics (default 10)")
    p.add_argument("--duration", type=float, default=60.0, metavar="S", help="seconds to run (default 60)")
    p.add_argument("--period-ms", type=int, default=30_000, help="registration period (default 30000)")
    p.add_argument(
        "--faults",
        default="none",
        metavar="LIST",
        help=f"comma-separated faults, 'all' or 'none' (default: a balanced fleet); any of: {', '.join(FAULTS)}. "
        "read_lt_write and queue_skew are built into the layout, the others are injected once each",
    )
    p.add_argument("--seed", type=int, default=1)
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="TOML config; [security] there gives the access key to sign with (secrets never on the command line)",
    )
    p.set_defaults(run=_run_fleet)


def _audit(sub: _Subparsers) -> None:
    p = sub.add_parser(
        "audit",
        help="the nightly audit of one UTC day, or of a range of days (--from, --to)",
        description="Ingest, rebuild, liveness, consistency, distribution, findings and report for one "
        "UTC day, in one Spark application. Re-running a day replaces that day's output. With --from and --to, "
        "every day of the range in order (a backfill), each from the state the day before left.",
        epilog="--events and --lake take a folder or s3a://bucket/prefix; [storage] of --config (or the AWS "
        "environment variables) says how to reach the bucket (docs/deploy.md, Object storage).",
    )
    nightly_audit.add_arguments(p)
    p.set_defaults(run=nightly_audit.run_from_cli)


def _version_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--version",
        type=int,
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


def _queries(sub: _Subparsers) -> None:
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


def _lake(sub: _Subparsers) -> None:
    lake_parser = sub.add_parser(
        "lake",
        help="housekeeping of a lake: optimize, vacuum, retention, history",
        description="Housekeeping of a lake's Delta tables after many nightly audits.",
    )
    commands = lake_parser.add_subparsers(dest="lake_command", required=True, metavar="LAKE_COMMAND")

    def command(name: str, help: str, description: str, run: _Run) -> argparse.ArgumentParser:
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
        type=int,
        default=168,
        metavar="N",
        help="keep what the versions of the last N hours need (default and minimum without --force: 168, "
        "Delta's safety default)",
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
        type=int,
        default=None,
        metavar="N",
        help="days to keep (default: [lake] keep_days of the config; 0 keeps every day)",
    )
    p = commands.add_parser(
        "history",
        help="a table's commits, newest first",
        description="Print one JSON line per commit of a lake table, newest first: version, "
        "timestamp, operation, its parameters and metrics, and the engine that wrote it. "
        "nsaudit route --version takes a version of audit_runs.",
    )
    p.add_argument("table", metavar="TABLE", help="table name (events, topic_route_history, audit_runs, ...)")
    _lake_arg(p)
    p.add_argument("--limit", type=int, default=None, metavar="N", help="only the N newest commits")
    p.set_defaults(run=_run_history)


def _incidents(sub: _Subparsers) -> None:
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


def _demo(sub: _Subparsers) -> None:
    p = sub.add_parser(
        "demo",
        help="simulate a day with faults into ./demo and audit it",
        description="The embedded default: simulate yesterday (UTC) for a small fleet with every fault "
        "on, then run the nightly audit on it. Writes DIR/events and DIR/lake.",
    )
    p.add_argument("--dir", default="demo", type=output_dir_arg, help="output directory (default ./demo)")
    p.add_argument("--brokers", type=int, default=12, help="broker processes, in master+slave groups (default 12)")
    p.add_argument("--topics", type=int, default=60, help="topics (default 60)")
    p.add_argument("--seed", type=int, default=7, help="simulation seed (default 7)")
    p.add_argument(
        "--verbose",
        action="store_true",
        help="show Spark's and the audit stages' logs on stderr too (always in DIR/lake/_logs/DATE.log)",
    )
    p.set_defaults(run=_run_demo)


def build_parser() -> argparse.ArgumentParser:
    """The ``nsaudit`` argument parser with every command."""
    parser = OneLineParser(
        prog="nsaudit",
        description="Audit RocketMQ-style name servers: run a logging name server, simulate a fleet, "
        "and audit the event logs with Spark into Delta tables.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for add in (_nameserver, _collect, _simulate, _fleet, _audit, _queries, _incidents, _lake, _demo):
        add(sub)
    return parser


# commands that read a lake: its object-store settings come from --config (or the environment),
# and an s3a:// lake is checked to be reachable before anything is read
_LAKE_READERS = ("route", "cluster", "diff", "incidents", "lake")


def _use_storage(args: argparse.Namespace) -> None:
    from common.config import load_config
    from jobs.storage import locations, settings
    from jobs.storage.problems import check_reachable

    settings.configure(load_config(args.config))
    check_reachable(locations.normalize(args.lake))


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``nsaudit`` console script; returns the process exit code."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # --help (0) or a bad argument, already printed as one line (2)
        return int(exc.code or 0)
    if args.command == "audit" and (args.from_date or args.to_date or args.force):
        args.run = _run_backfill  # a range of days: the loop over the nightly audit
    try:
        if args.command in _LAKE_READERS:
            _use_storage(args)
        run: _Run = args.run
        return int(run(args) or 0)
    except UserError as exc:
        print(f"nsaudit {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except LakeDamaged as exc:  # the lake, not the arguments: nothing was changed
        print(f"nsaudit {args.command}: error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print(f"nsaudit {args.command}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
