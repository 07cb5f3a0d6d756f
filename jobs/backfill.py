"""``nsaudit audit --from DAY --to DAY``: the nightly audit of every day of a range, in one Spark
application (``spark-submit jobs/backfill.py`` with the same arguments).

Days are audited in order, each with :func:`jobs.nightly_audit.run`, so each starts from the state
the day before left in the lake (``ns_state``). A day ``audit_runs`` already records ``ok`` is
skipped unless ``--force``. A day that fails stops the backfill with that day's error: the days
before it stay ``ok``, the failed one is ``failed`` (as after a nightly run), the rest untouched.
Before the first write every day to audit is checked for segments (:mod:`jobs.preflight`), so a
range with a day of no events leaves the lake as it was.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if __package__ in (None, ""):  # run as a script by spark-submit: make the repo importable
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from common.arguments import OneLineParser
from common.config import Config, load_config
from common.errors import UserError
from common.timeutil import parse_date
from jobs import lake as lake_tables
from jobs import nightly_audit
from jobs.runlog import logging_to

if TYPE_CHECKING:  # Spark is imported by the code that starts it
    from pyspark.sql import SparkSession


@dataclass
class BackfillResult:
    """What a backfill did, day by day.

    Attributes:
        days: per day ``{"date", "status", "seconds", ...}``: status ``ok``, ``skipped`` (already
            ok) or ``failed``; an ok day carries the summary of its run.
        failed: the day that stopped the backfill, or None.
    """

    days: list[dict[str, Any]] = field(default_factory=list)
    failed: dt.date | None = None


def days_between(first: dt.date, last: dt.date) -> list[dt.date]:
    """Every day from ``first`` to ``last``, both included.

    Raises:
        UserError: ``first`` after ``last``.
    """
    if first > last:
        raise UserError(f"--from {first} is after --to {last}")
    return [first + dt.timedelta(days=n) for n in range((last - first).days + 1)]


def audited_ok(lake: str) -> set[dt.date]:
    """The days ``audit_runs`` records ``ok`` (read without Spark); none for a new lake."""
    from jobs.lake.tables import read_table_arrow

    try:
        rows = read_table_arrow(lake_tables.table_path(lake, lake_tables.AUDIT_RUNS), columns=["date", "status"])
    except FileNotFoundError:
        return set()
    return {r["date"] for r in rows.to_pylist() if r["status"] == "ok"}


def to_audit(days: Sequence[dt.date], ok_days: set[dt.date], force: bool) -> list[dt.date]:
    """The days of ``days`` a backfill audits: all with ``force``, else those not ok yet."""
    return list(days) if force else [d for d in days if d not in ok_days]


def run_days(
    spark: SparkSession | None,
    config: Config,
    args: argparse.Namespace,
    days: Sequence[dt.date],
    todo: Sequence[dt.date],
    log_file: str,
    say: Callable[[str], None],
) -> BackfillResult:
    """Audit ``todo`` among ``days`` in order (the others are skipped); stop at the first that fails.

    A day's stages show as the nightly audit's do (``audit DAY: [n/9] stage ...``), and ``say``
    gets one line per day: skipped, or ok with its seconds, or failed. ``spark`` is None only when
    ``todo`` is empty.
    """
    result = BackfillResult()
    for number, day in enumerate(days, 1):
        head = f"backfill {day} ({number}/{len(days)})"
        if day not in todo:
            say(f"{head}: already audited ok, skipped (--force audits it again)")
            result.days.append({"date": day.isoformat(), "status": "skipped"})
            continue
        started = time.perf_counter()
        outcome = nightly_audit.run_reporting_failure(spark, config, args, day, log_file)  # type: ignore[arg-type]  # set: a day to audit
        seconds = round(time.perf_counter() - started, 1)
        if outcome is None:  # the day's error is printed already
            result.days.append({"date": day.isoformat(), "status": "failed", "seconds": seconds})
            result.failed = day
            left = len(days) - number
            say(
                f"{head}: failed; {sum(d['status'] != 'failed' for d in result.days)} earlier days stay ok"
                + (f", {left} later days not audited" if left else "")
            )
            return result
        result.days.append({**nightly_audit.summary(outcome), "status": "ok", "seconds": seconds})
        say(f"{head}: ok in {seconds:.1f} s")
    return result


def _checked_range(args: argparse.Namespace) -> list[dt.date]:
    if getattr(args, "date", None):
        raise UserError("--date and --from/--to exclude each other")
    if not (args.from_date and args.to_date):
        raise UserError("a backfill needs both --from and --to")
    try:
        first, last = parse_date(args.from_date), parse_date(args.to_date)
    except ValueError as exc:
        raise UserError(f"--from/--to: {exc}") from None
    return days_between(first, last)


def run_from_cli(args: argparse.Namespace) -> int:
    """``nsaudit audit --from DAY --to DAY [--force]``: exit 0 when every day is ok or skipped, 1
    when a day failed (its error printed), 2 for bad arguments or input (nothing written), 3 when
    ``--fail-on`` matches a finding of an audited day."""
    days = _checked_range(args)
    config = load_config(args.config)
    master = nightly_audit.checked_locations(args, config)
    from jobs.preflight import check_inputs
    from jobs.storage import files
    from jobs.storage.locations import normalize
    from jobs.storage.problems import check_reachable

    check_reachable(normalize(args.lake))
    todo = to_audit(days, audited_ok(args.lake), getattr(args, "force", False))
    check_inputs(args.events, args.lake, todo)  # before the first write

    def say(line: str) -> None:
        print(line, file=sys.stderr, flush=True)

    path = files.local_log_path(normalize(args.lake), f"backfill-{days[0]}-{days[-1]}.log")
    started = time.perf_counter()
    with logging_to(path, getattr(args, "verbose", False), args.lake):
        if todo:
            spark = nightly_audit.open_session(config, master, f"nsaudit-backfill-{days[0]}-{days[-1]}", args, path)
            try:
                result = run_days(spark, config, args, days, todo, path, say)
            finally:
                spark.stop()
        else:
            result = run_days(None, config, args, days, todo, path, say)
    print(
        json.dumps(
            {
                "from": days[0].isoformat(),
                "to": days[-1].isoformat(),
                "seconds": round(time.perf_counter() - started, 1),
                "days": result.days,
            },
            sort_keys=True,
        )
    )
    if result.failed is not None:
        return 1
    return _fail_on(args, result)


def _fail_on(args: argparse.Namespace, result: BackfillResult) -> int:
    if not args.fail_on:
        return 0
    rank = nightly_audit.SEVERITY_RANK
    worst = [s for d in result.days for s, n in d.get("findings", {}).items() if n]
    if worst and max(rank[s] for s in worst) >= rank[args.fail_on]:
        print(
            f"nsaudit audit: findings of severity {max(worst, key=rank.__getitem__)} (--fail-on {args.fail_on})",
            file=sys.stderr,
        )
        return nightly_audit.EXIT_FINDINGS
    return 0


def main(argv: list[str] | None = None) -> int:
    """``spark-submit jobs/backfill.py --events DIR --lake DIR --from DAY --to DAY [--force] ...``."""
    parser = OneLineParser(prog="backfill.py", description=__doc__.splitlines()[0])
    nightly_audit.add_arguments(parser)
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:
        return int(exc.code or 0)
    try:
        return run_from_cli(args)
    except UserError as exc:
        print(f"backfill: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
