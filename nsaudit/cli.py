"""``nsaudit``: the command line (docs/interfaces.md). Each command's work lives in its own module.

Every command exits non-zero with one clear line on stderr for bad arguments or bad input and
never shows a traceback for a user error. Spark is imported only by the commands that need it.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from common.arguments import OneLineParser, duration_ms_arg, int_arg, output_dir_arg, time_arg
from common.config import MAX_DURATION_MS
from common.errors import LakeDamaged, UserError
from jobs import nightly_audit
from nameserver import cli as command
from nameserver.layout import FAULTS, MAX_BROKERS, MAX_SLAVES, MAX_TOPICS  # one fleet vocabulary for simulate and fleet
from nameserver.sim.options import MAX_NS
from nsaudit.lake_commands import TIMES_EPILOG, Run, Subparsers, add_incidents, add_lake, add_queries


# The commands whose module is heavy (Spark, pyarrow, the simulator) import it when they run,
# not when the parser is built.
def _run_simulate(args: argparse.Namespace) -> int:
    from nameserver.sim import run

    return run.run_from_cli(args)


def _run_fleet(args: argparse.Namespace) -> int:
    from nameserver.fleet import launcher

    return launcher.run_from_cli(args)


def _run_backfill(args: argparse.Namespace) -> int:
    from jobs import backfill

    return backfill.run_from_cli(args)


def _run_demo(args: argparse.Namespace) -> int:
    from nsaudit import demo

    return demo.run_from_cli(args)


# The fleet's counts (simulate, fleet, demo): the ranges the layout builds (nameserver.layout).
_BROKERS = int_arg(0, MAX_BROKERS)
_SLAVES = int_arg(0, MAX_SLAVES)
_TOPICS = int_arg(0, MAX_TOPICS)
_SEED = int_arg(-(2**63), 2**63 - 1, "signed 64-bit")


def _host_ports(text: str) -> str:
    """``HOST:PORT,...`` with every port in 1..65535."""
    for item in filter(None, (part.strip() for part in text.split(","))):
        host, sep, port = item.rpartition(":")
        if not (sep and host and port.isdigit() and 0 < int(port) <= 65535):
            raise argparse.ArgumentTypeError(f"{item!r} is not HOST:PORT with a port in 1..65535")
    return text


def _nameserver(sub: Subparsers) -> None:
    p = sub.add_parser("nameserver", help="run one name server in the foreground", description=command.DESCRIPTION)
    command.add_arguments(p)
    p.set_defaults(run=command.run)


def _collect(sub: Subparsers) -> None:
    from nameserver.collect import cli as collect_cli

    p = sub.add_parser(
        "collect",
        help="poll real name servers and log what each answers",
        description=collect_cli.DESCRIPTION,
        epilog=collect_cli.EPILOG,
    )
    collect_cli.add_arguments(p)
    p.set_defaults(run=collect_cli.run)


def _simulate(sub: Subparsers) -> None:
    p = sub.add_parser(
        "simulate",
        help="write a simulated fleet's event logs, fast",
        description="Write, at simulated time, the event logs that N name servers would write for a "
        "broker fleet, using the same route-table code as the server. Deterministic per seed.",
        epilog=TIMES_EPILOG,
    )
    p.add_argument("--events", required=True, metavar="DIR", type=output_dir_arg, help="event-log directory to write")
    p.add_argument("--ns", type=int_arg(1, MAX_NS), default=3, help=f"name servers, 1..{MAX_NS} (default 3)")
    p.add_argument(
        "--brokers",
        type=_BROKERS,
        default=20,
        help=f"broker processes, in groups of one master and K slaves, 0..{MAX_BROKERS} (default 20)",
    )
    p.add_argument("--slaves", type=_SLAVES, default=1, help=f"slaves per group, K, 0..{MAX_SLAVES} (default 1)")
    p.add_argument("--topics", type=_TOPICS, default=100, help=f"topics, 0..{MAX_TOPICS} (default 100)")
    p.add_argument("--start", default=None, metavar="TIME", type=time_arg, help="default: start of the current UTC day")
    p.add_argument("--hours", type=float, default=24.0, help="simulated hours (default 24)")
    p.add_argument("--seed", type=_SEED, default=1, help="random seed, a signed 64-bit integer (default 1)")
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


def _fleet(sub: Subparsers) -> None:
    p = sub.add_parser(
        "fleet",
        help="run live broker agents against real name servers",
        description="Run broker agents over real sockets against running name servers: one long-lived "
        "connection per server, re-registration every period, clean unregister on stop.",
    )
    p.add_argument(
        "--ns", required=True, metavar="HOST:PORT,...", type=_host_ports, help="name servers to register with"
    )
    p.add_argument("--brokers", type=_BROKERS, default=4, help=f"broker processes, 0..{MAX_BROKERS} (default 4)")
    p.add_argument("--slaves", type=_SLAVES, default=1, help=f"slaves per group, 0..{MAX_SLAVES} (default 1)")
    p.add_argument("--topics", type=_TOPICS, default=10, help=f"topics, 0..{MAX_TOPICS} (default 10)")
    p.add_argument("--duration", type=float, default=60.0, metavar="S", help="seconds to run (default 60)")
    p.add_argument(
        "--period-ms",
        type=duration_ms_arg(100),
        default=30_000,
        metavar="N",
        help=f"registration period, 100..{MAX_DURATION_MS} ms (ten years) (default 30000)",
    )
    p.add_argument(
        "--faults",
        default="none",
        metavar="LIST",
        help=f"comma-separated faults, 'all' or 'none' (default: a balanced fleet); any of: {', '.join(FAULTS)}. "
        "read_lt_write and queue_skew are built into the layout, the others are injected once each",
    )
    p.add_argument("--seed", type=_SEED, default=1, help="layout seed, a signed 64-bit integer (default 1)")
    p.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="TOML config; [security] there gives the access key to sign with (secrets never on the command line)",
    )
    p.set_defaults(run=_run_fleet)


def _audit(sub: Subparsers) -> None:
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


def _demo(sub: Subparsers) -> None:
    p = sub.add_parser(
        "demo",
        help="simulate a day with faults into ./demo and audit it",
        description="The embedded default: simulate yesterday (UTC) for a small fleet with every fault "
        "on, then run the nightly audit on it. Writes DIR/events and DIR/lake.",
    )
    p.add_argument("--dir", default="demo", type=output_dir_arg, help="output directory (default ./demo)")
    p.add_argument(
        "--brokers",
        type=_BROKERS,
        default=12,
        help=f"broker processes, in master+slave groups, 0..{MAX_BROKERS} (default 12)",
    )
    p.add_argument("--topics", type=_TOPICS, default=60, help=f"topics, 0..{MAX_TOPICS} (default 60)")
    p.add_argument("--seed", type=_SEED, default=7, help="simulation seed, a signed 64-bit integer (default 7)")
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
    for add in (_nameserver, _collect, _simulate, _fleet, _audit, add_queries, add_incidents, add_lake, _demo):
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
        run: Run = args.run
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
