"""Benchmark ``nsaudit simulate`` on the reference day, against bare serialization.

The reference day is the simulator's acceptance workload: 3 name servers, 1000 brokers (500
groups of a master and one slave), 2000 topics, 24 simulated hours, every fault at the default
rate, about 8.6 M events. Target: >= 50,000 events/s on one core, peak RSS < 2 GiB.

For each run it prints events, wall and CPU seconds and events/s by both. CPU time is the
process's own (``time.process_time``) and is what "on one core" means when the machine is shared:
wall time then includes waiting for a core, and the load average is printed beside it. The
baseline writes the same number of heartbeat-sized lines with ``orjson.dumps`` and a buffered
file in this process: the floor any Python writer of this log stands on. Peak RSS is
``resource.getrusage`` for the whole process (every run and the baseline).

Usage:
    .venv/bin/python bench/bench_simulate.py                  # the full reference day, once
    .venv/bin/python bench/bench_simulate.py --hours 2 --runs 3
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import orjson

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from common.timeutil import parse_time
from nameserver.sim.options import SimOptions, parse_faults
from nameserver.sim.run import simulate

REFERENCE = dict(ns=3, brokers=1000, slaves=1, topics=2000)
START = "2026-11-21T00:00:00Z"

# A steady-state REGISTER_BROKER heartbeat as the writer emits it (topics elided), ~430 bytes.
HEARTBEAT = {
    "v": 1,
    "ns": "ns-a",
    "seq": 0,
    "ts": 0,
    "type": "heartbeat",
    "request_code": 103,
    "channel": "c123",
    "remote": "10.1.42.1:40001",
    "cluster": "cluster-1",
    "broker_name": "broker-317",
    "broker_id": 0,
    "broker_addr": "10.1.42.1:10911",
    "ha_addr": "10.1.42.1:10912",
    "data_version": {"timestamp": 1795100000000, "counter": 17},
    "topics_digest": "9f" * 32,
    "filter_servers": [],
    "request_version": 407,
}


def run_simulation(work: Path, hours: float, seed: int, faults: tuple[str, ...], progress: bool) -> dict:
    """One simulation into a fresh folder; the folder is removed afterwards."""
    events_dir = work / "events"
    options = SimOptions(
        events_dir, start_ms=parse_time(START), hours=hours, seed=seed, faults=faults, quiet=not progress, **REFERENCE
    )
    cpu0, wall0 = time.process_time(), time.perf_counter()
    result = simulate(options)
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    size = sum(p.stat().st_size for p in events_dir.rglob("*") if p.is_file())
    shutil.rmtree(events_dir)
    return {
        "events": result.events,
        "wall": wall,
        "cpu": cpu,
        "bytes": size,
        "load": os.getloadavg()[0],
        "faults": sum(result.faults_by_kind.values()),
    }


def run_baseline(work: Path, lines: int) -> dict:
    """``lines`` heartbeat-sized lines through orjson and a 1 MiB-buffered file, like the writer's."""
    path = work / "baseline.jsonl"
    line = dict(HEARTBEAT)
    dumps, option = orjson.dumps, orjson.OPT_APPEND_NEWLINE
    cpu0, wall0 = time.process_time(), time.perf_counter()
    with open(path, "wb", buffering=1 << 20) as f:
        write = f.write
        for seq in range(1, lines + 1):
            line["seq"] = seq
            line["ts"] = 1795219200000 + seq
            write(dumps(line, option=option))
    cpu, wall = time.process_time() - cpu0, time.perf_counter() - wall0
    path.unlink()
    return {"events": lines, "wall": wall, "cpu": cpu}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours (default 24: the reference day)")
    parser.add_argument("--runs", type=int, default=1, help="runs; the median is reported (default 1)")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--faults", default="all", help="as nsaudit simulate --faults (default all)")
    parser.add_argument("--dir", default=None, help="scratch folder (default: a new temp folder, removed after)")
    parser.add_argument("--progress", action="store_true", help="show the simulator's progress lines")
    args = parser.parse_args(argv)

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="bench_simulate-"))
    work.mkdir(parents=True, exist_ok=True)
    faults = parse_faults(args.faults)
    print(
        f"nsaudit simulate --ns 3 --brokers 1000 --slaves 1 --topics 2000 --hours {args.hours:g} "
        f"--faults {args.faults} --seed {args.seed} --start {START}   ({os.cpu_count()} cores)"
    )
    try:
        runs = []
        for i in range(args.runs):
            r = run_simulation(work, args.hours, args.seed, faults, args.progress)
            runs.append(r)
            print(
                f"run {i + 1}: {r['events']:,} events, {r['faults']} faults, {r['bytes'] / 2**30:.2f} GiB; "
                f"wall {r['wall']:.1f} s = {r['events'] / r['wall']:,.0f} events/s; "
                f"cpu {r['cpu']:.1f} s = {r['events'] / r['cpu']:,.0f} events/s; load avg {r['load']:.1f}",
                flush=True,
            )
        events = runs[0]["events"]
        wall = statistics.median(r["wall"] for r in runs)
        cpu = statistics.median(r["cpu"] for r in runs)
        base = run_baseline(work, events)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    peak_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB
    print(
        f"median of {len(runs)}: {events:,} events, wall {wall:.1f} s = {events / wall:,.0f} events/s, "
        f"cpu {cpu:.1f} s = {events / cpu:,.0f} events/s"
    )
    print(
        f"baseline (orjson.dumps + buffered write of {events:,} heartbeat lines): wall {base['wall']:.1f} s = "
        f"{events / base['wall']:,.0f} lines/s, cpu {base['cpu']:.1f} s = {events / base['cpu']:,.0f} lines/s"
    )
    print(
        f"ratio simulate/baseline: {base['wall'] / wall:.3f} by wall, {base['cpu'] / cpu:.3f} by cpu "
        f"(the simulator takes {cpu / base['cpu']:.1f}x the baseline's CPU time)"
    )
    print(f"peak RSS: {peak_rss / 2**20:.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
