"""``nsaudit demo``: the embedded default — simulate yesterday (UTC) with every fault, then audit it.

Writes ``DIR/events`` (the name servers' logs and the simulator's ground truth) and ``DIR/lake``
(Delta tables and ``reports/<date>/index.html``). Running it again the same UTC day reuses the
simulated logs and re-audits the day, which replaces that day's output; on a later day it
simulates that day too.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from common.timeutil import day_start_ms, yesterday_utc


def run_from_cli(args: argparse.Namespace) -> int:
    """Simulate (unless already done in ``--dir``) and run the nightly audit; returns its exit code."""
    from jobs import nightly_audit
    from nameserver.sim.options import SimOptions
    from nameserver.sim.run import FAULTS, simulate, summary_line

    root = Path(args.dir)
    events, lake = root / "events", root / "lake"
    day = yesterday_utc()
    truth = events / "_truth" / "faults.jsonl"
    simulated = truth.exists() and any(events.glob(f"*/{day.isoformat()}"))
    if simulated:
        print(f"demo: reusing the simulated logs in {events}", file=sys.stderr)
    else:
        options = SimOptions(
            events_dir=events,
            ns=3,
            brokers=args.brokers,
            slaves=1,
            topics=args.topics,
            start_ms=day_start_ms(day),
            hours=24.0,
            seed=args.seed,
            faults=tuple(FAULTS),
        )
        print(
            f"demo: simulating {day} for {args.brokers} brokers and {args.topics} topics on 3 name servers",
            file=sys.stderr,
        )
        result = simulate(options)
        print(summary_line(options, result), flush=True)
    audit_args = argparse.Namespace(
        events=str(events),
        lake=str(lake),
        date=day.isoformat(),
        config=None,
        master=None,
        fail_on=None,
        verbose=args.verbose,
    )
    code = nightly_audit.run_from_cli(audit_args)
    if code == 0:
        report = os.path.join(lake, "reports", day.isoformat(), "index.html")
        print(f"demo: report at {report}", file=sys.stderr)
        print(
            f"demo: try: .venv/bin/nsaudit route --lake {lake} --ns ns-a --topic topic-0000 "
            f"--at {day.isoformat()}T12:00:00Z",
            file=sys.stderr,
        )
    return code
