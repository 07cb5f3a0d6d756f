"""The fixed cost of a Python task in Spark, with and without ``jobs.spark.pyworker.keep_archive_listings``.

PySpark's worker calls ``importlib.invalidate_caches()`` before every task; on Python 3.11 that
re-reads the directory of every zip archive on the worker's ``sys.path`` (Spark's ``pyspark.zip``,
py4j's zip and the spark-core jar). Every task body of this project first calls
``keep_archive_listings()``, which makes those importers keep their listing.

What it runs, in one SparkSession on ``--master`` (default ``local[2]``): a job of ``--tasks``
``mapInArrow`` tasks that each pass a handful of rows through, alternately

* **baseline**: the task body puts Python's ``invalidate_caches`` back on the importers, so the
  next task in that worker pays Spark's reset in full (as an unpatched task does);
* **kept**: the task body calls ``keep_archive_listings()``, as the project's tasks do;

``--runs`` times each (after one warm-up job of each). It prints the wall time of every job, the
medians, the median seconds per task and the ratio baseline/kept. Figures on a shared machine
are noisy: compare medians, and look at the spread.

This is a benchmark, not a test: it prints figures and asserts nothing.

Usage:
    .venv/bin/python bench/bench_tasks.py [--tasks 40] [--runs 7] [--master local[2]]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _baseline_body(batches):
    """Undo the kept listings, so the next task's reset reads the archives again."""
    import zipimport

    for finder in list(sys.path_importer_cache.values()):
        if isinstance(finder, zipimport.zipimporter):
            finder.__dict__.pop("invalidate_caches", None)
    yield from batches


def _kept_body(batches):
    from jobs.spark.pyworker import keep_archive_listings

    keep_archive_listings()
    yield from batches


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=40, help="tasks per job (default 40)")
    parser.add_argument("--runs", type=int, default=7, help="timed jobs of each kind; medians are printed (default 7)")
    parser.add_argument("--master", default="local[2]", help="Spark master (default local[2])")
    args = parser.parse_args()

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark import cloudpickle

    import jobs.spark.pyworker
    from jobs.spark.session import build_session

    cloudpickle.register_pickle_by_value(jobs.spark.pyworker)
    spark = build_session(master=args.master, app_name="bench_tasks")
    df = spark.range(args.tasks * 10, numPartitions=args.tasks)

    def job(body) -> float:
        start = time.perf_counter()
        rows = df.mapInArrow(body, df.schema).count()
        assert rows == args.tasks * 10, rows
        return time.perf_counter() - start

    print(f"{args.tasks} tasks per job on {args.master}, {args.runs} runs each (load {os.getloadavg()[0]:.1f})")
    job(_baseline_body), job(_kept_body)  # warm-up: workers started, code paths compiled
    times: dict[str, list[float]] = {"baseline": [], "kept": []}
    for _ in range(args.runs):
        times["baseline"].append(job(_baseline_body))
        times["kept"].append(job(_kept_body))
    for name, values in times.items():
        median = statistics.median(values)
        print(
            f"{name:9s} runs {' '.join(f'{v:.2f}' for v in values)} s; median {median:.2f} s, "
            f"{median / args.tasks * 1000:.0f} ms per task"
        )
    base, kept = statistics.median(times["baseline"]), statistics.median(times["kept"])
    print(f"baseline / kept: {base / kept:.2f}x (load {os.getloadavg()[0]:.1f})")
    spark.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
