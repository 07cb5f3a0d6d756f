"""Quality of the audit's incidents against the simulator's ground truth.

    python bench/bench_findings.py [--seeds 5] [--fleets demo,large] [--hours 24] [--dir DIR]
    python bench/bench_findings.py --score EVENTS_DIR LAKE_DIR DATE     # an already audited day

Simulates days with every fault (each seed, each fleet: ``demo`` is what ``nsaudit demo`` runs, 3
servers, 12 brokers, 60 topics; ``large`` is 4 servers, 32 brokers, 200 topics) and one fault-free
day, audits each with ``jobs.nightly_audit.run`` in one Spark session, and matches the day's
incidents (``incidents`` table) with the injected faults (``_truth/faults.jsonl``).

An incident *matches* a fault when its subject is the fault's (the broker name of an address
fault, the group of a promotion or wipe, the topic, cluster or server), its servers meet the
fault's (an incident without servers meets every fault), and its span meets the fault's span
widened by expiry + scan interval + one snapshot interval (the tolerance of a liveness or sampled
finding) on both sides. Figures, per fault kind and in total:

- recall: faults matched by at least one incident;
- precision: incidents above info matched by a fault (the layout's built-in misconfigurations,
  ``read_lt_write`` and ``queue_skew``, are in the truth file too); info incidents are context
  (first-day names, one-group topics), not claims of a fault;
- incidents per fault: incidents above info over faults;
- and, for the fault-free day, its incidents above info (there should be none).

Prints figures and asserts nothing. Each day takes an audit (about 3 minutes on two cores).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import shutil
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from common.timeutil import DAY_MS, day_start_ms

DAY = dt.date(2026, 11, 21)
FLEETS = {"demo": {"ns": 3, "brokers": 12, "topics": 60}, "large": {"ns": 4, "brokers": 32, "topics": 200}}
EXPIRY_MS, SCAN_MS, SNAPSHOT_MS = 120_000, 10_000, 300_000
TOLERANCE_MS = EXPIRY_MS + SCAN_MS + SNAPSHOT_MS
ADDRESS_FAULTS = ("expire", "shutdown", "lost_unregister", "partition")


def fault_subjects(fault: dict[str, Any]) -> set[str]:
    """What an incident of this fault may be about."""
    kind, subject = fault["kind"], fault["subject"]
    if kind in ADDRESS_FAULTS:
        return {fault.get("broker_name") or subject, subject}
    if kind in ("topic_change", "delete_topic"):
        return {subject, *fault.get("broker_names", [])}
    return {subject}


def matches(incident: dict[str, Any], fault: dict[str, Any], day_end_ms: int) -> bool:
    """Same subject, servers that meet, spans that meet within the tolerance."""
    if incident["subject"] not in fault_subjects(fault):
        return False
    servers = set(incident["servers"])
    if servers and fault["ns"] and not servers & set(fault["ns"]):
        return False
    start = fault["start_ms"] - TOLERANCE_MS
    end = (fault["end_ms"] if fault["end_ms"] is not None else day_end_ms) + TOLERANCE_MS
    return incident["start_ms"] <= end and incident["end_ms"] >= start


def read_incidents(lake_dir: Path, day: dt.date) -> list[dict[str, Any]]:
    """The day's incidents, times in epoch ms."""
    from jobs import lake
    from jobs.lake.tables import read_table_arrow

    table = read_table_arrow(lake.table_path(lake_dir, lake.INCIDENTS), filters=[("date", "=", day)])
    rows = table.to_pylist()
    for r in rows:
        r["start_ms"] = int(r["start_ts"].timestamp() * 1000)
        r["end_ms"] = int(r["end_ts"].timestamp() * 1000)
    return rows


def score(events_dir: Path, lake_dir: Path, day: dt.date) -> dict[str, Any]:
    """Match one audited day's incidents with its truth file."""
    from nameserver.sim.truth import read_truth

    faults = read_truth(events_dir)
    incidents = read_incidents(lake_dir, day)
    serious = [i for i in incidents if i["severity"] != "info"]
    day_end = day_start_ms(day) + DAY_MS
    found = Counter()
    total = Counter(f["kind"] for f in faults)
    for f in faults:
        if any(matches(i, f, day_end) for i in incidents):
            found[f["kind"]] += 1
    explained = [i for i in serious if any(matches(i, f, day_end) for f in faults)]
    unexplained = [(i["root_cause"], i["subject"], i["servers"], i["severity"]) for i in serious if i not in explained]
    missed = [(f["kind"], f["subject"], f["ns"]) for f in faults if not any(matches(i, f, day_end) for i in incidents)]
    return {
        "faults": total,
        "found": found,
        "incidents": len(incidents),
        "serious": len(serious),
        "explained": len(explained),
        "unexplained": unexplained,
        "missed": missed,
        "critical": sum(i["severity"] == "critical" for i in incidents),
    }


def simulate_and_audit(spark, config, root: Path, fleet: str, seed: int, hours: float, faults: str) -> dict[str, Any]:
    """Simulate one day into ``root/events``, audit it into ``root/lake``, score it."""
    from jobs import nightly_audit
    from nameserver.sim.options import SimOptions, parse_faults
    from nameserver.sim.run import simulate

    shutil.rmtree(root, ignore_errors=True)
    events, lake_dir = root / "events", root / "lake"
    shape = FLEETS[fleet]
    simulate(
        SimOptions(
            events,
            ns=shape["ns"],
            brokers=shape["brokers"],
            slaves=1,
            topics=shape["topics"],
            start_ms=day_start_ms(DAY),
            hours=hours,
            seed=seed,
            faults=parse_faults(faults),
            quiet=True,
        )
    )
    lake_dir.mkdir(parents=True)
    started = time.perf_counter()
    nightly_audit.run(spark, config, str(events), str(lake_dir), DAY, lambda line: None)
    result = score(events, lake_dir, DAY)
    result["seconds"] = time.perf_counter() - started
    return result


def print_day(name: str, r: dict[str, Any]) -> None:
    faults = sum(r["faults"].values())
    print(
        f"{name}: {faults} faults, {sum(r['found'].values())} found; {r['incidents']} incidents "
        f"({r['serious']} above info, {r['critical']} critical), {r['explained']} of those explained"
        + (f"; audit {r['seconds']:.0f} s" if "seconds" in r else ""),
        flush=True,
    )
    for m in r["missed"]:
        print(f"  missed: {m}")
    for u in r["unexplained"]:
        print(f"  unexplained: {u}")


def print_totals(days: list[dict[str, Any]], clean: dict[str, Any] | None) -> None:
    faults, found = Counter(), Counter()
    serious = explained = 0
    for r in days:
        faults.update(r["faults"])
        found.update(r["found"])
        serious += r["serious"]
        explained += r["explained"]
    print(f"\n{'fault kind':<16} {'faults':>6} {'found':>6} {'recall':>7}")
    for kind in sorted(faults):
        print(f"{kind:<16} {faults[kind]:>6} {found[kind]:>6} {found[kind] / faults[kind]:>7.0%}")
    n = sum(faults.values())
    print(f"{'all':<16} {n:>6} {sum(found.values()):>6} {sum(found.values()) / max(n, 1):>7.0%}")
    print(
        f"precision (incidents above info explained by a fault): {explained}/{serious} = "
        f"{explained / max(serious, 1):.1%}"
    )
    print(f"incidents above info per injected fault: {serious / max(n, 1):.2f}")
    if clean is not None:
        print(f"fault-free day: {clean['serious']} incidents above info ({clean['incidents']} in all)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=5, help="seeds per fleet (default 5)")
    parser.add_argument("--fleets", default="demo,large", help="comma list of " + ", ".join(FLEETS))
    parser.add_argument("--hours", type=float, default=24.0, help="simulated hours per day (default 24)")
    parser.add_argument("--dir", type=Path, default=Path("bench/_findings"), help="work directory")
    parser.add_argument("--no-clean-day", action="store_true", help="skip the fault-free day")
    parser.add_argument(
        "--score", nargs=3, metavar=("EVENTS", "LAKE", "DATE"), help="only score an already audited day"
    )
    args = parser.parse_args()
    if args.score:
        events, lake_dir, date = args.score
        result = score(Path(events), Path(lake_dir), dt.date.fromisoformat(date))
        print_day(date, result)
        print_totals([result], None)
        return 0
    from common.config import Config
    from jobs.spark.session import build_session

    config = Config()
    spark = build_session(
        master="local[2]",
        app_name="nsaudit-bench-findings",
        shuffle_partitions=8,
        driver_memory=config.spark.driver_memory,
        java_options=config.spark.java_options,
    )
    days, clean = [], None
    try:
        for fleet in args.fleets.split(","):
            for seed in range(1, args.seeds + 1):
                result = simulate_and_audit(spark, config, args.dir / f"{fleet}-{seed}", fleet, seed, args.hours, "all")
                print_day(f"{fleet} seed {seed}", result)
                days.append(result)
        if not args.no_clean_day:
            clean = simulate_and_audit(spark, config, args.dir / "fault-free", "demo", 1, args.hours, "none")
            print_day("fault-free", clean)
    finally:
        spark.stop()
    print_totals(days, clean)
    print(json.dumps({"hours": args.hours, "seeds": args.seeds, "fleets": args.fleets}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
