"""The rebuilt lake answers exactly what the Python replay of the same log answers, at any instant.

Logs: a simulated fleet with every fault on (``nsaudit simulate``), random event sequences from
:mod:`tests.jobs.eventgen` (some with lost lines), and the logs of real servers driven by a live
fleet, each spanning midnight (a 2-day log). Each goes
through the real ingest and rebuild once; then the lake's answers (:mod:`jobs.query.lookup`, the code
behind ``nsaudit route``/``cluster``/``diff``) are compared with a ``RouteReplayer`` that replayed
the log's events with ``ts <= T``, at hundreds of instants: right before and after route-table
changes, around midnight, before the first event and at random. Spark runs once per log; the
comparisons are plain Python. A hypothesis property checks the walk alone on many more logs.
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import io
import itertools
import random
import time
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from common.config import AuditConfig, load_config
from common.timeutil import DAY_MS, day_start_ms, utc_date
from jobs.query.lookup import RouteLake
from jobs.rebuild.stage import run_rebuild
from jobs.rebuild.views import cluster_info_view, diff_view, route_view
from jobs.rebuild.walk import walk_day
from jobs.snapshots import run_snapshots, snapshot_instants_ms
from nameserver.eventlog.writer import read_events
from nameserver.routes.replay import RouteReplayer
from nsaudit.cli import main
from tests.jobs.eventgen import TOPICS, generate_events, write_log
from tests.jobs.route_oracle import cluster_info_view_of, route_view_of, table_state_at, table_state_from_routes

DAY1 = dt.date(2026, 11, 21)
DAY2 = DAY1 + dt.timedelta(days=1)
MIDNIGHT = day_start_ms(DAY2)
SNAPSHOT_MS = 300_000


def build_lake(spark, events_dir: Path, lake_dir: Path) -> list:
    """Ingest, rebuild and snapshot both days, in order, as the nightly audit does."""
    from jobs.ingest.stage import run_ingest

    config = dataclasses.replace(load_config(), audit=AuditConfig(snapshot_interval_ms=SNAPSHOT_MS))
    results = []
    for day in (DAY1, DAY2):
        run_ingest(spark, str(events_dir), str(lake_dir), day, config)
        results.append(run_rebuild(spark, str(lake_dir), day, config))
        run_snapshots(spark, str(lake_dir), day, config)
    return results


def log_of(events_dir: Path) -> dict[str, list[dict]]:
    """Every server's events as read back from the files ingest read, in seq order."""
    by_ns: dict[str, list[dict]] = {}
    for event in read_events(events_dir):
        by_ns.setdefault(event["ns"], []).append(event)
    for events in by_ns.values():
        assert all(a["seq"] < b["seq"] and a["ts"] <= b["ts"] for a, b in itertools.pairwise(events))
    return by_ns


def change_instants(events: list[dict]) -> list[int]:
    """Instants at which a route table changed (a journaled replay), and 1 ms before and after."""
    journal: list = []
    replayer = RouteReplayer(journal=journal)
    instants = set()
    for event in events:
        replayer.apply(event)
        if journal:
            instants.update((event["ts"] - 1, event["ts"], event["ts"] + 1))
            journal.clear()
    return sorted(instants)


def pick_instants(events: list[dict], rng: random.Random, changes: int, randoms: int) -> list[int]:
    """Sorted instants: a sample of change instants, random ones, and the edges of the log and days."""
    around = change_instants(events)
    first, last = events[0]["ts"], events[-1]["ts"]
    edges = [first - 1, first, MIDNIGHT - 1, MIDNIGHT, MIDNIGHT + 1, last, last + 1, day_start_ms(DAY1)]
    picked = rng.sample(around, min(changes, len(around))) + [
        rng.randint(first - 1000, last + 1000) for _ in range(randoms)
    ]
    return sorted(set(picked + edges))


def compare(route_lake: RouteLake, ns: str, events: list[dict], instants: list[int]) -> int:
    """Assert the lake's state equals the replay's at every instant; returns how many were compared."""
    replayer = RouteReplayer()
    i = 0
    previous = None
    for at in instants:
        while i < len(events) and events[i]["ts"] <= at:
            replayer.apply(events[i])
            i += 1
        lake_state = route_lake.state_at(ns, at)
        where = f"{ns} at {at} (after seq {events[i - 1]['seq'] if i else None})"
        assert lake_state.up == replayer.up, where
        assert cluster_info_view(lake_state.tables) == cluster_info_view_of(replayer.routes.get_all_cluster_info()), (
            where
        )
        for topic in sorted(
            set(replayer.routes.topic_queue_table) | set(lake_state.tables.topic_queue_table) | set(TOPICS[:2])
        ):
            assert route_view(lake_state.tables, topic) == route_view_of(
                replayer.routes.pickup_topic_route_data(topic)
            ), (where, topic)
        assert lake_state.tables.filter_server_table == replayer.routes.filter_server_table, where
        python_state = table_state_from_routes(replayer.routes)
        if previous is not None:  # diff between consecutive instants, both ways of building it
            assert diff_view(previous[0], lake_state.tables) == diff_view(previous[1], python_state), where
        previous = (lake_state.tables, python_state)
    return len(instants)


def check_snapshots(spark, lake_dir: Path, by_ns: dict[str, list[dict]], rng: random.Random) -> None:
    """Rows of ``route_snapshots`` at a few instants equal the replay's queue data and broker addrs."""
    from jobs import lake
    from jobs.lake.tables import read_table
    from schemas.routes import ROUTE_SNAPSHOTS_SCHEMA

    rows = read_table(spark, lake.table_path(str(lake_dir), lake.ROUTE_SNAPSHOTS), ROUTE_SNAPSHOTS_SCHEMA).collect()
    got: dict[tuple, set] = {}
    for r in rows:
        at = int(r["snapshot_ts"].replace(tzinfo=dt.UTC).timestamp() * 1000)
        got.setdefault((r["ns"], at), set()).add(
            (
                r["topic"],
                r["broker_name"],
                r["cluster"],
                tuple(sorted((r["broker_addrs"] or {}).items())),
                r["read_queue_nums"],
                r["write_queue_nums"],
                r["perm"],
                r["topic_sys_flag"],
            )
        )
    instants = snapshot_instants_ms(DAY1, SNAPSHOT_MS) + snapshot_instants_ms(DAY2, SNAPSHOT_MS)
    for ns, events in by_ns.items():
        chosen = sorted(rng.sample(instants, 40) + [MIDNIGHT - 1, MIDNIGHT])
        replayer, i = RouteReplayer(), 0
        for at in chosen:
            while i < len(events) and events[i]["ts"] <= at:
                replayer.apply(events[i])
                i += 1
            routes = replayer.routes
            want = set()
            for topic, queues in routes.topic_queue_table.items():
                for name, qd in queues.items():
                    bd = routes.broker_addr_table.get(name)
                    want.add(
                        (
                            topic,
                            name,
                            bd.cluster if bd else None,
                            tuple(sorted(bd.broker_addrs.items())) if bd else (),
                            qd.read_queue_nums,
                            qd.write_queue_nums,
                            qd.perm,
                            qd.topic_sys_flag,
                        )
                    )
            assert got.get((ns, at), set()) == want, (ns, at)


def compare_logs(lake_dir: Path, by_ns: dict[str, list[dict]], seed: int, changes: int, randoms: int) -> int:
    """:func:`compare` every server of ``by_ns`` at instants picked by :func:`pick_instants`; returns the count."""
    rng = random.Random(seed)
    route_lake = RouteLake(str(lake_dir))
    return sum(
        compare(route_lake, ns, events, pick_instants(events, rng, changes, randoms)) for ns, events in by_ns.items()
    )


# ---------------------------------------------------------------------------- one lake, three kinds of log

SEEDS = (1, 2, 3)
SIMULATED_NS = ("ns-a", "ns-b", "ns-c")


@pytest.fixture(scope="module")
def logs(spark, tmp_path_factory):
    """One events folder holding three kinds of log (their servers are distinct), ingested and
    rebuilt once: a simulated fleet with every fault, 21:00 to 03:00 across midnight; random
    sequences from :mod:`tests.jobs.eventgen` (odd seeds lose a few lines: seq gaps); and the logs
    of three real servers under a live fleet, across midnight too."""
    root = tmp_path_factory.mktemp("equality")
    events_dir, lake_dir = root / "events", root / "lake"
    code = main(
        [
            "simulate",
            "--events",
            str(events_dir),
            "--ns",
            "3",
            "--brokers",
            "8",
            "--slaves",
            "1",
            "--topics",
            "30",
            "--start",
            "2026-11-21T21:00:00Z",
            "--hours",
            "6",
            "--seed",
            "11",
            "--faults",
            "all",
            "--fault-rate",
            "4",
            "--quiet",
        ]
    )
    assert code == 0
    for seed in SEEDS:
        events = generate_events(
            seed,
            ns_ids=(f"g{seed}-a", f"g{seed}-b"),
            start_ms=MIDNIGHT - 2 * 3_600_000,
            duration_ms=4 * 3_600_000,
            midnight_ms=MIDNIGHT,
        )
        write_log(events_dir, events, lose_rate=0.02 if seed % 2 else 0.0, seed=seed)
    asyncio.run(asyncio.wait_for(run_real_servers(events_dir), 120))
    results = build_lake(spark, events_dir, lake_dir)
    by_ns = log_of(events_dir)
    simulated = {ns: events for ns, events in by_ns.items() if ns in SIMULATED_NS}
    real = {ns: events for ns, events in by_ns.items() if ns in REAL_NS}
    generated = {ns: events for ns, events in by_ns.items() if ns not in SIMULATED_NS + REAL_NS}
    assert set(simulated) == set(SIMULATED_NS) and set(real) == set(REAL_NS) and len(generated) == 2 * len(SEEDS)
    return lake_dir, results, simulated, generated, real


REAL_NS = ("real-a", "real-b", "real-c")


async def run_real_servers(events_dir: Path) -> None:
    """Three real name servers (asyncio, loopback, the full protocol) with a live fleet and its
    faults, their clocks set so the run crosses into DAY2 a few seconds after it starts."""
    from common.config import EventLogConfig, NameServerConfig
    from nameserver.fleet.live import FAULTS, Fleet, FleetOptions
    from nameserver.server.controller import NameServerController

    origin = time.monotonic_ns() // 1_000_000

    def clock():
        return MIDNIGHT - 3_000 + time.monotonic_ns() // 1_000_000 - origin

    config = NameServerConfig(
        listen="127.0.0.1:0", broker_expiry_ms=3_000, scan_interval_ms=1_000, first_scan_delay_ms=1_000
    )
    servers = [
        NameServerController(ns, events_dir, config, EventLogConfig(durability="none"), clock=clock) for ns in REAL_NS
    ]
    for server in servers:
        await server.start()
    try:
        options = FleetOptions(
            servers=tuple((s.host, s.port) for s in servers),
            brokers=8,
            slaves=1,
            topics=12,
            duration_s=6.0,
            period_ms=1000,
            faults=FAULTS,
            seed=5,
        )
        fleet = Fleet(options, out=io.StringIO())
        await fleet.start()
        await fleet.run()
        await fleet.stop()
    finally:
        for server in servers:
            await server.shutdown("test end")


@pytest.mark.slow
def test_simulated_fleet_with_every_fault_equals_the_replay(logs):
    lake_dir, _, simulated, _, _ = logs
    assert compare_logs(lake_dir, simulated, seed=1, changes=150, randoms=60) >= 500
    # the bulk of a real log is skipped: only a small share is walked one by one
    from jobs import lake
    from jobs.lake.delta.arrow import read_table_arrow

    states = read_table_arrow(
        lake.table_path(str(lake_dir), lake.NS_STATE),
        columns=["ns", "events", "interesting_events", "unresolved_topics"],
    ).to_pylist()
    fleet = [r for r in states if r["ns"] in SIMULATED_NS]
    assert len(fleet) == 2 * len(SIMULATED_NS)  # both days
    assert sum(r["interesting_events"] for r in fleet) < 0.2 * sum(r["events"] for r in fleet)
    assert all(r["unresolved_topics"] == 0 for r in fleet)


@pytest.mark.slow
def test_random_event_sequences_equal_the_replay(logs):
    lake_dir, results, simulated, generated, real = logs
    assert compare_logs(lake_dir, generated, seed=3, changes=60, randoms=40) >= 500
    assert {ns for r in results for ns in r.servers} == set(simulated) | set(generated) | set(real)


@pytest.mark.slow
def test_real_servers_logs_equal_the_replay(logs):
    """Logs written by real servers under a live fleet with faults, across midnight."""
    lake_dir, _, _, _, real = logs
    assert {utc_date(e["ts"]) for events in real.values() for e in events} == {DAY1, DAY2}
    assert {"expire", "unregister", "channel_close", "wipe_write_perm", "delete_topic"} <= {
        e["type"] for events in real.values() for e in events
    }
    assert compare_logs(lake_dir, real, seed=5, changes=200, randoms=150) >= 500


@pytest.mark.slow
def test_route_snapshots_equal_the_replay(spark, logs):
    lake_dir, _, simulated, generated, real = logs
    check_snapshots(spark, lake_dir, {**simulated, **generated, **real}, random.Random(2))


# ---------------------------------------------------------------------------- the walk alone


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 2**31), lose=st.sampled_from([0.0, 0.05]))
def test_walking_every_event_equals_the_replay_at_any_instant(tmp_path_factory, seed, lose):
    events_dir = tmp_path_factory.mktemp("walk") / "events"
    write_log(
        events_dir,
        generate_events(
            seed, ns_ids=("w",), start_ms=MIDNIGHT - 3_600_000, duration_ms=2 * 3_600_000, midnight_ms=MIDNIGHT
        ),
        lose_rate=lose,
        seed=seed,
    )
    events = log_of(events_dir)["w"]
    intervals, state = {}, None
    for day in (DAY1, DAY2):
        start = day_start_ms(day)
        result = walk_day("w", day, state, [e for e in events if start <= e["ts"] < start + DAY_MS])
        intervals[day], state = result.intervals, result.state
    replayer, i = RouteReplayer(), 0
    for at in pick_instants(events, random.Random(seed), 40, 20):
        while i < len(events) and events[i]["ts"] <= at:
            replayer.apply(events[i])
            i += 1
        if utc_date(at) not in intervals:
            continue
        tables = table_state_at(intervals[utc_date(at)], at)
        assert cluster_info_view(tables) == cluster_info_view_of(replayer.routes.get_all_cluster_info()), at
        for topic in TOPICS:
            assert route_view(tables, topic) == route_view_of(replayer.routes.pickup_topic_route_data(topic)), at
