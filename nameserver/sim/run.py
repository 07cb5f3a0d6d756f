"""``nsaudit simulate``: the event logs a broker fleet's name servers would write, at simulated time.

Each name server is the real ``RouteInfoManager`` fed, in time order, exactly the requests and
timer ticks a running server would see, and its events go through the real
:class:`~nameserver.eventlog.writer.EventLogWriter` (durability ``none``: nothing to wait for). Runs are
deterministic: the same arguments write the same bytes. How the pieces fit is in
:mod:`nameserver.sim`; the truth file's format is in :mod:`nameserver.sim.truth`.
"""

from __future__ import annotations

import argparse
import datetime as dt
from pathlib import Path
from typing import TextIO

from common.config import NameServerConfig
from common.errors import UserError
from common.timeutil import UTC, day_start_ms, iso, parse_time
from nameserver.layout import FAULTS
from nameserver.sim.engine import SimResult, Simulation
from nameserver.sim.options import SimOptions, check_events_dir, parse_faults

__all__ = ["FAULTS", "SimOptions", "SimResult", "options_from_args", "run_from_cli", "simulate"]


def simulate(
    options: SimOptions, ns_config: NameServerConfig | None = None, progress: TextIO | None = None
) -> SimResult:
    """Write the logs and the truth file for ``options``; returns counts and final tables.

    Args:
        options: what to simulate.
        ns_config: server timers; default ``NameServerConfig``'s (expiry 120000 ms, scan every 10000 ms,
            first scan after 5000 ms).
        progress: stream for progress lines, default stderr (none with ``options.quiet``).

    Raises:
        UserError: the events directory already holds logs of these name servers.

    Example:
        >>> opts = SimOptions(Path("out/events"), ns=3, brokers=20, slaves=1, topics=100,
        ...                   start_ms=parse_time("2026-11-21T00:00:00Z"), hours=6, seed=1,
        ...                   faults=FAULTS, quiet=True)
        >>> result = simulate(opts)
        >>> result.events_by_ns["ns-a"] > 0, result.truth_path.name
        (True, 'faults.jsonl')
    """
    check_events_dir(options.events_dir, options.ns_ids)
    return Simulation(options, ns_config, progress).run()


def options_from_args(args: argparse.Namespace) -> SimOptions:
    """The ``simulate`` parser's namespace (see ``nsaudit/cli.py``) as validated options.

    Raises:
        UserError: a bad count, time, duration or fault name.
    """
    if args.start is None:
        start_ms = day_start_ms(dt.datetime.now(UTC).date())
    else:
        try:
            start_ms = parse_time(args.start)
        except ValueError as exc:
            raise UserError(f"--start: {exc}") from None
    return SimOptions(
        events_dir=Path(args.events),
        ns=args.ns,
        brokers=args.brokers,
        slaves=args.slaves,
        topics=args.topics,
        start_ms=start_ms,
        hours=args.hours,
        seed=args.seed,
        faults=parse_faults(args.faults),
        fault_rate=args.fault_rate,
        quiet=args.quiet,
    )


def run_from_cli(args: argparse.Namespace) -> int:
    """``nsaudit simulate``: run, then print one summary line on stdout. Returns 0."""
    options = options_from_args(args)
    result = simulate(options)
    print(summary_line(options, result), flush=True)
    return 0


def summary_line(options: SimOptions, result: SimResult) -> str:
    """One line: span, events per server, faults per kind, speed."""
    per_ns = ", ".join(f"{ns} {n:,}" for ns, n in result.events_by_ns.items())
    faults = ", ".join(f"{kind} {n}" for kind, n in result.faults_by_kind.items()) or "none enabled"
    rate = result.events / result.wall_seconds if result.wall_seconds > 0 else 0.0
    return (
        f"simulated {iso(options.start_ms)} to {iso(options.end_ms)}, {options.ns} name servers, "
        f"{result.layout.broker_count} brokers: {result.events:,} events ({per_ns}); "
        f"{sum(result.faults_by_kind.values())} faults ({faults}); "
        f"{result.wall_seconds:.1f} s, {rate:,.0f} events/s"
    )
