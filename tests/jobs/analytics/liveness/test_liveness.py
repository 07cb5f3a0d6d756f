"""Liveness windows, expiry timing, findings and availability (``jobs.analytics.liveness``).

Small hand-built event logs in the ``events`` table layout (``ts`` timestamp beside ``ts_ms``,
``last_update_ts`` timestamp, ``data_version`` struct). Times are ms after 00:00 of ``DAY``; a
server's ``ns_start`` at 0 puts its scan ticks at 5000, 15000, ... (docs/nameserver-semantics.md §8.1).
"""

from __future__ import annotations

import datetime as dt
import json
import math
import random

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

from common.timeutil import day_start_ms
from jobs.analytics import liveness as L
from jobs.analytics.liveness import windows as LW
from schemas.liveness import LIVENESS_WINDOWS_SCHEMA
from tests.jobs.inputs import frame

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 21)
T0 = day_start_ms(DAY)
M, S, N = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"
DV1, DV2 = (100, 1), (100, 2)
PARAMS = L.LivenessParams()

EVENTS_SCHEMA = T.StructType(
    [
        T.StructField("ns", T.StringType(), False),
        T.StructField("seq", T.LongType(), False),
        T.StructField("ts", T.TimestampType(), False),
        T.StructField("ts_ms", T.LongType(), False),
        T.StructField("type", T.StringType(), False),
        T.StructField("request_code", T.IntegerType()),
        T.StructField("cluster", T.StringType()),
        T.StructField("broker_name", T.StringType()),
        T.StructField("broker_id", T.LongType()),
        T.StructField("broker_addr", T.StringType()),
        T.StructField("data_version", L.DATA_VERSION_TYPE),
        T.StructField("last_update_ts", T.TimestampType()),
        T.StructField("broker_expiry_ms", T.LongType()),
        T.StructField("scan_interval_ms", T.LongType()),
        T.StructField("date", T.DateType(), False),
    ]
)


def at(ms: int | None) -> dt.datetime | None:
    """``ms`` after 00:00 of DAY as a UTC datetime (None stays None)."""
    return None if ms is None else dt.datetime.fromtimestamp((T0 + ms) / 1000, tz=dt.UTC)


class Log:
    """One name server's events, with seq counting up from ``seq``; methods chain."""

    def __init__(self, ns: str = "ns-a", seq: int = 1) -> None:
        self.ns, self.seq, self.rows = ns, seq, []

    def _add(self, t: int, type_: str, **keys) -> Log:
        row = dict.fromkeys(EVENTS_SCHEMA.names)
        row.update(ns=self.ns, seq=self.seq, ts=at(t), ts_ms=T0 + t, type=type_, date=DAY, **keys)
        self.rows.append(row)
        self.seq += 1
        return self

    def start(self, t: int, expiry: int = 120_000, scan: int = 10_000) -> Log:
        return self._add(t, "ns_start", broker_expiry_ms=expiry, scan_interval_ms=scan)

    def stop(self, t: int) -> Log:
        return self._add(t, "ns_stop")

    def reg(self, t: int, addr: str, bid: int = 0, dv=DV1, name: str = "broker-a", type_: str = "register") -> Log:
        return self._add(
            t, type_, request_code=103, cluster="C1", broker_name=name, broker_id=bid, broker_addr=addr, data_version=dv
        )

    def hb(self, t: int, addr: str, bid: int = 0, dv=DV1, name: str = "broker-a") -> Log:
        return self.reg(t, addr, bid, dv, name, type_="heartbeat")

    def hb904(self, t: int, addr: str) -> Log:
        # 904 carries no broker id (event-log TYPE_RULES)
        return self._add(t, "heartbeat", request_code=904, cluster="C1", broker_name="broker-a", broker_addr=addr)

    def qdv(self, t: int, addr: str, dv) -> Log:
        return self._add(
            t,
            "heartbeat",
            request_code=322,
            cluster="C1",
            broker_name="broker-a",
            broker_id=0,
            broker_addr=addr,
            data_version=dv,
        )

    def unreg(self, t: int, addr: str) -> Log:
        return self._add(
            t, "unregister", request_code=104, cluster="C1", broker_name="broker-a", broker_id=0, broker_addr=addr
        )

    def expire(self, t: int, addr: str, last: int) -> Log:
        return self._add(
            t, "expire", cluster="C1", broker_name="broker-a", broker_id=0, broker_addr=addr, last_update_ts=at(last)
        )

    def close(self, t: int, addr: str | None) -> Log:
        keys = dict(cluster="C1", broker_name="broker-a", broker_id=0) if addr else {}
        return self._add(t, "channel_close", request_code=None, broker_addr=addr, **keys)


def events_df(spark, *logs: Log):
    """The logs as an ``events``-layout DataFrame."""
    return frame(spark, [row for log in logs for row in log.rows], EVENTS_SCHEMA)


def empty_prev(spark):
    return frame(spark, [], LIVENESS_WINDOWS_SCHEMA)


def prev_open(spark, ns: str, addr: str, last_update: int, bid: int = 0):
    """The day before's ``liveness_windows``: one window of ``addr`` open at its end."""
    day_before = DAY - dt.timedelta(days=1)
    row = (
        day_before,
        ns,
        "C1",
        "broker-a",
        bid,
        addr,
        at(-3_600_000),
        None,
        "open",
        None,
        100,
        30_000,
        30_000,
        30_000,
        0,
        at(last_update),
        None,
    )
    return frame(spark, [row], LIVENESS_WINDOWS_SCHEMA)


CARRIED_RUNS_DDL = "ns string, start_ms long, broker_expiry_ms long, scan_interval_ms long"
PREV_UP_DDL = "ns string, up_at_end boolean, last_stop_ms long"


def frames(spark, *logs: Log, prev=None, carried_runs=None, prev_up=None, params: L.LivenessParams = PARAMS):
    return L.build_liveness(
        events_df(spark, *logs),
        prev if prev is not None else empty_prev(spark),
        carried_runs if carried_runs is not None else frame(spark, [], CARRIED_RUNS_DDL),
        prev_up if prev_up is not None else frame(spark, [], PREV_UP_DDL),
        DAY,
        params,
    )


WINDOW_VIEW = T.StructType(
    [
        T.StructField("ns", T.StringType()),
        T.StructField("broker_addr", T.StringType()),
        T.StructField("broker_id", T.LongType()),
        T.StructField("start_ts", T.TimestampType()),
        T.StructField("end_ts", T.TimestampType()),
        T.StructField("end_reason", T.StringType()),
        T.StructField("carried_in", T.StringType()),
        T.StructField("heartbeats", T.LongType()),
        T.StructField("last_update_ts", T.TimestampType()),
    ]
)


def window_view(df):
    return df.select(*WINDOW_VIEW.names)


def expect_windows(spark, rows):
    """Rows of (ns, addr, broker_id, start, end, end_reason, carried_in, heartbeats, last_update), ms."""
    return frame(spark, [(ns, a, b, at(s), at(e), r, c, h, at(u)) for ns, a, b, s, e, r, c, h, u in rows], WINDOW_VIEW)


def assert_same(actual, expected):
    assert_df_equality(actual, expected, ignore_row_order=True, ignore_nullable=True)


def finding_rows(df, kind: str | None = None):
    """Findings as (kind, severity, subject, ns, start ms, end ms, detail dict), sorted."""
    if kind is not None:
        df = df.where(F.col("kind") == kind)
    rows = df.select(
        "kind",
        "severity",
        "subject",
        "ns",
        F.unix_millis("start_ts").alias("s"),
        F.unix_millis("end_ts").alias("e"),
        "detail",
    ).collect()
    return sorted(
        (
            r.kind,
            r.severity,
            r.subject,
            r.ns,
            None if r.s is None else r.s - T0,
            None if r.e is None else r.e - T0,
            json.loads(r.detail),
        )
        for r in rows
    )


# ---------------------------------------------------------------------------- event preparation


def test_with_event_ms_accepts_both_time_layouts(spark):
    ts_df = frame(spark, [(at(5), at(1)), (at(7), None)], "ts timestamp, last_update_ts timestamp")
    ms_df = frame(spark, [(T0 + 5, T0 + 1), (T0 + 7, None)], "ts long, last_update_ts long")
    expected = frame(spark, [(T0 + 5, T0 + 1), (T0 + 7, None)], "ts_ms long, last_update_ms long")
    for df in (ts_df, ms_df):
        assert_same(L.with_event_ms(df).select("ts_ms", "last_update_ms"), expected)


def test_runs_are_numbered_by_the_resets_before_each_event(spark):
    log = Log().reg(1000, M).stop(2000).start(3000).reg(4000, M)
    other = Log("ns-b").reg(500, M)  # no reset at all: run 0 all day (null row in the join)
    df = L.with_event_ms(events_df(spark, log, other))
    intervals = L.agg_run_intervals(L.agg_resets(df))
    assert_same(
        intervals.select("ns", "run", "lo_seq", "hi_seq", F.col("next_reset.type").alias("next")),
        frame(
            spark,
            [("ns-a", 0, 0, 2, "ns_stop"), ("ns-a", 1, 2, 3, "ns_start"), ("ns-a", 2, 3, 2**63 - 1, None)],
            "ns string, run int, lo_seq long, hi_seq long, next string",
        ),
    )
    # the reset itself opens its run (edge: seq equal to the interval's lower bound)
    assert_same(
        L.with_run(df, intervals).select("ns", "seq", "run"),
        frame(
            spark,
            [("ns-a", 1, 0), ("ns-a", 2, 1), ("ns-a", 3, 2), ("ns-a", 4, 2), ("ns-b", 1, 0)],
            "ns string, seq long, run int",
        ),
    )


def test_streams_are_numbered_and_address_events_tagged_by_their_run(spark):
    """Each (ns, address, run) gets its own int ``sid``; an event's run follows its seq, so one
    address before and after a restart is two streams, and a server without resets keeps run 0."""
    log = Log().reg(1000, M).reg(1500, S).stop(2000).start(3000).reg(4000, M)
    other = Log("ns-b").reg(500, M)
    df = L.with_event_ms(events_df(spark, log, other))
    intervals = L.agg_run_intervals(L.agg_resets(df))
    streams = frame(
        spark,
        [("ns-a", M, 0), ("ns-a", S, 0), ("ns-a", M, 2), ("ns-b", M, 0), ("ns-a", M, 0)],
        "ns string, broker_addr string, run int",
    )
    numbered = LW.number_streams(streams, intervals)
    assert_same(
        numbered,
        frame(
            spark,
            [
                (0, "ns-a", M, 0, 0, 3),
                (1, "ns-a", M, 2, 4, 2**63 - 1),
                (2, "ns-a", S, 0, 0, 3),
                (3, "ns-b", M, 0, 0, 2**63 - 1),
            ],
            "sid int, ns string, broker_addr string, run int, lo_seq long, hi_seq long",
        ),
    )
    tagged = LW.with_stream_id(LW.select_address_stream(df), numbered)
    assert tagged.columns == list(LW.STREAM_COLUMNS)
    assert [(r["sid"], r["seq"]) for r in tagged.orderBy("sid", "seq").collect()] == [(0, 1), (1, 5), (2, 2), (3, 1)]


# ---------------------------------------------------------------------------- windows


@pytest.mark.parametrize(
    "log, expected",
    [
        (
            Log().start(0).reg(1000, M).hb(31000, M).unreg(40000, M),
            ("ns-a", M, 0, 1000, 40000, "unregister", None, 2, 31000),
        ),
        (Log().start(0).reg(5000, M).expire(135000, M, 5000), ("ns-a", M, 0, 5000, 135000, "expire", None, 1, 5000)),
        (
            Log().start(0).reg(1000, M).close(20000, None).close(30000, M),  # a null close removes nothing
            ("ns-a", M, 0, 1000, 30000, "channel_close", None, 1, 1000),
        ),
        (Log().start(0).reg(1000, M).stop(50000), ("ns-a", M, 0, 1000, 50000, "ns_stop", None, 1, 1000)),
        (
            Log().start(0).reg(1000, M).start(60000),  # no ns_stop before: a crash restart
            ("ns-a", M, 0, 1000, 60000, "ns_restart", None, 1, 1000),
        ),
        (
            Log().start(0).reg(1000, M).hb(31000, M, bid=1),  # identity of the latest registration
            ("ns-a", M, 1, 1000, None, "open", None, 2, 31000),
        ),
    ],
    ids=["unregister", "expire", "channel_close", "ns_stop", "ns_restart", "open"],
)
def test_each_end_reason(spark, log, expected):
    assert_same(window_view(frames(spark, log).windows_df), expect_windows(spark, [expected]))


def test_events_after_a_removal_and_a_new_register_make_separate_windows(spark):
    log = (
        Log()
        .start(0)
        .reg(1000, M)
        .unreg(2000, M)
        .hb904(3000, M)  # not live: changes nothing, in no window
        .reg(4000, M)
        .hb904(5000, M)
        .stop(6000)
        .start(7000)
        .hb904(8000, M)  # after the restart the address is not live
        .reg(9000, M)
        .reg(9000, M)  # a register over a live entry only follows lost lines: ends it
    )
    expected = [
        ("ns-a", M, 0, 1000, 2000, "unregister", None, 1, 1000),
        ("ns-a", M, 0, 4000, 6000, "ns_stop", None, 2, 5000),
        ("ns-a", M, 0, 9000, 9000, "unknown", None, 1, 9000),
        ("ns-a", M, 0, 9000, None, "open", None, 1, 9000),
    ]
    assert_same(window_view(frames(spark, log).windows_df), expect_windows(spark, expected))


def test_window_open_yesterday_continues_at_midnight(spark):
    log = Log("ns-a", 500).hb(20000, M, bid=1).hb(50000, M, bid=1).reg(1000, N)
    prev = prev_open(spark, "ns-a", M, last_update=-10_000).unionByName(prev_open(spark, "ns-a", S, last_update=-5000))
    windows = frames(spark, log, prev=prev).windows_df
    expected = [
        ("ns-a", M, 1, 0, None, "open", "previous_day", 2, 50000),
        # carried with no event today: still open, last update from yesterday
        ("ns-a", S, 0, 0, None, "open", "previous_day", 0, -5000),
        ("ns-a", N, 0, 1000, None, "open", None, 1, 1000),
    ]
    assert_same(window_view(windows), expect_windows(spark, expected))
    # the first gap reaches back to yesterday's last refresh
    gaps = windows.where(F.col("broker_addr") == M).select("max_gap_ms", "p50_gap_ms").first()
    assert (gaps.max_gap_ms, gaps.p50_gap_ms) == (30000, 30000)


def test_window_from_before_the_lake_starts_at_midnight_as_unknown(spark):
    log = (
        Log("ns-a", 77)
        .hb(10000, M)  # a 103 heartbeat: M was live at 00:00
        .hb904(11000, S)
        .hb904(41000, S)  # 904s prove nothing: the server logs them for unknown addresses
        .expire(12000, N, -120_000)  # an expire proves N was live
    )
    expected = [
        ("ns-a", M, 0, 0, None, "open", "unknown", 1, 10000),
        ("ns-a", N, 0, 0, 12000, "expire", "unknown", 0, None),
    ]
    assert_same(window_view(frames(spark, log).windows_df), expect_windows(spark, expected))


def test_refreshes_gap_stats_and_late_heartbeats(spark):
    log = (
        Log()
        .start(0)
        .reg(1000, M)
        .hb(31000, M)  # gap 30000
        .hb904(36000, M)  # 904 refreshes a live entry: gap 5000
        .qdv(40000, M, DV1)  # 322 with the stored version refreshes: gap 4000
        .qdv(41000, M, DV2)  # another version: no refresh
        .qdv(42000, M, None)  # no version at all (null row): no refresh
        .hb(100000, M, dv=DV2)  # gap 60000 > 30000 + 15000: late
        .qdv(101000, M, DV2)  # the stored version is now DV2: refresh, gap 1000
        .hb(146000, M, dv=DV2)  # gap 45000 = period + slack exactly: on time (edge)
    )
    got = frames(spark, log).windows_df.select(
        "heartbeats", "max_gap_ms", "late_heartbeats", F.unix_millis("last_update_ts").alias("u")
    )
    assert got.collect() == [(7, 60000, 1, T0 + 146000)]
    pct = frames(spark, log).windows_df.select("p50_gap_ms", "p99_gap_ms").first()
    # gaps 1000, 4000, 5000, 30000, 45000, 60000: ranks ceil(0.5 * 6) = 3 and ceil(0.99 * 6) = 6
    assert (pct.p50_gap_ms, pct.p99_gap_ms) == (5000, 60000)


def exact_percentile(gaps: list[int], p: float) -> int:
    """The gap at rank ``max(1, ceil(p * n))`` of the ``n`` sorted gaps."""
    return sorted(gaps)[max(1, math.ceil(p * len(gaps))) - 1]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_gap_percentiles_are_exact_ranks_and_match_percentile_approx(spark, seed):
    # two brokers' windows on one server, interleaved, gaps drawn from a few values so that ties,
    # one-gap and two-gap windows occur; each window's p50/p99 is the exact rank, which is also
    # what Spark's percentile_approx gives for so few values
    rng = random.Random(seed)
    counts = {M: rng.choice([1, 2, 3, 40]), N: rng.randint(1, 60)}
    gaps = {
        addr: [rng.choice([30000, 30000, 29000, 31000, 45000, 60000]) for _ in range(n)] for addr, n in counts.items()
    }
    times = sorted((1000 + sum(g[:i]), addr) for addr, g in gaps.items() for i in range(len(g) + 1))
    log = Log().start(0)
    seen = set()
    for t, addr in times:
        log = (
            log.hb(t, addr, bid=0 if addr == M else 1) if addr in seen else log.reg(t, addr, bid=0 if addr == M else 1)
        )
        seen.add(addr)
    got = {
        r.broker_addr: (r.p50_gap_ms, r.p99_gap_ms, r.max_gap_ms)
        for r in frames(spark, log).windows_df.select("broker_addr", "p50_gap_ms", "p99_gap_ms", "max_gap_ms").collect()
    }
    expected = {addr: (exact_percentile(g, 0.5), exact_percentile(g, 0.99), max(g)) for addr, g in gaps.items()}
    assert got == expected
    approx = (
        frame(spark, [(a, x) for a, g in gaps.items() for x in g], "addr string, gap long")
        .groupBy("addr")
        .agg(F.percentile_approx("gap", [0.5, 0.99]).alias("p"))
        .collect()
    )
    assert {r.addr: tuple(r.p) for r in approx} == {a: e[:2] for a, e in expected.items()}


def test_single_refresh_window_has_null_gaps(spark):
    row = frames(spark, Log().start(0).reg(1000, M)).windows_df.first()
    assert (row.max_gap_ms, row.p50_gap_ms, row.p99_gap_ms, row.late_heartbeats) == (None, None, None, 0)


# ---------------------------------------------------------------------------- expiry timing


CHECK_DDL = (
    "ns string, run int, seq long, ts_ms long, last_update_ms long, broker_addr string, cluster string, "
    "broker_name string, broker_id long"
)
RUNS_DDL = (
    "ns string, run int, start_ms long, broker_expiry_ms long, scan_interval_ms long, schedule string, "
    "last_event_ms long"
)


@pytest.mark.parametrize(
    "start, last_update, removed, expected, late, expiry",
    [
        (0, 5000, 135000, 135000, False, 120000),  # W17: 125000 is on a tick and survives it
        (0, 1000, 125000, 125000, False, 120000),  # W17 variant: first tick after 121000
        (0, 5000, 137000, 135000, False, 120000),  # edge: exactly expected + tolerance
        (0, 5000, 137001, 135000, True, 120000),
        (0, 5000, 155000, 135000, True, 120000),  # 20 s after the tick: late
        (0, 150000, 275000, 275000, False, 120000),  # W18: expiry at 270000 survives that tick
        (None, 5000, 137000, 135000, False, 120000),  # start unknown: bound u + expiry + scan (null row)
        (None, 5000, 137001, 135000, True, 120000),
        (0, 1000, 5000, 5000, False, 3000),  # deadline 4000 before the first tick (5000): that tick
    ],
)
def test_expected_removal_is_the_first_tick_after_the_deadline(
    spark, start, last_update, removed, expected, late, expiry
):
    expire_df = frame(spark, [("ns-a", 1, 9, T0 + removed, T0 + last_update, M, "C1", "broker-a", 0)], CHECK_DDL)
    runs = [
        (
            "ns-a",
            1,
            None if start is None else T0 + start,
            expiry,
            10000,
            None if start is None else "ns_start",
            T0 + removed,
        )
    ]
    got = L.with_expected_removal(expire_df, frame(spark, runs, RUNS_DDL), PARAMS)
    assert got.select("expected_ms", "late").collect() == [(T0 + expected, late)]


def test_expected_removal_uses_the_servers_own_timers(spark):
    # ns_start said expiry 30000, scan 5000: ticks 5000, 10000, ...; deadline 31000 -> 35000
    log = (
        Log()
        .start(0, expiry=30_000, scan=5_000)
        .reg(1000, M)
        .expire(35000, M, 1000)
        .reg(2000, N)
        .expire(45000, N, 2000)
    )
    found = finding_rows(frames(spark, log).findings_df, "late_expiry")
    assert [(f[2], f[4], f[5], f[6]["delay_ms"]) for f in found] == [(N, 35000, 45000, 10000)]


def test_run_started_yesterday_takes_its_schedule_from_ns_runs(spark):
    # the run started yesterday at -2500: ticks at 2500 + k * 10000; deadline 125000 -> 132500
    log = Log("ns-a", 900).hb(5000, M).expire(132500, M, 5000).hb(6000, N).expire(136000, N, 6000)
    carried = frame(spark, [("ns-a", T0 - 2500, 120000, 10000)], CARRIED_RUNS_DDL)
    found = frames(spark, log, carried_runs=carried).findings_df
    late = finding_rows(found, "late_expiry")
    # N: deadline 126000 -> tick 132500; removed at 136000 is 3500 late (> 2000 tolerance)
    assert [(f[2], f[4], f[5], f[6]["schedule"]) for f in late] == [(N, 132500, 136000, "ns_runs")]


def test_never_expired_silent_entries_are_critical(spark):
    log = (
        Log()
        .start(0)
        .reg(1000, M)
        .unreg(200000, M)  # silent 199 s, then unregistered: the scan never removed it
        .reg(1000, S)
        .unreg(133000, S)  # edge: deadline 131000 + tolerance = 133000, not after it
        .reg(1000, N)  # open, silent; the server's last event below is far later
        .hb904(400000, "10.9.9.9:10911")  # the server's last event of the day (not live: no window)
    )
    never = finding_rows(frames(spark, log).findings_df, "late_expiry")
    assert [(f[1], f[2], f[4], f[5], f[6]["actual"], f[6]["end_reason"]) for f in never] == [
        ("critical", M, 131000, 200000, "never", "unregister"),
        ("critical", N, 131000, 400000, "never", "open"),
    ]


def test_crash_restart_bounds_never_by_the_last_event_before_it(spark):
    # M silent from 1000; the server's last event 100000 < deadline 131000, then down until 500000
    log = Log().start(0).reg(1000, M).reg(100000, N).start(500000)
    assert finding_rows(frames(spark, log).findings_df, "late_expiry") == []


# ---------------------------------------------------------------------------- findings


def test_broker_expired_and_unregistered(spark):
    log = Log().start(0).reg(5000, M).expire(135000, M, 5000).reg(1000, N).hb(31000, N).unreg(40000, N)
    found = finding_rows(frames(spark, log).findings_df)
    assert [f[:6] for f in found] == [
        ("broker_expired", "warning", M, "ns-a", 5000, 135000),
        ("broker_unregistered", "info", N, "ns-a", 1000, 40000),
    ]
    assert found[0][6]["silent_ms"] == 130000 and found[0][6]["broker_name"] == "broker-a"


@pytest.mark.parametrize("cycles, flapping", [(7, False), (8, True)])
def test_broker_flapping_over_the_daily_limit(spark, cycles, flapping):
    # the server's start at 0 ends the carried window: the first window is the server's doing
    log = Log().start(0)
    for i in range(cycles):
        log.reg(1000 + i * 10000, M).close(5000 + i * 10000, M)
    prev = prev_open(spark, "ns-a", M, last_update=-1000)  # carried windows are not opened today
    found = finding_rows(frames(spark, log, prev=prev).findings_df, "broker_flapping")
    if not flapping:
        assert found == []
    else:
        [(kind, severity, subject, ns, start, end, detail)] = found
        assert (severity, subject, ns, start, end) == ("warning", M, "ns-a", 11000, 75000)
        assert detail["windows"] == 7 and detail["channel_closed"] == 7 and detail["threshold"] == 6


def test_windows_reopened_after_server_restarts_are_not_flapping(spark):
    # 4 departures of its own, then 3 restarts of the server: 8 windows, 5 of the broker's doing
    log = Log().start(0)
    for i in range(4):
        log.reg(1000 + i * 10000, M).close(5000 + i * 10000, M)
    log.reg(41000, M)
    for i in range(3):
        log.stop(50000 + i * 10000).start(51000 + i * 10000).reg(52000 + i * 10000, M)
    assert finding_rows(frames(spark, log).findings_df, "broker_flapping") == []


def test_ns_restart_clean_crash_and_first_start(spark):
    a = Log("ns-a").start(0).reg(1000, M).stop(50000).start(60000)  # first start: none; clean restart
    b = Log("ns-b").start(0).reg(1000, M).start(90000)  # crash: no ns_stop before
    c = Log("ns-c", 40).start(1000)  # day begins with ns_start; up at the end of yesterday: crash
    d = Log("ns-d", 40).start(2000)  # stopped yesterday at -5000: clean
    e = Log("ns-e", 40).start(3000)  # seq > 1 but nothing known about the run before (null row)
    prev_up = frame(spark, [("ns-c", True, None), ("ns-d", False, T0 - 5000)], PREV_UP_DDL)
    found = finding_rows(frames(spark, a, b, c, d, e, prev_up=prev_up).findings_df, "ns_restart")
    assert [(f[1], f[2], f[4], f[5], f[6]["crash"]) for f in found] == [
        ("critical", "ns-b", 1000, 90000, True),
        ("critical", "ns-c", None, 1000, True),
        ("warning", "ns-a", 50000, 60000, False),
        ("warning", "ns-d", -5000, 2000, False),
        ("warning", "ns-e", None, 3000, None),
    ]


def test_steady_day_has_no_warning_or_critical_finding(spark):
    logs = []
    for i, ns in enumerate(("ns-a", "ns-b")):
        log = Log(ns).start(i * 7)
        for k in range(200):  # every 30 s, a little jitter, for 100 minutes
            for j, addr in enumerate((M, S, N)):
                t = 1000 + k * 30_000 + j * 300 + (k * 37 % 900)
                (log.reg if k == 0 else log.hb)(t, addr)
        logs.append(log)
    found = frames(spark, *logs).findings_df
    assert found.where(F.col("severity") != "info").count() == 0


# ---------------------------------------------------------------------------- availability


def test_availability_per_server_and_across_servers(spark):
    h = 3_600_000
    windows = frame(
        spark,
        [
            ("ns-a", M, at(0), at(12 * h), "C1", "broker-a", 0),
            ("ns-b", M, at(6 * h), None, "C1", "broker-a", 1),  # open: counts until 24:00
            ("ns-a", S, at(-h), at(h), "C1", "broker-b", None),  # clipped to the day (edge); null id
        ],
        "ns string, broker_addr string, start_ts timestamp, end_ts timestamp, cluster string, "
        "broker_name string, broker_id long",
    )
    servers = frame(spark, [("ns-a",), ("ns-b",)], "ns string")
    got = L.agg_broker_availability(windows, servers, DAY).orderBy("broker_addr").collect()
    m, s = got
    assert (m.live_any_ms, m.live_all_ms, m.availability_any, m.availability_all) == (24 * h, 6 * h, 1.0, 0.25)
    assert m.availability_by_ns == {"ns-a": 0.5, "ns-b": 0.75} and m.broker_id == 1 and m.windows == 2
    assert s.live_ms_by_ns == {"ns-a": h, "ns-b": 0} and (s.live_any_ms, s.live_all_ms) == (h, 0)
    assert s.broker_id is None and s.servers == 2


def test_availability_counts_the_servers_with_events_today_or_a_carried_window(spark):
    h = 3_600_000
    a = Log("ns-a").start(0).reg(h, M)  # the broker's only window: ns-a from 01:00, open
    b = Log("ns-b").start(0)  # up all day with no broker: the address is never live on every server
    prev = prev_open(spark, "ns-c", S, -30_000)  # no event today, a window carried in (expires)
    # ns-d was up at 00:00 by ns_runs but has no event nor window today: not a server of the day
    carried = frame(spark, [("ns-d", -h, 120_000, 10_000)], CARRIED_RUNS_DDL)
    got = {r.broker_addr: r for r in frames(spark, a, b, prev=prev, carried_runs=carried).availability_df.collect()}
    assert got[M].servers == 3 and got[M].live_ms_by_ns == {"ns-a": 23 * h, "ns-b": 0, "ns-c": 0}
    assert (got[M].live_any_ms, got[M].live_all_ms) == (23 * h, 0)
    assert got[S].servers == 3 and set(got[S].live_ms_by_ns) == {"ns-a", "ns-b", "ns-c"}


# ---------------------------------------------------------------------------- runs from the lake


def test_carried_run_takes_the_earliest_row_of_its_start_seq(spark):
    from schemas.routes import NS_RUNS_SCHEMA

    d0, d1 = DAY - dt.timedelta(days=2), DAY - dt.timedelta(days=1)

    def ts(d, ms):
        return dt.datetime.fromtimestamp((day_start_ms(d) + ms) / 1000, tz=dt.UTC)

    runs = frame(
        spark,
        [
            ("ns-a", ts(d0, 7000), None, 5, None, "open", None, d0),  # started the day before yesterday
            ("ns-a", ts(d1, 0), None, 5, None, "open", None, d1),  # clipped at midnight, same run
            ("ns-b", ts(d1, 0), ts(d1, 9000), None, 12, "ns_stop", None, d1),  # stopped: not carried
            ("ns-c", ts(d1, 0), None, None, None, "open", None, d1),  # began before the lake: unknown
        ],
        NS_RUNS_SCHEMA,
    )
    got = L.agg_carried_runs(runs, DAY)
    expected = frame(
        spark, [("ns-a", 5, day_start_ms(d0) + 7000, d0)], "ns string, start_seq long, start_ms long, start_date date"
    )
    assert_same(got, expected)
    up = L.agg_previous_day_up(runs, DAY).orderBy("ns").collect()
    assert [tuple(r) for r in up] == [
        ("ns-a", True, None),
        ("ns-b", False, day_start_ms(d1) + 9000),
        ("ns-c", True, None),
    ]


def test_the_address_stream_sort_carries_numbers_only(spark):
    """The stage's one big sort (every address event, by stream and seq) sorts rows without a
    string: the stream is its int ``sid``, which leads the sort keys (the sort's prefix)."""
    address_df = frame(
        spark,
        [
            ("ns-a", M, 1, T0, LW.REGISTER_103, 1, 1),
            ("ns-a", M, 2, T0 + 30_000, LW.HEARTBEAT_904, None, None),
            ("ns-b", M, 1, T0 + 5, LW.REGISTER_103, 1, 1),
        ],
        "ns string, broker_addr string, seq long, ts_ms long, kind byte, dv_ts long, dv_counter long",
    )
    no_resets = frame(spark, [], "ns string, run int, lo_seq long, hi_seq long")
    numbered = LW.number_streams(address_df.select("ns", "broker_addr", F.lit(0).alias("run")), no_resets)
    stream_df = LW.with_stream_id(address_df, numbered)
    assert not [f.name for f in stream_df.schema.fields if isinstance(f.dataType, T.StringType)]
    keyed_df = LW.with_window_keys(stream_df)
    plan = keyed_df._jdf.queryExecution().executedPlan().toString()
    # the sorts by seq (numbering the streams sorts them by their strings, a row per stream)
    sorts = [line.split("Sort [", 1)[1] for line in plan.splitlines() if "Sort [" in line and "seq#" in line]
    assert sorts and all(keys.startswith("sid#") for keys in sorts), plan
    got = [(r["sid"], r["seq"], r["wkey"], r["gap_ms"]) for r in keyed_df.orderBy("sid", "seq").collect()]
    assert got == [(0, 1, 1, None), (0, 2, 1, 30_000), (1, 1, 1, None)]
