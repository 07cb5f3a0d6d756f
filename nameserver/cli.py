"""The name server's command line: its arguments, shared by ``nsaudit nameserver`` and ``python -m nameserver``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from common.arguments import OneLineParser, duration_ms_arg
from common.config import MAX_DURATION_MS
from common.errors import UserError
from nameserver.metrics.endpoint import listen_address

DESCRIPTION = (
    "Run one RocketMQ-compatible name server that logs every route change to DIR. "
    "Prints 'nameserver ID listening on HOST:PORT' when ready; SIGTERM/SIGINT stop it cleanly."
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the name server's options to ``parser``."""
    parser.add_argument("--ns-id", required=True, help="this server's id, used in the event log")
    parser.add_argument(
        "--listen",
        default=None,
        metavar="HOST:PORT",
        help="address to bind (default 127.0.0.1:9876; port 0 picks a free port)",
    )
    parser.add_argument("--events", required=True, metavar="DIR", help="event-log directory")
    parser.add_argument(
        "--broker-expiry-ms",
        type=duration_ms_arg(1),
        default=None,
        metavar="N",
        help=f"default 120000; 1..{MAX_DURATION_MS} (ten years)",
    )
    parser.add_argument(
        "--scan-interval-ms",
        type=duration_ms_arg(1),
        default=None,
        metavar="N",
        help=f"default 10000; 1..{MAX_DURATION_MS} (ten years)",
    )
    parser.add_argument(
        "--metrics-listen",
        default=None,
        type=listen_address,
        metavar="HOST:PORT",
        help="serve Prometheus metrics at http://HOST:PORT/metrics (default: off; port 0 picks a "
        "free port, printed on stderr)",
    )
    parser.add_argument("--config", default=None, metavar="FILE", help="TOML config (default conf/nsaudit.toml)")


def run(args: argparse.Namespace) -> int:
    """Run the server the parsed arguments describe until SIGTERM/SIGINT; returns the exit code."""
    from nameserver.server.launcher import run_from_cli

    return run_from_cli(args)


def main(argv: Sequence[str] | None = None, prog: str = "nsaudit nameserver") -> int:
    """Parse ``argv`` and run the server; a user error is one line on stderr and exit 2."""
    parser = OneLineParser(prog=prog, description=DESCRIPTION)
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except UserError as exc:
        print(f"{prog}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
