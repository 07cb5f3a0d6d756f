"""Divergence between name servers (``jobs.analytics.divergence``).

Hand-built history, liveness and ``ns_runs`` rows for three servers. Times are ms after 00:00 of
``DAY`` (negative: the day before); ``None`` as an end means still valid at the end of the row's
day. The grace is 40000 ms unless said otherwise: a disagreement of exactly 40000 ms is not an
episode, one of 40001 ms is.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json

import pytest
from chispa import assert_df_equality

from common.config import AuditConfig, Config
from common.timeutil import DAY_MS, day_start_ms
from jobs import lake
from jobs.analytics import divergence as D
from jobs.lake.tables import read_table
from schemas.divergence import NS_DIVERGENCES_SCHEMA
from schemas.findings import FINDINGS_SCHEMA
from schemas.liveness import LIVENESS_WINDOWS_SCHEMA
from schemas.routes import BROKER_ADDR_HISTORY_SCHEMA, NS_RUNS_SCHEMA, TOPIC_ROUTE_HISTORY_SCHEMA
from tests.jobs.fault_free import fault_free_day  # noqa: F401  (the shared fault-free day, a fixture)
from tests.jobs.inputs import frame

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 21)
PREV = DAY - dt.timedelta(days=1)
T0 = day_start_ms(DAY)
G = 40_000
A, B, C = "ns-a", "ns-b", "ns-c"
M, S, N = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"


def at(ms: int | None) -> dt.datetime | None:
    """``ms`` after 00:00 of DAY as a UTC datetime (None stays None)."""
    return None if ms is None else dt.datetime.fromtimestamp((T0 + ms) / 1000, tz=dt.UTC)


def ms_of(collected: dt.datetime) -> int:
    """A collected timestamp (naive, in the driver's local time, as PySpark returns it) as ms
    after 00:00 of DAY."""
    return round(collected.timestamp() * 1000) - T0


def day_of(ms: int) -> dt.date:
    return PREV if ms < 0 else DAY


def qd(ns: str, topic: str, broker_name: str, start: int, end: int | None, rwps: str = "8/8/6/0") -> tuple:
    r, w, p, s = (int(x) for x in rwps.split("/"))
    return (ns, topic, broker_name, r, w, p, s, at(start), at(end), None, None, day_of(start))


def addr(ns: str, broker_name: str, broker_id: int, address: str, start: int, end: int | None) -> tuple:
    return (ns, "C1", broker_name, broker_id, address, at(start), at(end), None, None, day_of(start))


def window(ns: str, address: str, start: int, end: int | None, reason: str = "open") -> dict:
    row = dict.fromkeys(LIVENESS_WINDOWS_SCHEMA.names)
    row.update(
        date=day_of(start),
        ns=ns,
        broker_addr=address,
        start_ts=at(start),
        end_ts=at(end),
        end_reason=reason,
        heartbeats=1,
        late_heartbeats=0,
    )
    return row


def run(ns: str, start: int, end: int | None, reason: str = "open") -> tuple:
    return (ns, at(start), at(end), None, None, reason, None, day_of(start))


ALL_DAY = [run(A, 0, None), run(B, 0, None), run(C, 0, None)]


def divergences(spark, queues=(), addrs=(), windows=(), runs=ALL_DAY, grace=G, day=DAY):
    """``ns_divergences`` rows of ``day`` computed from the given rows, in key order."""
    span = D.Span.of(day, grace)
    keyed_df = D.build_keyed_facts(
        frame(spark, list(queues), TOPIC_ROUTE_HISTORY_SCHEMA),
        frame(spark, list(addrs), BROKER_ADDR_HISTORY_SCHEMA),
        frame(spark, [tuple(w[n] for n in LIVENESS_WINDOWS_SCHEMA.names) for w in windows], LIVENESS_WINDOWS_SCHEMA),
        span,
    )
    periods_df = D.agg_up_periods(frame(spark, list(runs), NS_RUNS_SCHEMA), span)
    episodes_df = D.build_episodes(keyed_df, periods_df, day, grace)
    return D.select_divergences(episodes_df, day).orderBy("kind", "topic", "broker_name", "broker_addr", "start_ts")


def expected(spark, *rows: dict):
    """``NS_DIVERGENCES_SCHEMA`` rows; each dict gives kind, key columns, start, end (ms after
    00:00), views and the counts."""
    out = []
    for r in rows:
        out.append(
            (
                DAY,
                r["kind"],
                r.get("topic"),
                r.get("broker_name"),
                r.get("broker_addr"),
                at(r["start"]),
                at(r["end"]),
                r["end"] - r["start"],
                r["views"],
                r["wrong"],
                r["up"],
                r["exposure"],
            )
        )
    return frame(spark, out, NS_DIVERGENCES_SCHEMA)


def check(actual_df, expected_df):
    # computed columns come out nullable; the writer enforces NOT NULL
    assert_df_equality(actual_df, expected_df, ignore_nullable=True)


# ---------------------------------------------------------------------------- route_missing


def test_route_missing_grace_edge(spark):
    queues = [
        # TopicX: ns-c loses it for exactly the grace: propagation, not an episode
        qd(A, "TopicX", "broker-a", 0, None),
        qd(B, "TopicX", "broker-a", 0, None),
        qd(C, "TopicX", "broker-a", 0, 100_000),
        qd(C, "TopicX", "broker-a", 140_000, None),
        # TopicY: one millisecond longer
        qd(A, "TopicY", "broker-a", 0, None),
        qd(B, "TopicY", "broker-a", 0, None),
        qd(C, "TopicY", "broker-a", 0, 100_000),
        qd(C, "TopicY", "broker-a", 140_001, None),
    ]
    check(
        divergences(spark, queues),
        expected(
            spark,
            dict(
                kind="route_missing",
                topic="TopicY",
                start=100_000,
                end=140_001,
                views={A: "present", B: "present", C: "absent"},
                wrong=1,
                up=3,
                exposure=round(40_001 / 3, 3),
            ),
        ),
    )


def test_route_missing_leaves_out_a_stopped_server(spark):
    # ns-c stops at 100 s and starts again at 130 s with empty tables
    runs = [run(A, 0, None), run(B, 0, None), run(C, 0, 100_000, "ns_stop"), run(C, 130_000, None)]
    queues = [
        # back 20 s after the restart: 50 s without the topic, of which 30 s down: no episode
        qd(A, "TopicZ", "broker-a", 0, None),
        qd(B, "TopicZ", "broker-a", 0, None),
        qd(C, "TopicZ", "broker-a", 0, 100_000),
        qd(C, "TopicZ", "broker-a", 150_000, None),
        # back 60 s after the restart: the episode starts when ns-c is up again
        qd(A, "TopicW", "broker-a", 0, None),
        qd(B, "TopicW", "broker-a", 0, None),
        qd(C, "TopicW", "broker-a", 0, 100_000),
        qd(C, "TopicW", "broker-a", 190_000, None),
    ]
    check(
        divergences(spark, queues, runs=runs),
        expected(
            spark,
            dict(
                kind="route_missing",
                topic="TopicW",
                start=130_000,
                end=190_000,
                views={A: "present", B: "present", C: "absent"},
                wrong=1,
                up=3,
                exposure=20_000.0,
            ),
        ),
    )


def test_route_missing_on_a_majority_open_at_day_end(spark):
    # a new topic reaches ns-a only and stays so: ns-c is down for 30 s in the middle
    runs = [run(A, 0, None), run(B, 0, None), run(C, 0, 100_000, "ns_stop"), run(C, 130_000, None)]
    df = divergences(spark, [qd(A, "TopicN", "broker-a", 50_000, None)], runs=runs)
    exposure = round(50_000 / 3 + 30_000 / 2 + (DAY_MS - 130_000) / 3, 3)
    check(
        df,
        expected(
            spark,
            dict(
                kind="route_missing",
                topic="TopicN",
                start=50_000,
                end=DAY_MS,
                # the longest stretch: 130 s to midnight, all three up, two without the route
                views={A: "present", B: "absent", C: "absent"},
                wrong=1,
                up=3,
                exposure=exposure,
            ),
        ),
    )


# ---------------------------------------------------------------------------- broker_missing


def test_broker_missing(spark):
    windows = [
        # M: ns-c expires it and it re-registers exactly the grace later
        window(A, M, 0, None),
        window(B, M, 0, None),
        window(C, M, 0, 60_000, "expire"),
        window(C, M, 100_000, None),
        # S: one millisecond longer
        window(A, S, 0, None),
        window(B, S, 0, None),
        window(C, S, 0, 60_000, "expire"),
        window(C, S, 100_001, None),
        # N: a lost unregister: ns-c keeps it until its scan expires it
        window(A, N, 0, 100_000, "unregister"),
        window(B, N, 0, 100_000, "unregister"),
        window(C, N, 0, 230_000, "expire"),
    ]
    check(
        divergences(spark, windows=windows),
        expected(
            spark,
            dict(
                kind="broker_missing",
                broker_addr=S,
                start=60_000,
                end=100_001,
                views={A: "live", B: "live", C: "absent"},
                wrong=1,
                up=3,
                exposure=round(40_001 / 3, 3),
            ),
            dict(
                kind="broker_missing",
                broker_addr=N,
                start=100_000,
                end=230_000,
                views={A: "absent", B: "absent", C: "live"},
                wrong=1,
                up=3,
                exposure=round(130_000 / 3, 3),
            ),
        ),
    )


def test_broker_missing_two_servers_tie_keeps_the_live_view(spark):
    runs = [run(A, 0, None), run(B, 0, None)]
    windows = [window(A, M, 0, None), window(B, M, 0, 10_000, "channel_close")]
    check(
        divergences(spark, windows=windows, runs=runs),
        expected(
            spark,
            dict(
                kind="broker_missing",
                broker_addr=M,
                start=10_000,
                end=DAY_MS,
                views={A: "live", B: "absent"},
                wrong=1,
                up=2,
                exposure=(DAY_MS - 10_000) / 2,
            ),
        ),
    )


# ---------------------------------------------------------------------------- queue_data_mismatch


def test_queue_data_mismatch(spark):
    addrs = [addr(ns, name, 0, a, 0, None) for ns in (A, B, C) for name, a in (("broker-a", M), ("broker-b", N))]
    addrs.append(addr(A, "broker-c", 0, S, 0, None))  # known to ns-a only
    queues = [
        # TopicA: the restart race (W20): ns-c knows TopicA (broker-b) and broker-a, not this QueueData
        *(qd(ns, "TopicA", "broker-b", 0, None) for ns in (A, B, C)),
        qd(A, "TopicA", "broker-a", 0, None),
        qd(B, "TopicA", "broker-a", 0, None),
        qd(C, "TopicA", "broker-a", 100_000, None),
        # TopicB: write perm wiped on ns-b for exactly the grace
        qd(A, "TopicB", "broker-a", 0, None),
        qd(C, "TopicB", "broker-a", 0, None),
        qd(B, "TopicB", "broker-a", 0, 50_000),
        qd(B, "TopicB", "broker-a", 50_000, 90_000, "8/8/4/0"),
        qd(B, "TopicB", "broker-a", 90_000, None),
        # TopicC: one millisecond longer
        qd(A, "TopicC", "broker-a", 0, None),
        qd(C, "TopicC", "broker-a", 0, None),
        qd(B, "TopicC", "broker-a", 0, 50_000),
        qd(B, "TopicC", "broker-a", 50_000, 90_001, "8/8/4/0"),
        qd(B, "TopicC", "broker-a", 90_001, None),
        # TopicD: broker-c is unknown to ns-b and ns-c: broker-level, not compared per topic
        *(qd(ns, "TopicD", "broker-b", 0, None) for ns in (A, B, C)),
        qd(A, "TopicD", "broker-c", 0, None),
    ]
    check(
        divergences(spark, queues, addrs),
        expected(
            spark,
            dict(
                kind="queue_data_mismatch",
                topic="TopicA",
                broker_name="broker-a",
                start=0,
                end=100_000,
                views={A: "8/8/6/0", B: "8/8/6/0", C: "absent"},
                wrong=1,
                up=3,
                exposure=round(100_000 / 3, 3),
            ),
            dict(
                kind="queue_data_mismatch",
                topic="TopicC",
                broker_name="broker-a",
                start=50_000,
                end=90_001,
                views={A: "8/8/6/0", B: "8/8/4/0", C: "8/8/6/0"},
                wrong=1,
                up=3,
                exposure=round(40_001 / 3, 3),
            ),
        ),
    )


# ---------------------------------------------------------------------------- broker_addrs_mismatch


def test_broker_addrs_mismatch(spark):
    addrs = [
        # broker-a: only ns-a sees the slave S promoted to id 0 at 100 s; open at the end of the day
        addr(A, "broker-a", 0, M, 0, 100_000),
        addr(A, "broker-a", 1, S, 0, 100_000),
        addr(A, "broker-a", 0, S, 100_000, None),
        *(addr(ns, "broker-a", i, a, 0, None) for ns in (B, C) for i, a in ((0, M), (1, S))),
        # broker-b: ns-b misses the slave for exactly the grace
        *(addr(ns, "broker-b", 0, N, 0, None) for ns in (A, B, C)),
        addr(A, "broker-b", 1, "10.0.0.4:10911", 0, None),
        addr(C, "broker-b", 1, "10.0.0.4:10911", 0, None),
        addr(B, "broker-b", 1, "10.0.0.4:10911", 0, 50_000),
        addr(B, "broker-b", 1, "10.0.0.4:10911", 90_000, None),
    ]
    both = '{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}'
    check(
        divergences(spark, addrs=addrs),
        expected(
            spark,
            dict(
                kind="broker_addrs_mismatch",
                broker_name="broker-a",
                start=100_000,
                end=DAY_MS,
                views={A: '{"0":"10.0.0.2:10911"}', B: both, C: both},
                wrong=1,
                up=3,
                exposure=round((DAY_MS - 100_000) / 3, 3),
            ),
        ),
    )


# ---------------------------------------------------------------------------- midnight


def test_episode_from_the_day_before_counts_its_time_before_midnight(spark):
    runs = [run(ns, -DAY_MS, None) for ns in (A, B, C)] + ALL_DAY
    queues = [
        # 30 s before midnight + 15 s after: 45 s, an episode; today's part is reported from 00:00
        *(qd(ns, "TopicM", "broker-a", -DAY_MS, None) for ns in (A, B)),
        *(qd(ns, "TopicM", "broker-a", 0, None) for ns in (A, B)),
        qd(C, "TopicM", "broker-a", -DAY_MS, -30_000),
        qd(C, "TopicM", "broker-a", 15_000, None),
        # 20 s + 15 s: 35 s, propagation
        *(qd(ns, "TopicK", "broker-a", -DAY_MS, None) for ns in (A, B)),
        *(qd(ns, "TopicK", "broker-a", 0, None) for ns in (A, B)),
        qd(C, "TopicK", "broker-a", -DAY_MS, -20_000),
        qd(C, "TopicK", "broker-a", 15_000, None),
        # a disagreement of the day before only: not today's
        *(qd(ns, "TopicO", "broker-a", -DAY_MS, None) for ns in (A, B)),
        *(qd(ns, "TopicO", "broker-a", 0, None) for ns in (A, B, C)),
        qd(C, "TopicO", "broker-a", -DAY_MS, -41_000),
    ]
    check(
        divergences(spark, queues, runs=runs),
        expected(
            spark,
            dict(
                kind="route_missing",
                topic="TopicM",
                start=0,
                end=15_000,
                views={A: "present", B: "present", C: "absent"},
                wrong=1,
                up=3,
                exposure=5_000.0,
            ),
        ),
    )


def test_no_facts_no_episodes(spark):
    assert divergences(spark).count() == 0


# ---------------------------------------------------------------------------- grace


def test_derive_grace():
    assert D.derive_grace(30_012, 10_000, Config()) == D.Grace(42_012, "derived", 30_012, 10_000, 2_000)
    # unknown period and scan interval: the configured defaults
    assert D.derive_grace(None, None, Config()).grace_ms == 30_000 + 10_000 + 2_000
    configured = Config(audit=AuditConfig(divergence_grace_ms=40_000))
    assert D.derive_grace(30_012, 10_000, configured) == D.Grace(40_000, "config")


def test_agg_grace_inputs(spark):
    windows = [window(A, M, 0, None), window(B, M, 0, None), window(C, M, 0, None)]
    gaps = [30_000, None, 30_010]  # a window with a single refresh has no gap
    rows = [
        tuple({**w, "p50_gap_ms": g}[n] for n in LIVENESS_WINDOWS_SCHEMA.names)
        for w, g in zip(windows, gaps, strict=True)
    ]
    windows_df = frame(spark, rows, LIVENESS_WINDOWS_SCHEMA)
    starts_df = frame(spark, [(10_000,), (15_000,), (None,)], "scan_interval_ms long")
    row = D.agg_grace_inputs(windows_df, starts_df).first()
    assert (row["heartbeat_period_ms"], row["scan_interval_ms"]) == (30_000, 15_000)
    empty = D.agg_grace_inputs(windows_df.limit(0), starts_df.limit(0)).first()
    assert (empty["heartbeat_period_ms"], empty["scan_interval_ms"]) == (None, None)


# ---------------------------------------------------------------------------- findings


def test_findings_one_per_episode(spark):
    span = D.Span.of(DAY, G)
    runs_df = frame(spark, ALL_DAY, NS_RUNS_SCHEMA)
    keyed_df = D.build_keyed_facts(
        frame(
            spark,
            [
                qd(A, "TopicN", "broker-a", 50_000, None),  # on a minority, open at day end
                qd(A, "TopicA", "broker-a", 0, None),
                qd(B, "TopicA", "broker-a", 0, None),
            ],
            TOPIC_ROUTE_HISTORY_SCHEMA,
        ),
        frame(spark, [], BROKER_ADDR_HISTORY_SCHEMA),
        frame(
            spark,
            [
                tuple(w[n] for n in LIVENESS_WINDOWS_SCHEMA.names)
                for w in (window(A, M, 0, None), window(B, M, 0, None), window(C, M, 0, 100_000))
            ],
            LIVENESS_WINDOWS_SCHEMA,
        ),
        span,
    )
    episodes_df = D.build_episodes(keyed_df, D.agg_up_periods(runs_df, span), DAY, G)
    grace = D.Grace(G, "config")
    found = D.agg_divergence_findings(episodes_df, span, grace).orderBy("subject").collect()
    assert [(r["date"], r["category"], r["kind"], r["severity"], r["subject"], r["ns"]) for r in found] == [
        (DAY, "consistency", "ns_divergence", "warning", M, None),
        (DAY, "consistency", "ns_divergence", "warning", "TopicA", None),  # absent on one of three
        (DAY, "consistency", "ns_divergence", "critical", "TopicN", None),  # absent on two of three
    ]
    assert [(ms_of(r["start_ts"]), ms_of(r["end_ts"])) for r in found] == [
        (100_000, DAY_MS),
        (0, DAY_MS),
        (50_000, DAY_MS),
    ]
    detail = json.loads(found[2]["detail"])
    assert detail == {
        "kind": "route_missing",
        "key": {"topic": "TopicN"},
        "ns_views": {A: "present", B: "absent", C: "absent"},
        "majority": "absent",
        "duration_ms": DAY_MS - 50_000,
        "exposure": round((DAY_MS - 50_000) / 3, 3),
        "servers_wrong": 1,
        "servers_up": 3,
        "grace_ms": G,
        "grace_source": "config",
        "began_before_day": False,
        "continues_next_day": True,
    }
    assert json.loads(found[0]["detail"])["key"] == {"broker_addr": M}


# ---------------------------------------------------------------------------- a simulated day

SIM_HOURS = 3
SCAN_MS = 10_000
REGISTRATION_PERIOD_MS = 30_000


def _pipeline_ready() -> bool:
    if any(importlib.util.find_spec(m) is None for m in ("jobs.ingest.stage", "nameserver.sim.run")):
        return False
    from jobs.analytics.liveness import stage as liveness

    return hasattr(liveness, "run_liveness")


def _audited_day(spark, root, faults: str, fault_rate: float):
    """Simulate three name servers for a few hours of DAY, run ingest, rebuild, liveness and this
    stage; returns the truth records, the result, the day's ``ns_divergences`` rows and its
    ``consistency`` findings."""
    from jobs.analytics.liveness.stage import run_liveness
    from jobs.ingest.stage import run_ingest
    from jobs.rebuild.stage import run_rebuild
    from nameserver.sim.run import SimOptions, parse_faults, simulate
    from nameserver.sim.truth import read_truth

    events = root / "events"
    simulate(
        SimOptions(
            events_dir=events,
            ns=3,
            brokers=12,
            slaves=1,
            topics=30,
            start_ms=T0,
            hours=SIM_HOURS,
            seed=5,
            faults=parse_faults(faults),
            fault_rate=fault_rate,
            quiet=True,
        )
    )
    lake_dir = str(root / "lake")
    config = Config()
    run_ingest(spark, str(events), lake_dir, DAY, config)
    run_rebuild(spark, lake_dir, DAY, config)
    run_liveness(spark, lake_dir, DAY, config)
    result = D.run_divergence(spark, lake_dir, DAY, config)
    rows = read_table(
        spark, lake.table_path(lake_dir, lake.NS_DIVERGENCES), NS_DIVERGENCES_SCHEMA, where={"date": DAY}
    ).collect()
    found = read_table(
        spark, lake.table_path(lake_dir, lake.FINDINGS), FINDINGS_SCHEMA, where={"date": DAY, "category": D.CATEGORY}
    ).collect()
    return read_truth(events), result, rows, found


@pytest.fixture(scope="module")
def faulty_day(spark, tmp_path_factory):
    """Lost unregisters and partitions, several of each in the simulated hours."""
    return _audited_day(spark, tmp_path_factory.mktemp("divergence-faults"), "lost_unregister,partition", 8.0)


def _broker_episode(rows, addr: str, near_ms: int):
    """The one ``broker_missing`` episode of ``addr`` starting within a scan interval of ``near_ms``
    (epoch ms)."""
    episodes = [r for r in rows if r["kind"] == "broker_missing"]
    match = [r for r in episodes if r["broker_addr"] == addr and abs(ms_of(r["start_ts"]) - (near_ms - T0)) <= SCAN_MS]
    assert len(match) == 1, (addr, near_ms - T0, [(r["broker_addr"], ms_of(r["start_ts"])) for r in episodes])
    return match[0]


@pytest.mark.slow
@pytest.mark.skipif(not _pipeline_ready(), reason="needs simulate, ingest and liveness")
def test_lost_unregister_is_a_broker_missing_episode_until_the_expiry(faulty_day):
    truth, result, rows, found = faulty_day
    faults = [
        t for t in truth if t["kind"] == "lost_unregister" and t["expected"][t["lost_on"]][0]["event"] == "expire"
    ]
    assert faults, "the simulation lost no unregister"
    assert result.grace.source == "derived"
    for fault in faults:
        lossy = fault["lost_on"]
        others = [ns for ns in fault["ns"] if ns != lossy]
        unregistered = min(fault["expected"][ns][0]["ts"] for ns in others)
        expired = fault["expected"][lossy][0]["scan_ts"]
        episode = _broker_episode(rows, fault["subject"], unregistered)
        # from the unregister on the others to the expiry on the server that lost it
        assert abs(ms_of(episode["start_ts"]) - (unregistered - T0)) <= SCAN_MS, fault
        if expired - T0 < SIM_HOURS * 3_600_000:
            assert abs(ms_of(episode["end_ts"]) - (expired - T0)) <= SCAN_MS, fault
        else:  # the log ends before the expiry: the stale entry is still there at the end of the day
            assert ms_of(episode["end_ts"]) == DAY_MS, fault
        assert episode["ns_views"] == {lossy: "live", **{ns: "absent" for ns in others}}
        assert (episode["servers_wrong"], episode["servers_up"]) == (1, 3)
        finding = [f for f in found if f["subject"] == fault["subject"] and f["start_ts"] == episode["start_ts"]]
        assert [(f["kind"], f["severity"]) for f in finding] == [("ns_divergence", "warning")]
        assert json.loads(finding[0]["detail"])["grace_ms"] == result.grace.grace_ms


@pytest.mark.slow
@pytest.mark.skipif(not _pipeline_ready(), reason="needs simulate, ingest and liveness")
def test_partition_is_a_broker_missing_episode_on_the_cut_server(faulty_day):
    truth, _, rows, _ = faulty_day
    faults = [t for t in truth if t["kind"] == "partition" and t["expected"][t["cut_from"]][0]["event"] == "expire"]
    assert faults, "the simulation cut no broker off"
    for fault in faults:
        cut = fault["cut_from"]
        expired = fault["expected"][cut][0]["scan_ts"]
        episode = _broker_episode(rows, fault["subject"], expired)
        end = ms_of(episode["end_ts"])
        if fault["end_ms"] is None:
            assert end == DAY_MS, fault  # still cut off when the log ends: open at the end of the day
        else:
            # it registers again with its first periodic registration after the link heals
            assert fault["end_ms"] - T0 <= end <= fault["end_ms"] - T0 + REGISTRATION_PERIOD_MS + SCAN_MS, fault
        assert episode["ns_views"][cut] == "absent"
        assert {v for ns, v in episode["ns_views"].items() if ns != cut} == {"live"}


@pytest.mark.slow
def test_a_fault_free_day_has_no_episode(spark, fault_free_day):  # noqa: F811  (the imported fixture)
    """The shared fault-free day (``tests.jobs.fault_free``), audited by the nightly audit."""
    lake_dir, day = str(fault_free_day.lake), fault_free_day.day
    grace = D.resolve_grace(spark, lake_dir, day, Config())
    assert grace.source == "derived"
    # the brokers' own period (30 s) plus the servers' scan interval and the skew allowance
    assert abs(grace.heartbeat_period_ms - REGISTRATION_PERIOD_MS) <= 1_000
    assert grace.scan_interval_ms == SCAN_MS
    [stage] = [s for s in fault_free_day.outcome.stages if s["stage"] == "divergence"]
    assert (stage["episodes"], stage["grace_ms"]) == (0, grace.grace_ms)
    rows = read_table(
        spark, lake.table_path(lake_dir, lake.NS_DIVERGENCES), NS_DIVERGENCES_SCHEMA, where={"date": day}
    ).collect()
    found = read_table(
        spark, lake.table_path(lake_dir, lake.FINDINGS), FINDINGS_SCHEMA, where={"date": day, "category": D.CATEGORY}
    ).collect()
    assert (rows, found) == ([], [])
