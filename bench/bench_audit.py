"""Benchmark the nightly audit on the reference day, stage by stage, against a Python replay.

The reference day is the audit's acceptance workload: 3 name servers, 1000 brokers (500 groups
of a master and one slave), 2000 topics, 24 simulated hours, every fault (about 8.6 M events).
The simulator writes it once into ``--work`` (kept, so later runs reuse it).

Each run audits the day into a fresh lake with ``jobs.nightly_audit.run`` in this process (one
SparkSession, ``--master``, default ``local[2]``) and prints every stage's seconds, events/s and
the Spark jobs, stages and tasks it ran.
The first run is what a nightly ``nsaudit audit`` does (a fresh JVM, its JIT cold); later runs
reuse the warm JVM, so the summary shows the first run beside the median of all runs. Then, after
the last run and in the same process, the baseline: the day's events read back from the lake's
``events`` table with pyarrow and replayed through the Python route table
(``nameserver.routes.replay``), one server after another, which is what a single-process rebuild
would do. The ratio ``replay seconds / rebuild seconds`` is the rebuild's speed-up over it.

Driver memory is sampled every 0.2 s: the peak RSS of this Python process plus the Spark JVM
(the driver; in local mode executors run inside it) and, separately, of the Python workers.

Targets: ingest >= 200,000 lines/s; rebuild >= 3x the Python replay; ingest plus rebuild
< 90 s; liveness + divergence + distribution <= 60 s; the whole audit < 3 min; driver < 4 GiB.

Usage:
    .venv/bin/python bench/bench_audit.py                         # reference day, one run
    .venv/bin/python bench/bench_audit.py --runs 3                # median of three audits
    .venv/bin/python bench/bench_audit.py --hours 2 --brokers 100 --topics 200   # a small slice
    .venv/bin/python bench/bench_audit.py --hours 1 --brokers 4 --topics 10 --seed 5 --no-replay  # a tiny day
    .venv/bin/python bench/bench_audit.py --writer native         # through delta-spark's writer
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import statistics
import sys
import threading
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import psutil

from common.timeutil import day_start_ms

DAY = dt.date(2026, 11, 21)


class MemorySampler(threading.Thread):
    """Peak RSS of this process + its JVM child (the driver), and of the Python workers."""

    def __init__(self, period_s: float = 0.2) -> None:
        super().__init__(daemon=True)
        self.period_s = period_s
        self.peak_driver = self.peak_workers = 0
        self._stop_flag = threading.Event()

    def run(self) -> None:
        me = psutil.Process()
        while not self._stop_flag.is_set():
            driver = workers = 0
            try:
                driver = me.memory_info().rss
                for child in me.children(recursive=True):
                    try:
                        rss = child.memory_info().rss
                        if "java" in child.name():
                            driver += rss
                        else:
                            workers += rss
                    except psutil.Error:
                        continue
            except psutil.Error:
                pass
            self.peak_driver = max(self.peak_driver, driver)
            self.peak_workers = max(self.peak_workers, workers)
            self._stop_flag.wait(self.period_s)

    def stop(self) -> None:
        self._stop_flag.set()
        self.join()


def ensure_day(events_dir: Path, args: argparse.Namespace) -> None:
    """Simulate the day into ``events_dir`` unless it is already there."""
    if (events_dir / "_truth" / "faults.jsonl").exists():
        print(f"reusing the simulated day in {events_dir}", flush=True)
        return
    from nameserver.sim.options import SimOptions, parse_faults
    from nameserver.sim.run import simulate

    print(f"simulating {DAY}: 3 ns, {args.brokers} brokers, {args.topics} topics, {args.hours} h ...", flush=True)
    started = time.perf_counter()
    result = simulate(
        SimOptions(
            events_dir,
            ns=3,
            brokers=args.brokers,
            slaves=1,
            topics=args.topics,
            start_ms=day_start_ms(DAY),
            hours=args.hours,
            seed=args.seed,
            faults=parse_faults("all"),
            quiet=True,
        )
    )
    print(f"  {result.events:,} events in {time.perf_counter() - started:.0f} s", flush=True)


def python_replay(lake_dir: str) -> tuple[int, float]:
    """Replay the day's events from the ``events`` table through ``RouteReplayer``; (events, seconds).

    The read (pyarrow, one server at a time, sorted by seq) is timed with the replay: it is part
    of what a Python rebuild has to do.
    """
    import pyarrow.compute as pc

    from jobs import lake
    from jobs.lake.tables import read_table_arrow
    from nameserver.routes.replay import RouteReplayer
    from schemas.events import EVENTS_TABLE_SCHEMA

    path = lake.table_path(lake_dir, lake.EVENTS)
    started = time.perf_counter()
    servers = read_table_arrow(path, columns=["ns"], filters=[("date", "=", DAY)]).column("ns").unique().to_pylist()
    total = 0
    columns = [c for c in EVENTS_TABLE_SCHEMA.names if c not in ("ts", "date", "file", "line")]
    for ns in sorted(servers):
        table = read_table_arrow(path, columns=columns, filters=[("date", "=", DAY), ("ns", "=", ns)])
        table = table.take(pc.sort_indices(table, [("seq", "ascending")])).rename_columns(
            [("ts" if c == "ts_ms" else c) for c in columns]
        )
        replayer = RouteReplayer()
        for batch in table.to_batches(max_chunksize=65_536):
            for event in batch.to_pylist():
                replayer.apply(event)
        total += table.num_rows
    return total, time.perf_counter() - started


def one_run(spark, config, events_dir: Path, lake_dir: Path) -> dict:
    from jobs import nightly_audit
    from jobs.spark.session import lake_writer

    shutil.rmtree(lake_dir, ignore_errors=True)
    lake_dir.mkdir(parents=True)
    sampler = MemorySampler()
    sampler.start()
    started = time.perf_counter()
    outcome = nightly_audit.run(
        spark, config, str(events_dir), str(lake_dir), DAY, lambda line: print(f"  {line}", flush=True)
    )
    total = time.perf_counter() - started
    sampler.stop()
    stages = {s["stage"]: s for s in outcome.stages}
    figures = {
        "writer": lake_writer(spark),
        "total": total,
        "peak_driver": sampler.peak_driver,
        "peak_workers": sampler.peak_workers,
        "events": stages["ingest"].get("events_written", 0),
        "lines": stages["ingest"].get("lines_read", 0),
    }
    figures.update({name: s["seconds"] for name, s in stages.items()})
    figures.update(
        {f"{name}.{key}": s.get(f"spark_{key}", 0) for name, s in stages.items() for key in ("jobs", "stages", "tasks")}
    )
    return figures


def _parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--work",
        default="/tmp/nsaudit-bench",
        help="scratch folder: the simulated day is kept under it and reused; each run audits "
        "into a fresh lake beside it (default %(default)s)",
    )
    parser.add_argument(
        "--runs",
        type=int,
        default=1,
        help="audits of the day in one Spark session; figures are medians (default %(default)s)",
    )
    parser.add_argument("--master", default="local[2]", help="Spark master (default %(default)s)")
    parser.add_argument(
        "--hours", type=float, default=24.0, help="hours of the simulated day (default %(default)s: the reference day)"
    )
    parser.add_argument("--brokers", type=int, default=1000, help="simulated brokers (default %(default)s)")
    parser.add_argument("--topics", type=int, default=2000, help="simulated topics (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="simulation seed (default %(default)s)")
    parser.add_argument(
        "--config", default=None, help="nsaudit config file for the audit and its JVM (default: conf/nsaudit.toml)"
    )
    parser.add_argument(
        "--writer",
        choices=("auto", "native", "delta-rs"),
        default=None,
        help="the lake writer (default: the config's [lake] writer)",
    )
    parser.add_argument(
        "--no-replay",
        action="store_true",
        help="skip the Python replay baseline (about 8 minutes on the reference day)",
    )
    return parser.parse_args()


def main() -> int:
    args = _parse_args()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    work = Path(args.work) / f"b{args.brokers}-t{args.topics}-h{args.hours:g}"
    if args.seed != 1:
        work = work / f"s{args.seed}"
    events_dir, lake_dir = work / "events", work / "lake"
    ensure_day(events_dir, args)
    runs, replay = _audit(args, events_dir, lake_dir)
    _print_figures(args, runs, replay)
    return 0


def _audit(args: argparse.Namespace, events_dir: Path, lake_dir: Path) -> tuple[list[dict], tuple | None]:
    """Audit the day ``args.runs`` times in one session, then (unless ``--no-replay``) replay it."""
    from common.config import load_config
    from jobs.ingest.segments import list_day_segments
    from jobs.spark.profile import day_java_options
    from jobs.spark.session import build_session

    # the JVM `nsaudit audit` starts with the default configuration: its heap and JVM options
    # (for a small day, the JIT's first tier only: jobs.spark.profile)
    config = load_config(args.config)
    day_bytes = sum(f.bytes for f in list_day_segments(events_dir, DAY))
    spark = build_session(
        master=args.master,
        app_name="nsaudit-bench",
        shuffle_partitions=8,
        driver_memory=config.spark.driver_memory,
        java_options=day_java_options(config.spark.java_options, day_bytes, config.spark.small_day_bytes),
        lake_writer=args.writer or config.lake.writer,
    )
    runs = []
    replay = None
    try:
        for i in range(args.runs):
            print(f"run {i + 1}/{args.runs} (load average {os.getloadavg()[0]:.1f})", flush=True)
            runs.append(one_run(spark, config, events_dir, lake_dir))
            print(
                f"  run {i + 1}: {runs[-1]['total']:.1f} s, peak driver RSS {runs[-1]['peak_driver'] / 2**30:.2f} GiB",
                flush=True,
            )
        if not args.no_replay:
            # after every audit: the replay's Python heap stays in this process's RSS, which the
            # audits' driver-memory figure must not include
            print("python replay of the last run's events ...", flush=True)
            replay = python_replay(str(lake_dir))
    finally:
        spark.stop()
    return runs, replay


def _print_figures(args: argparse.Namespace, runs: list[dict], replay: tuple | None) -> None:
    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    def first(key: str) -> float:
        return runs[0][key]

    def both(fig) -> str:
        # the first run is the nightly audit's case (a fresh JVM); later runs reuse its warm JIT
        return f"{fig(first):8.1f} s {fig(med):8.1f} s" if len(runs) > 1 else f"{fig(first):8.1f} s"

    lines, events = runs[0]["lines"], runs[0]["events"]
    header = "first run, median" if len(runs) > 1 else "one run"
    print(
        f"\n{events:,} events ({lines:,} lines), master {args.master}, lake writer {runs[0]['writer']}, "
        f"{len(runs)} run(s); {header}:"
    )
    stages = (
        "ingest",
        "rebuild",
        "snapshots",
        "liveness",
        "divergence",
        "distribution",
        "security",
        "incidents",
        "report",
    )
    for stage in stages:
        work = "/".join(str(first(f"{stage}.{key}")) for key in ("jobs", "stages", "tasks"))
        print(
            f"  {stage:<15}{both(lambda f, s=stage: f(s))}   {events / med(stage):12,.0f} events/s (median)   "
            f"Spark jobs/stages/tasks {work} (first run)"
        )
    totals = "/".join(str(sum(first(f"{s}.{key}") for s in stages)) for key in ("jobs", "stages", "tasks"))
    print(f"  {'all stages':<15}Spark jobs/stages/tasks {totals} (first run)")
    print(f"  {'ingest+rebuild':<15}{both(lambda f: f('ingest') + f('rebuild'))}   (target < 90 s)")
    print(
        f"  {'live+div+dist':<15}{both(lambda f: f('liveness') + f('divergence') + f('distribution'))}"
        "   (target <= 60 s)"
    )
    print(f"  {'whole audit':<15}{both(lambda f: f('total'))}   (target < 180 s)")
    print(
        f"  ingest rate    {lines / first('ingest'):12,.0f} lines/s first run, {lines / med('ingest'):,.0f} median "
        "(target >= 200,000)"
    )
    if replay is not None:
        replay_events, replay_s = replay
        print(
            f"  python replay  {replay_s:8.1f} s   {replay_events / replay_s:12,.0f} events/s; rebuild speed-up "
            f"{replay_s / first('rebuild'):.2f}x first run, {replay_s / med('rebuild'):.2f}x median (target >= 3x)"
        )
    print(
        f"  peak driver RSS (python + JVM) {max(r['peak_driver'] for r in runs) / 2**30:.2f} GiB (target < 4 GiB); "
        f"python workers {max(r['peak_workers'] for r in runs) / 2**30:.2f} GiB"
    )


if __name__ == "__main__":
    sys.exit(main())
