"""Housekeeping of a lake after a month of nightly runs: ``nsaudit lake optimize``, ``vacuum`` and
``retention``, with ``nsaudit route`` answering the same before and after each.

A small fleet (two name servers, one broker group of a master and a slave, three topics, topics
created and deleted through the days) is simulated for ``--days`` days (default 30) and each day
is audited into one lake the way ``nsaudit route`` needs it (ingest, rebuild, route snapshots,
``audit_runs`` recorded ``ok``), one SparkSession for all of them. Then, each through the command
line as an operator runs it:

1. ``nsaudit lake optimize``: checks that ``events`` and ``route_snapshots`` hold at most one file
   per partition afterwards (the partitions here are far below the size limit);
2. ``nsaudit lake vacuum --retain-hours 0 --force``: checks that no Parquet file outside the
   tables' current versions is left on disk;
3. ``nsaudit lake retention`` with ``[lake] keep_days = --keep-days``: checks that every table
   holds exactly the last N days.

Around each step, ``nsaudit route`` is asked for every server and topic at two instants of every
day; the answers must be equal (after retention: equal for the days kept, "not audited" for the
others). Prints the files, bytes and seconds of each step and exits 1 if a check fails.

Usage:
    .venv/bin/python bench/bench_housekeeping.py                    # 30 days, keep 7
    .venv/bin/python bench/bench_housekeeping.py --days 10 --keep-days 3 --work /tmp/hk
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from common.timeutil import day_start_ms, iso

SERVERS = ("ns-a", "ns-b")
TOPICS = ("topic-0000", "topic-0001", "topic-0002")
FIRST_DAY = dt.date(2026, 10, 1)
SNAPSHOT_INTERVAL_MS = 300_000  # the default: 288 route snapshots per server and day


def cli(*argv) -> tuple[int, str, str]:
    """``nsaudit ARGV`` in this process: exit code, stdout, stderr."""
    from nsaudit.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in argv])
    return code, out.getvalue(), err.getvalue()


def answers(lake: Path, days: list[dt.date]) -> dict[tuple, str]:
    """``nsaudit route`` for every server and topic at 01:00 and 22:00 of every day."""
    result = {}
    for day in days:
        for offset in (3_600_000, 79_200_000):
            for ns in SERVERS:
                for topic in TOPICS:
                    at = iso(day_start_ms(day) + offset)
                    code, out, err = cli("route", "--lake", lake, "--ns", ns, "--topic", topic, "--at", at)
                    if code != 0:
                        raise SystemExit(f"nsaudit route --ns {ns} --topic {topic} --at {at} failed: {err}")
                    result[(day, offset, ns, topic)] = out
    return result


def audit_days(lake: Path, events: Path, days: list[dt.date]) -> float:
    """Ingest, rebuild and snapshot each day into ``lake``; returns the seconds taken."""
    from common.config import AuditConfig, Config
    from jobs import snapshots
    from jobs.ingest import stage as ingest
    from jobs.lake import audit_runs
    from jobs.rebuild import stage as rebuild
    from jobs.spark.session import build_session

    spark = build_session(
        master="local[2]", app_name="bench-housekeeping", shuffle_partitions=2, lake_writer="delta-rs"
    )
    config = Config(audit=AuditConfig(snapshot_interval_ms=SNAPSHOT_INTERVAL_MS))
    start = time.perf_counter()
    for i, day in enumerate(days, 1):
        t = time.perf_counter()
        audit_runs.record(spark, str(lake), day, "running", [], {})
        ingest.run_ingest(spark, str(events), str(lake), day, config)
        rebuild.run_rebuild(spark, str(lake), day, config)
        snapshots.run_snapshots(spark, str(lake), day, config)
        audit_runs.record(spark, str(lake), day, "ok", [], {})
        print(f"  audited {day} ({i}/{len(days)}) in {time.perf_counter() - t:.1f} s", flush=True)
    spark.stop()
    return time.perf_counter() - start


def table_summary(lake: Path) -> dict[str, tuple[int, int, int]]:
    """Per table: data files, the most files in one partition, Parquet files on disk."""
    from jobs.housekeeping.commands import lake_tables
    from jobs.housekeeping.files import table_files

    summary = {}
    for name, path in lake_tables(str(lake)):
        files = table_files(path)
        on_disk = sum(1 for _ in Path(path).rglob("*.parquet"))
        summary[name] = (files.files, max(files.per_partition.values(), default=0), on_disk)
    return summary


def step(label: str, lake: Path, *argv) -> tuple[str, float]:
    """Run one ``nsaudit lake`` command, print its output, and return it with its seconds."""
    t = time.perf_counter()
    code, out, err = cli(*argv)
    seconds = time.perf_counter() - t
    print(f"\n$ nsaudit {' '.join(str(a) for a in argv)}   ({seconds:.1f} s, exit {code})\n{out}{err}", end="")
    if code != 0:
        raise SystemExit(f"{label} failed with exit code {code}")
    return out, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--days", type=int, default=30, help="simulated days audited into the lake (default 30)")
    parser.add_argument("--keep-days", type=int, default=7, help="[lake] keep_days for retention (default 7)")
    parser.add_argument(
        "--work",
        default="/tmp/nsaudit-bench-housekeeping",
        help="work directory; its simulated logs are reused, its lake rebuilt",
    )
    args = parser.parse_args(argv)
    if not 0 < args.keep_days < args.days:
        parser.error("--keep-days must be at least 1 and fewer than --days")
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from nameserver.sim.run import SimOptions, simulate

    work = Path(args.work)
    events, lake, config = work / "events", work / "lake", work / "lake.toml"
    days = [FIRST_DAY + dt.timedelta(days=i) for i in range(args.days)]
    marker = work / f"simulated-{args.days}-days"
    if not marker.exists():
        shutil.rmtree(events, ignore_errors=True)
        t = time.perf_counter()
        simulate(
            SimOptions(
                events_dir=events,
                ns=len(SERVERS),
                brokers=2,
                slaves=1,
                topics=len(TOPICS),
                start_ms=day_start_ms(days[0]),
                hours=24.0 * args.days,
                seed=11,
                faults=("topic_change",),
                fault_rate=4.0,
                quiet=True,
            )
        )
        marker.touch()
        print(f"simulated {args.days} days in {time.perf_counter() - t:.1f} s")
    shutil.rmtree(lake, ignore_errors=True)
    config.write_text(f'[lake]\nwriter = "delta-rs"\nkeep_days = {args.keep_days}\n')
    print(f"auditing {args.days} days into {lake}")
    audit_seconds = audit_days(lake, events, days)

    failures = []
    before = answers(lake, days)
    if not any('"route":{' in out for out in before.values()):
        failures.append("nsaudit route found no route at all")
    tables = table_summary(lake)
    print(f"\naudited in {audit_seconds:.1f} s; files per table (files, most in a partition, Parquet on disk):")
    for name, figures in tables.items():
        print(f"  {name:<22} {figures}")

    _, optimize_s = step("optimize", lake, "lake", "optimize", "--lake", lake, "--config", config)
    after_optimize = table_summary(lake)
    for table in ("events", "route_snapshots"):
        if after_optimize[table][1] > 1:
            failures.append(f"optimize left {after_optimize[table][1]} files in a partition of {table}")
    if answers(lake, days) != before:
        failures.append("nsaudit route answers differently after optimize")

    _, vacuum_s = step(
        "vacuum", lake, "lake", "vacuum", "--lake", lake, "--config", config, "--retain-hours", "0", "--force"
    )
    after_vacuum = table_summary(lake)
    for name, (files, _, on_disk) in after_vacuum.items():
        if files != on_disk:
            failures.append(f"vacuum left {on_disk - files} unreferenced Parquet files in {name}")
    if answers(lake, days) != before:
        failures.append("nsaudit route answers differently after vacuum")

    _, retention_s = step("retention", lake, "lake", "retention", "--lake", lake, "--config", config)
    kept = set(days[-args.keep_days :])
    from jobs.housekeeping.commands import lake_tables
    from jobs.housekeeping.files import table_files

    for name, path in lake_tables(str(lake)):
        held = table_files(path).days
        if held and held != kept:
            failures.append(f"{name} holds {len(held)} days after retention, not the last {args.keep_days}")
    after = answers(lake, days)
    for key, old in before.items():
        new = after[key]
        if key[0] in kept and new != old:
            failures.append(f"nsaudit route answers differently for kept day {key[0]} after retention")
            break
        if key[0] not in kept and '"audited":false' not in new:
            failures.append(f"nsaudit route still answers for {key[0]}, a day retention removed")
            break

    print(f"\n{'step':<10} {'seconds':>8}   events files  route_snapshots files  Parquet files on disk (all tables)")
    for label, seconds, summary in (
        ("audited", audit_seconds, tables),
        ("optimize", optimize_s, after_optimize),
        ("vacuum", vacuum_s, after_vacuum),
        ("retention", retention_s, table_summary(lake)),
    ):
        print(
            f"{label:<10} {seconds:>8.1f}   {summary['events'][0]:>12}  {summary['route_snapshots'][0]:>21}  "
            f"{sum(s[2] for s in summary.values()):>21}"
        )
    print(f"route answers compared: {len(before)} per step")
    for failure in failures:
        print(f"FAIL: {failure}")
    print("all checks hold" if not failures else f"{len(failures)} check(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
