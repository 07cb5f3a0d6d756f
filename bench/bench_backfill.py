"""A backfill of demo-size days, locally and on a two-worker standalone cluster with the events and
the lake in a bucket: seconds per day.

Simulates N consecutive days of the demo fleet (3 name servers, 12 brokers, 60 topics, every fault)
once, then runs ``nsaudit audit --from --to`` into a local lake (``local[2]``, local folders) and
``spark-submit jobs/backfill.py`` on a standalone master with two one-core workers (each in its
own directory), the project shipped as a ``--py-files`` zip, events and lake on a local S3 server
(S3Proxy). Each is one Spark application for the whole range. Prints each day's seconds (the
backfill's own per-day timing) and the mean.

Usage:
    HEAVY_SLOTS=2 /work/bin/heavy .venv/bin/python bench/bench_backfill.py [--days 7] [--dir out/backfill]
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_", "SPARK_MASTER"))}
    env["PYTHONPATH"] = str(REPO) + os.pathsep + env.get("PYTHONPATH", "")
    return env


def _days(out: str) -> list[dict]:
    return json.loads(out.strip().splitlines()[-1])["days"]


def _config(path: Path, storage: str = "") -> Path:
    path.write_text('[spark]\nmaster = "local[2]"\ndriver_memory = "2g"\nshuffle_partitions = 4\n' + storage)
    return path


def run_local(root: Path, first: dt.date, last: dt.date) -> list[dict]:
    argv = [
        sys.executable,
        "-m",
        "nsaudit.cli",
        "audit",
        "--events",
        str(root / "events"),
        "--lake",
        str(root / "lake-local"),
        "--from",
        first.isoformat(),
        "--to",
        last.isoformat(),
        "--config",
        str(_config(root / "local.toml")),
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=_env(), cwd=REPO)
    if done.returncode:
        raise SystemExit(f"local backfill exited {done.returncode}:\n{done.stderr[-3000:]}")
    return _days(done.stdout)


def run_cluster(root: Path, first: dt.date, last: dt.date) -> list[dict]:
    import pyarrow.fs as pafs

    from jobs.spark.s3a import hadoop_aws_jars
    from jobs.spark.standalone import StandaloneCluster, spark_home
    from jobs.storage import settings
    from jobs.storage.s3proxy import S3ProxyServer

    with (
        S3ProxyServer(root / "s3", buckets=("bench",)) as server,
        StandaloneCluster(root / "cluster", worker_memory="3g", worker_cores=1, workers=2) as cluster,
    ):
        fs = settings.resolve(server.storage_config(), {}).store.filesystem()
        pafs.copy_files(
            str(root / "events"), "bench/events", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs
        )
        storage = (
            f'[storage]\nendpoint = "{server.endpoint}"\npath_style = true\n'
            f'credentials_file = "{server.credentials_file()}"\n'
        )
        archive = root / "nsaudit.zip"
        with zipfile.ZipFile(archive, "w") as zf:
            for package in ("common", "jobs", "nameserver", "schemas"):
                for file in (REPO / package).rglob("*"):
                    if file.suffix in (".py", ".json") and "__pycache__" not in file.parts:
                        zf.write(file, file.relative_to(REPO))
        argv = [
            os.path.join(spark_home(), "bin", "spark-submit"),
            "--master",
            cluster.master_url,
            "--py-files",
            str(archive),
            "--jars",
            ",".join(hadoop_aws_jars()),
            "--driver-memory",
            "2g",
            "--conf",
            f"spark.pyspark.python={sys.executable}",
            "--conf",
            f"spark.pyspark.driver.python={sys.executable}",
            str(REPO / "jobs" / "backfill.py"),
            "--events",
            "s3a://bench/events",
            "--lake",
            "s3a://bench/lake",
            "--from",
            first.isoformat(),
            "--to",
            last.isoformat(),
            "--config",
            str(_config(root / "cluster.toml", storage)),
        ]
        done = subprocess.run(argv, capture_output=True, text=True, env=_env(), cwd=root)
        if done.returncode:
            raise SystemExit(f"cluster backfill exited {done.returncode}:\n{done.stderr[-3000:]}")
        return _days(done.stdout)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=7)
    parser.add_argument("--start", default="2026-11-01", help="first day (default 2026-11-01)")
    parser.add_argument("--dir", default="out/bench-backfill", help="work folder (replaced)")
    parser.add_argument("--modes", default="local,cluster")
    args = parser.parse_args()
    from common.timeutil import day_start_ms
    from nameserver.sim.run import FAULTS, SimOptions, simulate

    root = Path(args.dir).resolve()
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    first = dt.date.fromisoformat(args.start)
    last = first + dt.timedelta(days=args.days - 1)
    simulate(
        SimOptions(
            events_dir=root / "events",
            ns=3,
            brokers=12,
            slaves=1,
            topics=60,
            start_ms=day_start_ms(first),
            hours=24.0 * args.days,
            seed=7,
            faults=tuple(FAULTS),
            quiet=True,
        )
    )
    for mode in args.modes.split(","):
        days = (run_local if mode == "local" else run_cluster)(root, first, last)
        seconds = [d["seconds"] for d in days]
        print(
            f"{mode:<8} "
            + " ".join(f"{s:6.1f}" for s in seconds)
            + f"   mean {sum(seconds) / len(seconds):6.1f} s/day, {sum(seconds):7.1f} s in all",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
