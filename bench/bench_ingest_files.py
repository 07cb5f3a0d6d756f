"""Benchmark ingest of a day held in many small segment files.

A name server that closes a segment after every event (``segment_max_bytes`` tiny, or a log
rotated by hand) leaves one file per line; a day of such files is what this measures. The day is
written once into ``--work`` with the real writer: ``--files`` segments of one event each,
spread over ``--servers`` name servers, and every ``--bad-every``-th file gets a second line that
is not JSON (quarantined, so the JVM's checks run too). Each run ingests the day into a fresh
lake with ``jobs.ingest.stage.run_ingest`` in this process (one SparkSession, ``--master``,
default ``local[2]``) and prints its seconds, then checks what it wrote: one ``ingest_files`` row
per file, accepted + quarantined = read for each, and the totals.

Target: 10,000 one-line files in under a minute.

Usage:
    .venv/bin/python bench/bench_ingest_files.py                    # 10,000 files, one run
    .venv/bin/python bench/bench_ingest_files.py --runs 3 --files 10000
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from common.timeutil import day_start_ms

DAY = dt.date(2026, 11, 21)


def ensure_day(events_dir: Path, files: int, servers: int, bad_every: int) -> None:
    """Write the day unless ``events_dir`` already holds it (a marker names its shape)."""
    from common.config import EventLogConfig
    from nameserver.eventlog.writer import EventLogWriter

    marker = events_dir / f"_written-{files}-{servers}-{bad_every}"
    if marker.exists():
        return
    shutil.rmtree(events_dir, ignore_errors=True)
    events_dir.mkdir(parents=True)
    t0 = day_start_ms(DAY)
    config = EventLogConfig(durability="none", segment_max_bytes=1)  # a segment per event
    for s in range(servers):
        ns = f"ns-{chr(ord('a') + s)}"
        with EventLogWriter(events_dir, ns, config) as writer:
            for i in range(s, files, servers):
                writer.append(
                    {
                        "ts": t0 + i,
                        "type": "heartbeat",
                        "request_code": 904,
                        "channel": "c1",
                        "remote": "10.0.0.9:50000",
                        "cluster": "C1",
                        "broker_name": "broker-a",
                        "broker_id": None,
                        "broker_addr": "10.0.0.1:10911",
                        "ha_addr": None,
                    }
                )
    segments = sorted(events_dir.glob(f"*/{DAY}/events-*.jsonl"))
    assert len(segments) == files, (len(segments), files)
    for path in segments[::bad_every] if bad_every else ():
        with open(path, "ab") as f:
            f.write(b"not json\n")
    marker.touch()


def one_run(spark, events_dir: Path, lake_dir: Path) -> tuple[float, object]:
    from jobs.ingest.stage import run_ingest

    shutil.rmtree(lake_dir, ignore_errors=True)
    lake_dir.mkdir(parents=True)
    started = time.perf_counter()
    result = run_ingest(spark, str(events_dir), str(lake_dir), DAY)
    return time.perf_counter() - started, result


def check(spark, lake_dir: Path, files: int, bad: int) -> str:
    """What the run wrote, against what the day holds; raises when it does not add up."""
    from jobs import lake
    from jobs.lake.tables import read_table
    from schemas.ingest import INGEST_FILES_SCHEMA

    rows = read_table(spark, lake.table_path(lake_dir, lake.INGEST_FILES), INGEST_FILES_SCHEMA).collect()
    assert len(rows) == files, (len(rows), files)
    assert all(r["accepted"] + r["quarantined"] == r["lines_read"] for r in rows)
    quarantined = sum(r["quarantined"] for r in rows)
    assert quarantined == bad and sum(r["accepted"] for r in rows) == files, (quarantined, bad)
    return f"{len(rows):,} ingest_files rows, accepted + quarantined = read in each, {quarantined} quarantined"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--work", default="/tmp/nsaudit-bench-files", help="where the day is kept (default %(default)s)"
    )
    parser.add_argument("--files", type=int, default=10_000, help="one-event segment files (default %(default)s)")
    parser.add_argument(
        "--servers", type=int, default=3, help="name servers they are spread over (default %(default)s)"
    )
    parser.add_argument(
        "--bad-every",
        type=int,
        default=100,
        help="every Nth file gets a line that is not JSON; 0 = none (default %(default)s)",
    )
    parser.add_argument("--runs", type=int, default=1, help="ingests in one session (default %(default)s)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default %(default)s)")
    args = parser.parse_args(argv)
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)

    from common.config import load_config
    from jobs.spark.session import build_session

    work = Path(args.work)
    events_dir, lake_dir = work / "events", work / "lake"
    started = time.perf_counter()
    ensure_day(events_dir, args.files, args.servers, args.bad_every)
    print(f"day of {args.files:,} segment files ready in {time.perf_counter() - started:.1f} s", flush=True)
    config = load_config()
    spark = build_session(
        master=args.master,
        app_name="nsaudit-bench-files",
        shuffle_partitions=8,
        driver_memory=config.spark.driver_memory,
        java_options=config.spark.java_options,
        lake_writer=config.lake.writer,
    )
    bad = len(range(0, args.files, args.bad_every)) if args.bad_every else 0
    seconds = []
    try:
        for i in range(args.runs):
            print(f"run {i + 1}/{args.runs} (load average {os.getloadavg()[0]:.1f})", flush=True)
            took, result = one_run(spark, events_dir, lake_dir)
            seconds.append(took)
            print(
                f"  {took:.1f} s: {result.files:,} files, {result.lines_read:,} lines, "
                f"{result.quarantined} quarantined; {check(spark, lake_dir, args.files, bad)}",
                flush=True,
            )
    finally:
        spark.stop()
    print(
        f"\ningest of {args.files:,} one-event segment files ({args.servers} servers), master {args.master}: "
        f"first run {seconds[0]:.1f} s, median {statistics.median(seconds):.1f} s of {len(seconds)} "
        f"(target < 60 s); load average at the end {os.getloadavg()[0]:.1f}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
