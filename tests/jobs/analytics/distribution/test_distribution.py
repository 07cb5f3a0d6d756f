"""Queue distribution tables and findings (``jobs.analytics.distribution``).

Hand-built ``route_snapshots`` rows on the default 5-minute grid of ``DAY`` (instant ``k`` is
``k * 5`` minutes after 00:00; ``END`` is 23:59:59.999); history rows where a check needs what a
snapshot cannot show (topic-less groups, cluster sets, one address in two groups). The last tests
run the whole stage on a lake and on one simulated day with every fault (shared by its tests); one runs the
whole nightly audit of a fault-free day.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import math

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

from common.config import AuditConfig, Config
from common.timeutil import DAY_MS, day_start_ms
from jobs import lake
from jobs.analytics import distribution as D
from jobs.lake.tables import read_table, write_table
from jobs.snapshots import agg_route_snapshots, expand_positions_batch
from schemas.distribution import QUEUE_DISTRIBUTION_SCHEMA, TOPIC_DISTRIBUTION_SCHEMA
from schemas.routes import (
    BROKER_ADDR_HISTORY_SCHEMA,
    CLUSTER_HISTORY_SCHEMA,
    ROUTE_SNAPSHOTS_SCHEMA,
    TOPIC_ROUTE_HISTORY_SCHEMA,
)
from tests.jobs.fault_free import fault_free_day  # noqa: F401  (the shared fault-free day, a fixture)
from tests.jobs.inputs import frame

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 21)
T0 = day_start_ms(DAY)
STEP = 300_000
END = "end"  # the end-of-day instant
PARAMS = D.DistributionParams(STEP, 0.5, 2.0)
MA, SA = "10.0.0.1:10911", "10.0.0.2:10911"
MB, SB = "10.0.1.1:10911", "10.0.1.2:10911"
GROUP = {0: MA, 1: SA}
GROUP_B = {0: MB, 1: SB}


def at(k: int | str | None) -> dt.datetime | None:
    """Snapshot instant ``k`` (``END`` = 23:59:59.999) as a UTC datetime."""
    if k is None:
        return None
    ms = T0 + DAY_MS - 1 if k == END else T0 + k * STEP
    return dt.datetime.fromtimestamp(ms / 1000, tz=dt.UTC)


def snap(k, topic, broker="broker-a", *, ns="ns-a", perm=6, read=8, write=8, addrs=GROUP, cluster="C1", day=DAY):
    """One ``route_snapshots`` row; ``addrs=None`` is a QueueData without BrokerData."""
    return (
        at(k) if day == DAY else at(k) - dt.timedelta(days=1),
        ns,
        topic,
        None if addrs is None else cluster,
        broker,
        addrs,
        read,
        write,
        perm,
        0,
        day,
    )


def snapshots(spark, rows):
    return frame(spark, rows, ROUTE_SNAPSHOTS_SCHEMA)


def addr_row(broker, broker_id, addr, start=0, end=None, *, ns="ns-a", cluster="C1"):
    """A ``broker_addr_history`` row valid from instant ``start`` to ``end`` (None: open)."""
    return (ns, cluster, broker, broker_id, addr, at(start), at(end), 1, None, DAY)


def cluster_row(cluster, broker, start=0, end=None, *, ns="ns-a"):
    return (ns, cluster, broker, at(start), at(end), 1, None, DAY)


_BUILT: list = []  # frames built by the running test, released after it


@pytest.fixture(autouse=True)
def _release_frames():
    # build_distribution persists its shared intermediates; every cached plan left behind would
    # be matched against each later query of the session
    yield
    while _BUILT:
        _BUILT.pop().release()


def build(*args, **kwargs):
    """``D.build_distribution``, released when the test ends."""
    fr = D.build_distribution(*args, **kwargs)
    _BUILT.append(fr)
    return fr


def exact_pieces_from_snapshots(snapshots_df, params=PARAMS):
    """Hand-built snapshot rows as millisecond pieces (:mod:`jobs.analytics.distribution.exact`):
    the row of instant ``k`` holds from that instant until the next one (``END`` for its own
    millisecond)."""
    pos = D.pieces_from_snapshots(snapshots_df, DAY, params.snapshot_interval_ms)
    end_pos, step = (DAY_MS - 1) // params.snapshot_interval_ms + 1, params.snapshot_interval_ms
    return pos.withColumn(
        "first_pos", F.when(F.col("first_pos") == end_pos, DAY_MS - 1).otherwise(F.col("first_pos") * step)
    ).withColumn(
        "last_pos", F.when(F.col("last_pos") == end_pos, DAY_MS - 1).otherwise((F.col("last_pos") + 1) * step - 1)
    )


def frames(spark, snapshot_rows, *, previous=(), addr_rows=(), cluster_rows=(), params=PARAMS):
    """The stage's frames for hand-built snapshot rows (each a piece of one instant; for the exact
    findings, one that holds until the next instant)."""
    snapshots_df = snapshots(spark, snapshot_rows)
    return build(
        D.pieces_from_snapshots(snapshots_df, DAY, params.snapshot_interval_ms),
        snapshots(spark, list(previous)),
        frame(spark, list(addr_rows), BROKER_ADDR_HISTORY_SCHEMA),
        frame(spark, list(cluster_rows), CLUSTER_HISTORY_SCHEMA),
        DAY,
        params,
        exact_pieces_df=exact_pieces_from_snapshots(snapshots_df, params),
        exact_broker_data_runs_df=D.agg_exact_broker_data_runs(
            frame(spark, list(addr_rows), BROKER_ADDR_HISTORY_SCHEMA), DAY
        ),
    )


FINDING_SCHEMA = T.StructType(
    [T.StructField(c, T.StringType()) for c in ("kind", "severity", "subject", "ns")]
    + [T.StructField(c, T.TimestampType()) for c in ("start_ts", "end_ts")]
)


def findings_of(fr, kind):
    return fr.findings_df.where(F.col("kind") == kind)


def assert_findings(spark, fr, kind, expected):
    """The kind's findings are exactly ``expected``: (subject, ns, first instant, last instant).

    An exact kind's finding (``D.EXACT_KINDS``) of hand-built snapshot rows ends where the rows of
    its last instant stop holding: at the next instant."""

    def end(b):
        return at(b + 1) if kind in D.EXACT_KINDS and b != END else at(b)

    actual_df = findings_of(fr, kind).select(*FINDING_SCHEMA.names)
    expected_df = frame(
        spark, [(kind, D.SEVERITY[kind], subject, ns, at(a), end(b)) for subject, ns, a, b in expected], FINDING_SCHEMA
    )
    assert_df_equality(actual_df, expected_df, ignore_row_order=True, ignore_nullable=True)


def detail_of(fr, kind, subject, ns="ns-a"):
    rows = findings_of(fr, kind).where((F.col("subject") == subject) & (F.col("ns") == ns)).collect()
    assert len(rows) == 1, rows
    return json.loads(rows[0]["detail"])


# ---------------------------------------------------------------------------- per QueueData


def test_queue_flags_follow_the_client_rules(spark):
    rows = [
        snap(0, "plain"),
        snap(0, "rw-mismatch", read=4, write=8),
        snap(0, "write-only", perm=2, read=4, write=8),  # not readable: no unread queues
        snap(0, "zero-write", write=0),  # edge: write perm, no queue
        snap(0, "wiped", perm=4),
        snap(0, "inherit", perm=7, read=2, write=4),
        snap(0, "slave-only", addrs={1: SA}),  # master gone: producers skip it, consumers do not
        snap(0, "no-broker-data", addrs=None),  # null row: cluster and broker_addrs null
    ]
    actual_df = D.with_queue_flags(snapshots(spark, rows)).select(
        "topic", "writable", "readable", "has_master", "publish_queues", "subscribe_queues", "unread_write_queues"
    )
    schema = T.StructType(
        [T.StructField("topic", T.StringType())]
        + [T.StructField(c, T.BooleanType()) for c in ("writable", "readable", "has_master")]
        + [T.StructField(c, T.LongType()) for c in ("publish_queues", "subscribe_queues", "unread_write_queues")]
    )
    expected_df = frame(
        spark,
        [
            ("plain", True, True, True, 8, 8, 0),
            ("rw-mismatch", True, True, True, 8, 4, 4),
            ("write-only", True, False, True, 8, 0, 0),
            ("zero-write", True, True, True, 0, 8, 0),
            ("wiped", False, True, True, 0, 8, 0),
            ("inherit", True, True, True, 4, 2, 2),
            ("slave-only", True, True, False, 0, 8, 0),
            ("no-broker-data", True, True, False, 0, 8, 0),
        ],
        schema,
    )
    assert_df_equality(actual_df, expected_df, ignore_row_order=True, ignore_nullable=True)


def test_topic_distribution_counts_per_topic(spark):
    rows = [
        snap(0, "t1", "broker-a", read=4, write=8),
        snap(0, "t1", "broker-b", perm=4, addrs=GROUP_B, cluster="C2"),
        snap(0, "t2", "broker-x", addrs=None),  # null row
        snap(1, "t1", "broker-a", write=0),  # edge: write perm with 0 write queues
    ]
    fr = frames(spark, rows)
    # a row per topic and instant: made and read by a task per shuffle partition, not one
    assert fr.topic_stats_df.rdd.getNumPartitions() == int(spark.conf.get("spark.sql.shuffle.partitions"))
    actual_df = D.agg_topic_distribution(fr.topic_stats_df, DAY)
    expected_df = frame(
        spark,
        [
            (DAY, at(0), "ns-a", "t1", 2, 2, 1, 2, 1, 12, 16, 8, 12, 4),
            (DAY, at(0), "ns-a", "t2", 1, 0, 1, 1, 0, 8, 8, 0, 8, 0),
            (DAY, at(1), "ns-a", "t1", 1, 1, 1, 1, 0, 8, 0, 0, 8, 0),
        ],
        TOPIC_DISTRIBUTION_SCHEMA,
    )
    assert_df_equality(actual_df, expected_df, ignore_row_order=True, ignore_nullable=True)


# ---------------------------------------------------------------------------- per broker group


def test_queue_distribution_has_every_group_and_its_cluster_imbalance(spark):
    rows = [
        snap(0, "t1", "broker-a", write=12, read=12),
        snap(0, "t2", "broker-a", write=12, read=4),
        snap(0, "t1", "broker-b", addrs=GROUP_B),
        snap(0, "t3", "broker-x", addrs=None),  # null row: no BrokerData, no cluster
    ]
    addr_rows = [
        addr_row("broker-a", 0, MA),
        addr_row("broker-a", 1, SA),
        addr_row("broker-b", 0, MB),
        addr_row("broker-b", 1, SB),
        addr_row("broker-c", 1, "10.0.2.2:10911", end=1),  # edge: topic-less, slave-only group
    ]
    fr = frames(spark, rows, addr_rows=addr_rows)
    actual_df = D.agg_queue_distribution(fr.group_rows_df).where(F.col("snapshot_ts") == at(0))
    # cluster C1 at 00:00: write queues a 24, b 8, c 0 -> mean 32/3, cv = sqrt(1088/9) / (32/3)
    mean = 32 / 3
    cv = math.sqrt(((24 - mean) ** 2 + (8 - mean) ** 2 + mean**2) / 3) / mean
    c1 = (3, 32, mean, cv, 24 / mean)
    expected_df = frame(
        spark,
        [
            (DAY, at(0), "ns-a", "C1", "broker-a", 2, True, 2, 2, 2, 16, 24, 24, 16, 8, *c1, 0.75),
            (DAY, at(0), "ns-a", "C1", "broker-b", 2, True, 1, 1, 1, 8, 8, 8, 8, 0, *c1, 0.25),
            (DAY, at(0), "ns-a", "C1", "broker-c", 1, False, 0, 0, 0, 0, 0, 0, 0, 0, *c1, 0.0),
            (DAY, at(0), "ns-a", None, "broker-x", 0, False, 1, 1, 1, 8, 8, 0, 8, 0, *[None] * 6),
        ],
        QUEUE_DISTRIBUTION_SCHEMA,
    )
    assert_df_equality(actual_df, expected_df, ignore_row_order=True, ignore_nullable=True)


# ---------------------------------------------------------------------------- runs of instants


def test_runs_merge_consecutive_instants_only(spark):
    last_grid = DAY_MS // STEP - 1
    rows = [(ns, "s", at(k)) for ns, ks in (("ns-a", (1, 2, 3, 5, last_grid, END)), ("ns-b", (2,))) for k in ks]
    condition_df = frame(spark, rows, "ns string, subject string, snapshot_ts timestamp").withColumn(
        "detail", F.struct(F.col("snapshot_ts").alias("seen"))
    )
    actual_df = D.agg_runs(condition_df, DAY, STEP).select(
        "ns", "subject", "start_ts", "end_ts", "snapshots", F.col("detail.seen").alias("last_seen")
    )
    expected_df = frame(
        spark,
        [
            ("ns-a", "s", at(1), at(3), 3, at(3)),
            ("ns-a", "s", at(5), at(5), 1, at(5)),
            ("ns-a", "s", at(last_grid), at(END), 2, at(END)),  # the end of the day follows 23:55
            ("ns-b", "s", at(2), at(2), 1, at(2)),
        ],
        "ns string, subject string, start_ts timestamp, end_ts timestamp, snapshots long, last_seen timestamp",
    )
    assert_df_equality(actual_df, expected_df, ignore_row_order=True, ignore_nullable=True)


def test_kind_runs_keep_kinds_apart_each_with_its_own_detail_type(spark):
    # two kinds on the same (ns, subject) and instants: the runs of one never merge with the
    # other's, and each kind gets its own detail back with its own type (a null detail included)
    a_df = frame(
        spark,
        [("ns-a", "s", at(1)), ("ns-a", "s", at(2)), ("ns-a", "s", at(4))],
        "ns string, subject string, snapshot_ts timestamp",
    ).withColumn("detail", F.struct(F.col("snapshot_ts").alias("seen")))
    b_df = frame(
        spark,
        [("ns-a", "s", at(3), None), ("ns-a", "s", at(2), 7)],
        "ns string, subject string, snapshot_ts timestamp, n long",
    ).withColumn("detail", F.struct("n", F.array("n").alias("ns_list")))
    runs_df = D.agg_kind_runs({"a": a_df, "b": b_df}, DAY, STEP)
    a_runs = D.select_kind_runs(runs_df, "a")
    b_runs = D.select_kind_runs(runs_df, "b")
    assert a_runs.schema["detail"].dataType == a_df.schema["detail"].dataType
    assert b_runs.schema["detail"].dataType == b_df.schema["detail"].dataType

    def ms(c):
        return F.unix_millis(c) - T0

    a_got = a_runs.select(ms("start_ts"), ms("end_ts"), "snapshots", ms("detail.seen")).collect()
    assert sorted(tuple(r) for r in a_got) == [(STEP, 2 * STEP, 2, 2 * STEP), (4 * STEP, 4 * STEP, 1, 4 * STEP)]
    # the detail is the run's last instant's: there n is null
    b_got = b_runs.select(ms("start_ts"), ms("end_ts"), "snapshots", "detail.n", "detail.ns_list").collect()
    assert [tuple(r) for r in b_got] == [(2 * STEP, 3 * STEP, 2, None, [None])]


# ---------------------------------------------------------------------------- topic findings


def test_no_writable_queue(spark):
    rows = [
        snap(0, "ok"),
        snap(1, "ok"),
        snap(0, "wiped", perm=4),
        snap(1, "wiped", perm=4),
        snap(0, "zero-write", write=0),  # edge: write perm but 0 queues
        snap(0, "masterless", addrs={1: SA}),  # edge: the group's only master was removed
        snap(1, "masterless"),  # ...and is back
        snap(0, "no-broker-data", addrs=None),  # null row: producers skip it too
        snap(0, "one-good", "broker-a", perm=4),
        snap(0, "one-good", "broker-b", addrs=GROUP_B),
        # edge: neither read nor write perm anywhere, out of service by its configuration (RocketMQ
        # 5 brokers register rmq_sys_SYNC_BROKER_MEMBER_<broker> with perm 1)
        snap(0, "out-of-service", perm=1),
        snap(1, "out-of-service", perm=1),
    ]
    fr = frames(spark, rows)
    assert_findings(
        spark,
        fr,
        "no_writable_queue",
        [
            ("wiped", "ns-a", 0, 1),
            ("zero-write", "ns-a", 0, 0),
            ("masterless", "ns-a", 0, 0),
            ("no-broker-data", "ns-a", 0, 0),
        ],
    )
    assert detail_of(fr, "no_writable_queue", "masterless") == {
        "duration_ms": STEP,
        "still_open": False,
        "brokers": 1,
        "brokers_with_master": 0,
        "writable_brokers": 1,
        "write_queues": 8,
        "queue_datas": [
            {
                "broker_name": "broker-a",
                "cluster": "C1",
                "perm": 6,
                "read_queue_nums": 8,
                "write_queue_nums": 8,
                "has_master": False,
            }
        ],
    }


def test_read_write_mismatch(spark):
    rows = [
        snap(0, "mismatch", read=4, write=8),
        snap(1, "mismatch", read=8, write=8),
        snap(2, "mismatch", read=4, write=8),
        snap(0, "equal"),
        snap(0, "write-only", perm=2, read=4, write=8),  # edge: nobody may read it anyway
        snap(0, "read-only", perm=4, read=4, write=8),  # nothing is written
        snap(0, "no-broker-data", addrs=None, read=0, write=1),  # null row, edge read 0
    ]
    fr = frames(spark, rows)
    assert_findings(
        spark,
        fr,
        "read_write_mismatch",
        [("mismatch", "ns-a", 0, 0), ("mismatch", "ns-a", 2, 2), ("no-broker-data", "ns-a", 0, 0)],
    )
    assert detail_of(fr, "read_write_mismatch", "no-broker-data") == {
        "duration_ms": STEP,
        "still_open": False,
        "unread_write_queues": 1,
        "queue_datas": [{"broker_name": "broker-a", "read_queue_nums": 0, "write_queue_nums": 1}],
    }


def test_single_broker_topic(spark):
    rows = [
        snap(0, "single"),
        snap(1, "single"),
        snap(0, "pair", "broker-a"),
        snap(0, "pair", "broker-b", addrs=GROUP_B),
        snap(1, "pair", "broker-a"),  # edge: broker-b's QueueData is gone at instant 1
        snap(0, "orphan", "broker-x", addrs=None),  # null row
    ]
    fr = frames(spark, rows)
    assert_findings(
        spark, fr, "single_broker_topic", [("single", "ns-a", 0, 1), ("pair", "ns-a", 1, 1), ("orphan", "ns-a", 0, 0)]
    )
    assert [q["broker_name"] for q in detail_of(fr, "single_broker_topic", "single")["queue_datas"]] == ["broker-a"]
    assert [q["broker_name"] for q in detail_of(fr, "single_broker_topic", "pair")["queue_datas"]] == ["broker-a"]


# ---------------------------------------------------------------------------- write_perm_wiped


def test_write_perm_wiped_against_another_server_and_earlier(spark):
    rows = [
        # wiped on ns-a at instants 2-3 while ns-b stays writable; 7 -> 5 keeps read and inherit
        *[snap(k, "t1", ns="ns-a", perm=5 if k in (2, 3) else 7) for k in range(5)],
        *[snap(k, "t1", ns="ns-b", perm=7) for k in range(5)],
        *[snap(k, "t2", ns="ns-a", perm=4 if k in (2, 3) else 6) for k in range(5)],
        # read-only everywhere, all day: a choice, not a wipe
        *[snap(k, "ro", "broker-b", ns=ns, perm=4, addrs=GROUP_B) for k in range(5) for ns in ("ns-a", "ns-b")],
        # only server, write bit lost at 3: "earlier on the same server"
        *[snap(k, "t3", "broker-c", ns="ns-c", perm=6 if k < 3 else 4) for k in range(5)],
        # edge: never writable today, but writable at the end of yesterday
        snap(0, "t4", "broker-d", ns="ns-c", perm=0),
        # null row: no BrokerData, lost write at 1
        snap(0, "t5", "broker-x", ns="ns-c", addrs=None),
        snap(1, "t5", "broker-x", ns="ns-c", perm=4, addrs=None),
    ]
    previous = [snap(END, "t4", "broker-d", ns="ns-c", perm=2, day=DAY - dt.timedelta(days=1))]
    fr = frames(spark, rows, previous=previous)
    assert_findings(
        spark,
        fr,
        "write_perm_wiped",
        [
            ("broker-a", "ns-a", 2, 3),
            ("broker-c", "ns-c", 3, 4),
            ("broker-d", "ns-c", 0, 0),
            ("broker-x", "ns-c", 1, 1),
        ],
    )
    detail = detail_of(fr, "write_perm_wiped", "broker-a")
    assert detail == {
        "duration_ms": 2 * STEP,
        "still_open": False,
        "cluster": "C1",
        "topics": 2,
        "writable_on_other_servers": 1,
        "writable_earlier": 2,
        "writable_on": ["ns-b"],
        "topics_listed": ["t1", "t2"],
    }
    assert detail_of(fr, "write_perm_wiped", "broker-c", "ns-c")["writable_on"] == []


# ---------------------------------------------------------------------------- queue_skew


def skew_rows(k, loads, cluster="C1", ns="ns-a"):
    return [
        snap(k, f"t-{name}", name, ns=ns, read=n, write=n, cluster=cluster, addrs={0: f"{name}:1"})
        for name, n in loads.items()
    ]


def test_queue_skew_thresholds(spark):
    rows = [
        *skew_rows(0, {"a": 1, "b": 3}),  # edge: cv exactly 0.5, max/mean 1.5: within
        *skew_rows(1, {"a": 1, "b": 4}),  # cv 0.6
        *skew_rows(2, {"a": 10, "b": 1, "c": 1, "d": 1, "e": 1}),  # max/mean 3.57 (cv 1.43)
        *skew_rows(0, {"solo": 100}, cluster="C2"),  # one group: nothing to balance
        snap(0, "t-x", "x", addrs=None, write=100),  # null row: no cluster
    ]
    fr = frames(spark, rows)
    assert_findings(spark, fr, "queue_skew", [("C1", "ns-a", 1, 2)])
    detail = detail_of(fr, "queue_skew", "C1")
    assert detail["write_queues_by_broker"] == {"a": 10, "b": 1, "c": 1, "d": 1, "e": 1}
    assert detail["groups"] == 5 and detail["within_threshold_after"] is True
    after = _apply(detail["write_queues_by_broker"], detail["suggested_moves"])
    cv, ratio = _cv_and_ratio(after)
    assert cv <= 0.5 and ratio <= 2.0 and sum(after.values()) == 14
    assert (detail["cv_after"], detail["max_over_mean_after"]) == pytest.approx((cv, ratio))


def _apply(loads, moves):
    loads = dict(loads)
    for move in moves:
        loads[move["from_broker_name"]] -= move["write_queues"]
        loads[move["to_broker_name"]] += move["write_queues"]
    return loads


def _cv_and_ratio(loads):
    values = list(loads.values())
    mean = sum(values) / len(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values)) / mean, max(values) / mean


@pytest.mark.parametrize(
    "loads, max_cv, max_ratio",
    [
        ({"a": 240, "b": 8, "c": 8, "d": 8, "e": 16, "f": 0}, 0.5, 2.0),
        ({f"g{i:03d}": round(1000 / (i + 1) ** 0.8) for i in range(240)}, 0.5, 2.0),  # the simulator's Zipf
        ({"a": 9, "b": 1, "c": 2}, 0.1, 1.1),
        ({"a": 64, "b": 0}, 0.0, 1.0),  # perfectly even is reachable
    ],
)
def test_suggested_moves_bring_the_cluster_within_the_thresholds(loads, max_cv, max_ratio):
    plan = D.suggest_moves(loads, max_cv, max_ratio)
    after = _apply(loads, plan["suggested_moves"])
    cv, ratio = _cv_and_ratio(after)
    assert plan["within_threshold_after"] and cv <= max_cv + 1e-12 and ratio <= max_ratio + 1e-12
    assert sum(after.values()) == sum(loads.values()) and min(after.values()) >= 0
    assert plan["cv_after"] == pytest.approx(cv) and plan["max_over_mean_after"] == pytest.approx(ratio)
    assert all(m["write_queues"] > 0 and m["from_broker_name"] != m["to_broker_name"] for m in plan["suggested_moves"])


def test_suggested_moves_when_integer_queues_cannot_get_there():
    plan = D.suggest_moves({"a": 3, "b": 0, "c": 0, "d": 0}, 0.1, 1.1)  # best: 1,1,1,0
    assert _apply({"a": 3, "b": 0, "c": 0, "d": 0}, plan["suggested_moves"]) == {"a": 1, "b": 1, "c": 1, "d": 0}
    assert plan["within_threshold_after"] is False
    assert D.suggest_moves({}, 0.5, 2.0) == {
        "suggested_moves": [],
        "cv_after": None,
        "max_over_mean_after": None,
        "within_threshold_after": True,
    }
    assert D.suggest_moves({"a": 0, "b": 0}, 0.5, 2.0)["suggested_moves"] == []


# ---------------------------------------------------------------------------- structural checks


def test_no_master_and_queue_data_without_broker(spark):
    rows = [
        snap(0, "t1", "broker-a"),
        snap(1, "t1", "broker-a", addrs={1: SA}),
        snap(2, "t1", "broker-a", addrs={1: SA}),
        snap(0, "t2", "broker-x", addrs=None),  # null row: QueueData without BrokerData
    ]
    addr_rows = [
        # edge: the group's only master is removed at instant 1; its slave stays
        addr_row("broker-a", 0, MA, end=1),
        addr_row("broker-a", 1, SA, end=3),
        # topic-less slave-only group, from the history alone
        addr_row("broker-e", 1, "10.0.9.2:10911", start=2, end=3),
    ]
    fr = frames(spark, rows, addr_rows=addr_rows)
    assert_findings(spark, fr, "no_master", [("broker-a", "ns-a", 1, 2), ("broker-e", "ns-a", 2, 2)])
    # exact, from the history: from the master's removal at 00:05 to the slave's at 00:15
    assert detail_of(fr, "no_master", "broker-a") == {
        "duration_ms": 2 * STEP,
        "still_open": False,
        "cluster": "C1",
        "addrs": {"1": SA},
    }
    assert_findings(spark, fr, "queue_data_without_broker", [("broker-x", "ns-a", 0, 0)])


def test_broker_in_two_clusters_and_addr_in_two_groups(spark):
    cluster_rows = [
        cluster_row("C1", "broker-a"),
        cluster_row("C2", "broker-a", start=1, end=3),  # moved, old name stays
        cluster_row("C1", "broker-b"),
        cluster_row("C3", "broker-gone", start=0),
        cluster_row("C4", "broker-gone", start=0, end=1),  # dangling
    ]
    addr_rows = [
        addr_row("broker-a", 0, MA),
        addr_row("broker-b", 0, MB),
        addr_row("broker-b", 1, MA, start=2, end=3, cluster="C1"),  # W22: MA also under broker-b
    ]
    fr = frames(spark, [snap(0, "t1")], addr_rows=addr_rows, cluster_rows=cluster_rows)
    assert_findings(spark, fr, "broker_in_two_clusters", [("broker-a", "ns-a", 1, 2), ("broker-gone", "ns-a", 0, 0)])
    assert detail_of(fr, "broker_in_two_clusters", "broker-gone") == {
        "snapshots": 1,
        "clusters": ["C3", "C4"],
        "broker_data_cluster": None,
    }
    assert_findings(spark, fr, "addr_in_two_groups", [(MA, "ns-a", 2, 2)])
    assert detail_of(fr, "addr_in_two_groups", MA)["broker_names"] == ["broker-a", "broker-b"]


def test_a_healthy_fleet_has_no_findings_but_info(spark):
    rows = [
        snap(k, t, b, ns=ns, addrs={0: f"{b}:1"})
        for k in range(3)
        for ns in ("ns-a", "ns-b")
        for t in ("t1", "t2")
        for b in ("broker-a", "broker-b")
    ]
    assert frames(spark, rows).findings_df.count() == 0


# ---------------------------------------------------------------------------- the stage


def _write_day(lake_dir, spark, queue_rows, addr_rows=(), cluster_rows=()):
    where = {"date": DAY}
    for name, rows, schema in (
        (lake.TOPIC_ROUTE_HISTORY, queue_rows, TOPIC_ROUTE_HISTORY_SCHEMA),
        (lake.BROKER_ADDR_HISTORY, addr_rows, BROKER_ADDR_HISTORY_SCHEMA),
        (lake.CLUSTER_HISTORY, cluster_rows, CLUSTER_HISTORY_SCHEMA),
    ):
        write_table(
            frame(spark, list(rows), schema),
            lake.table_path(lake_dir, name),
            mode="overwrite",
            partition_by=["date"],
            replace_where=where,
            schema=schema,
        )


def test_run_distribution_writes_the_day_and_replaces_it(spark, tmp_path):
    from schemas.findings import FINDINGS_SCHEMA

    # history valid all day: the stage makes the instants from it as route_snapshots does
    queue_rows = [
        ("ns-a", "t1", "broker-a", 4, 8, 6, 0, at(0), None, 1, None, DAY),
        ("ns-a", "t1", "broker-b", 8, 8, 6, 0, at(0), None, 1, None, DAY),
    ]
    addr_rows = [addr_row("broker-a", 0, MA), addr_row("broker-b", 0, MB)]
    cluster_rows = [cluster_row("C1", "broker-a"), cluster_row("C1", "broker-b")]
    _write_day(tmp_path, spark, queue_rows, addr_rows, cluster_rows)
    # the report's end-of-day frame reads route_snapshots
    snapshot_df = agg_route_snapshots(
        frame(spark, queue_rows, TOPIC_ROUTE_HISTORY_SCHEMA),
        frame(spark, addr_rows, BROKER_ADDR_HISTORY_SCHEMA),
        DAY,
        STEP,
    )
    write_table(
        snapshot_df,
        lake.table_path(tmp_path, lake.ROUTE_SNAPSHOTS),
        mode="overwrite",
        partition_by=["date"],
        replace_where={"date": DAY},
        schema=ROUTE_SNAPSHOTS_SCHEMA,
    )
    config = Config(audit=AuditConfig(snapshot_interval_ms=STEP))
    instants = DAY_MS // STEP + 1
    for _ in range(2):  # a rerun replaces the day
        result = D.run_distribution(spark, str(tmp_path), DAY, config)
    assert result.counts() == {
        "snapshots": instants,
        "servers": 1,
        "queue_distribution_rows": 2 * instants,
        "topic_distribution_rows": instants,
        "findings": 1,
    }
    assert result.findings_by_kind == {"read_write_mismatch": 1} and result.notes == []
    assert D.end_of_day_distribution(spark, str(tmp_path), DAY).to_dict("records") == [
        {"cluster": "C1", "broker_name": "broker-a", "topic": "t1", "write_queue_nums": 8},
        {"cluster": "C1", "broker_name": "broker-b", "topic": "t1", "write_queue_nums": 8},
    ]
    where = {"date": DAY}
    queue_path, topic_path = (
        lake.table_path(tmp_path, name) for name in (lake.QUEUE_DISTRIBUTION, lake.TOPIC_DISTRIBUTION)
    )
    queue_df = read_table(spark, queue_path, QUEUE_DISTRIBUTION_SCHEMA, where=where)
    assert queue_df.count() == 2 * instants
    end_df = queue_df.where(F.col("snapshot_ts") == at(END))
    assert end_df.select("broker_name", "write_queues", "cluster_write_queues_cv").orderBy("broker_name").collect() == [
        ("broker-a", 8, 0.0),
        ("broker-b", 8, 0.0),
    ]
    topic_df = read_table(spark, topic_path, TOPIC_DISTRIBUTION_SCHEMA, where=where)
    assert topic_df.count() == instants
    found = read_table(spark, lake.table_path(tmp_path, lake.FINDINGS), FINDINGS_SCHEMA, where=where).collect()
    # collected timestamps are naive local time: compare instants
    # exact: from the row's first millisecond to the next midnight, as it still holds at the end
    assert [
        (r["category"], r["kind"], r["severity"], r["subject"], r["start_ts"].timestamp(), r["end_ts"].timestamp())
        for r in found
    ] == [("distribution", "read_write_mismatch", "warning", "t1", at(0).timestamp(), (T0 + DAY_MS) / 1000)]
    detail = json.loads(found[0]["detail"])
    assert (detail["duration_ms"], detail["still_open"], detail["unread_write_queues"]) == (DAY_MS, True, 4)


def test_a_master_gap_shorter_than_the_snapshot_interval_is_found_with_its_exact_start_and_end(spark, tmp_path):
    """broker-a's master is gone for 53 s between the 10:00 and 10:05 snapshots (and once across
    the 11:00 snapshot); topic t1 lives on broker-a only, so producers asking ns-a get no queue
    for exactly those spans. ns-b never loses the master: no finding there."""
    ten = 10 * 3_600_000
    gone, back = ten + 7_123, ten + 60_456  # 53,333 ms, no snapshot instant inside
    gone2, back2 = 11 * 3_600_000 - 1_000, 11 * 3_600_000 + 2_500  # across 11:00:00.000
    queue_rows = [(ns, "t1", "broker-a", 8, 8, 6, 0, at(0), None, 1, None, DAY) for ns in ("ns-a", "ns-b")]
    queue_rows.append(("ns-a", "t2", "broker-x", 8, 8, 6, 0, at(0), None, 1, None, DAY))  # null BrokerData all day
    addr_rows = [
        ("ns-a", "C1", "broker-a", 0, MA, at(0), at_ms(gone), 1, None, DAY),
        ("ns-a", "C1", "broker-a", 0, MA, at_ms(back), at_ms(gone2), 2, None, DAY),
        ("ns-a", "C1", "broker-a", 0, MA, at_ms(back2), None, 3, None, DAY),
        addr_row("broker-a", 1, SA),
        addr_row("broker-a", 0, MA, ns="ns-b"),
    ]
    _write_day(tmp_path, spark, queue_rows, addr_rows, [cluster_row("C1", "broker-a")])
    D.run_distribution(spark, str(tmp_path), DAY, Config(audit=AuditConfig(snapshot_interval_ms=STEP)))
    from schemas.findings import FINDINGS_SCHEMA

    found = (
        read_table(spark, lake.table_path(tmp_path, lake.FINDINGS), FINDINGS_SCHEMA, where={"date": DAY})
        .where(F.col("kind") == "no_writable_queue")
        .select(
            "subject",
            "ns",
            (F.unix_millis("start_ts") - T0).alias("start"),
            (F.unix_millis("end_ts") - T0).alias("end"),
            "detail",
        )
        .collect()
    )
    assert sorted((r["subject"], r["ns"], r["start"], r["end"]) for r in found) == [
        ("t1", "ns-a", gone, back),
        ("t1", "ns-a", gone2, back2),
        ("t2", "ns-a", 0, DAY_MS),
    ]
    details = {r["start"]: json.loads(r["detail"]) for r in found}
    assert details[gone]["duration_ms"] == 53_333 and details[gone]["still_open"] is False
    assert details[gone]["queue_datas"] == [
        {
            "broker_name": "broker-a",
            "cluster": "C1",
            "perm": 6,
            "read_queue_nums": 8,
            "write_queue_nums": 8,
            "has_master": False,
        }
    ]
    assert details[0]["still_open"] is True and details[0]["queue_datas"][0]["cluster"] is None
    masterless = (
        read_table(spark, lake.table_path(tmp_path, lake.FINDINGS), FINDINGS_SCHEMA, where={"date": DAY})
        .where(F.col("kind") == "no_master")
        .select(
            "subject",
            "ns",
            (F.unix_millis("start_ts") - T0).alias("start"),
            (F.unix_millis("end_ts") - T0).alias("end"),
        )
    )
    assert sorted(tuple(r) for r in masterless.collect()) == [
        ("broker-a", "ns-a", gone, back),
        ("broker-a", "ns-a", gone2, back2),
    ]


def test_exact_runs_merge_touching_segments_only(spark):
    rows = [
        ("s", 0, 999, 1),
        ("s", 1000, 1999, None),
        ("s", 5000, 5999, 3),  # null detail kept
        ("t", DAY_MS - 1, DAY_MS - 1, 4),
    ]  # edge: the day's last millisecond only
    segments_df = frame(spark, rows, "subject string, first_pos long, last_pos long, n long").withColumn(
        "detail", F.struct("n")
    )
    got = (
        D.agg_exact_runs(segments_df, ["subject"], DAY)
        .select(
            "subject",
            F.unix_millis("start_ts") - T0,
            F.unix_millis("end_ts") - T0,
            "duration_ms",
            "still_open",
            "detail.n",
        )
        .collect()
    )
    assert sorted(tuple(r) for r in got) == [
        ("s", 0, 2000, 2000, False, None),
        ("s", 5000, 6000, 1000, False, 3),
        ("t", DAY_MS - 1, DAY_MS, 1, True, 4),
    ]


# ---------------------------------------------------------------------------- a simulated day


@pytest.fixture(scope="module")
def faulted_day(spark, tmp_path_factory):
    """Three simulated hours of two servers, twelve brokers and sixty topics with every fault
    (a wipe and the layout faults among them), ingested, rebuilt and through the distribution
    stage (which makes the snapshot instants' routes from the history itself; ``route_snapshots``
    it reads for the day before only): the simulation's options and the stage's findings."""
    from jobs.ingest.stage import run_ingest
    from jobs.rebuild.stage import run_rebuild
    from nameserver.sim.run import FAULTS, SimOptions, simulate
    from schemas.findings import FINDINGS_SCHEMA

    root = tmp_path_factory.mktemp("distribution-day")
    options = SimOptions(
        events_dir=root / "events",
        ns=2,
        brokers=12,
        slaves=1,
        topics=60,
        start_ms=T0,
        hours=3,
        seed=3,
        faults=FAULTS,
        fault_rate=2.0,
        quiet=True,
    )
    simulate(options)
    lake_dir = str(root / "lake")
    config = Config(audit=AuditConfig(snapshot_interval_ms=STEP))
    run_ingest(spark, str(options.events_dir), lake_dir, DAY, config)
    run_rebuild(spark, lake_dir, DAY, config)
    D.run_distribution(spark, lake_dir, DAY, config)
    found = read_table(
        spark, lake.table_path(lake_dir, lake.FINDINGS), FINDINGS_SCHEMA, where={"date": DAY, "category": D.CATEGORY}
    ).collect()
    return options, found


def _ms(ts: dt.datetime) -> int:
    return round(ts.timestamp() * 1000)


@pytest.mark.slow
def test_a_wiped_broker_is_found_from_the_wipe_to_the_add(faulted_day):
    options, found = faulted_day
    truth = [json.loads(line) for line in (options.events_dir / "_truth" / "faults.jsonl").read_text().splitlines()]
    wipes = [t for t in truth if t["kind"] == "wipe" and t["ns"]]
    assert wipes, "the simulation injected no wipe"
    wiped = [
        (r["subject"], r["ns"], round(r["start_ts"].timestamp() * 1000), round(r["end_ts"].timestamp() * 1000))
        for r in found
        if r["kind"] == "write_perm_wiped"
    ]
    for fault in wipes:
        ns, start = fault["ns"][0], fault["start_ms"]
        end = fault["end_ms"]  # the add; null: still wiped at the end of the day
        match = [w for w in wiped if w[:2] == (fault["subject"], ns) and w[2] <= (end or T0 + DAY_MS) and w[3] >= start]
        # one finding, from the wipe (205) to the add (327) or the next midnight, however short
        assert match == [(fault["subject"], ns, start, end or T0 + DAY_MS)], (fault, wiped)
    # nothing else was wiped
    assert {w[:2] for w in wiped} <= {(f["subject"], f["ns"][0]) for f in wipes}


@pytest.mark.slow
def test_a_fault_free_day_has_no_warning_or_critical_finding(spark, fault_free_day):  # noqa: F811  (fixture)
    """The whole nightly audit (every stage) of a simulated day with ``--faults none``
    (``tests.jobs.fault_free``, shared with the divergence tests)."""
    from jobs import nightly_audit
    from schemas.findings import FINDINGS_SCHEMA

    simulation, outcome = fault_free_day.simulation, fault_free_day.outcome
    assert simulation.faults_by_kind == {} and len(simulation.layout.clusters) == 2
    assert [stage["stage"] for stage in outcome.stages] == list(nightly_audit.STAGES)
    found = read_table(
        spark,
        lake.table_path(str(fault_free_day.lake), lake.FINDINGS),
        FINDINGS_SCHEMA,
        where={"date": fault_free_day.day},
    ).collect()
    serious = [
        (
            r["category"],
            r["kind"],
            r["severity"],
            r["subject"],
            r["ns"],
            str(r["start_ts"]),
            str(r["end_ts"]),
            r["detail"],
        )
        for r in found
        if r["severity"] in ("warning", "critical")
    ]
    assert not serious, "a fault-free day has findings above info:\n" + "\n".join(map(str, serious))
    assert outcome.worst_severity() == "info", outcome.findings_by_severity
    # the audit did see the fleet: its first day names every broker group (security, info)
    assert {r["subject"] for r in found if r["kind"] == "new_broker_name"} == {
        g.broker_name for g in simulation.layout.groups
    }


@pytest.mark.slow
def test_each_layout_fault_gives_its_finding_with_its_subject(faulted_day):
    from nameserver.sim.truth import read_truth

    options, found = faulted_day
    truth = read_truth(options.events_dir)
    finding_kind = {"read_lt_write": "read_write_mismatch", "queue_skew": "queue_skew"}
    records = [r for r in truth if r["kind"] in finding_kind]
    assert {r["kind"] for r in records} == set(finding_kind), records
    for record in records:
        kind = finding_kind[record["kind"]]
        assert {r["severity"] for r in found if r["kind"] == kind} == {"warning"}
        for ns in record["ns"]:
            runs = sorted(
                (_ms(r["start_ts"]), _ms(r["end_ts"]))
                for r in found
                if (r["kind"], r["subject"], r["ns"]) == (kind, record["subject"], ns)
            )
            assert runs, (record["kind"], record["subject"], ns)
            registrations = [effect["ts"] for effect in record["expected"][ns]]
            if kind in D.EXACT_KINDS:  # exact: from the registration that brought the mismatched QueueData
                assert runs[0][0] in registrations, (record["subject"], ns, runs, registrations)
            else:  # from the first snapshot after the groups' first registrations on that server
                registered = max(registrations)
                assert runs[0][0] == T0 + -(-(registered - T0) // STEP) * STEP, (
                    record["subject"],
                    ns,
                    runs,
                    registered,
                )
    # and no read_write_mismatch the faults do not explain (a topic_change may scale writers out)
    scaled_out = {
        r["subject"] for r in truth if r["kind"] == "topic_change" and r["read_queue_nums"] < r["write_queue_nums"]
    }
    assert {r["subject"] for r in found if r["kind"] == "read_write_mismatch"} <= (
        {r["subject"] for r in records if r["kind"] == "read_lt_write"} | scaled_out
    )


# ---------------------------------------------------------------------------- pieces against instants


def _random_history(rng):
    """History rows of one random day: topics whose queue rows change, groups whose BrokerData
    comes, goes and loses its master, on two servers (times on and off the 5-minute grid). Like
    the rebuild's, the rows of one key follow each other without overlapping."""

    def spans():
        t = rng.randrange(0, DAY_MS // 2, 60_000 * rng.choice((1, 5, 7)))
        for _ in range(rng.randrange(1, 4)):
            end = t + rng.randrange(1, 8 * 3_600_000)
            if end >= DAY_MS or rng.random() < 0.2:
                yield at_ms(t), None  # open at the end of the day
                return
            yield at_ms(t), at_ms(end)
            t = end + rng.choice((0, 0, 60_000, 2 * 3_600_000))  # a change, or a gap
            if t >= DAY_MS:
                return

    queue_rows, addr_rows = [], []
    for ns in ("ns-a", "ns-b"):
        for g in range(4):
            broker = f"broker-{g}"
            cluster = "C2" if g == 3 else "C1"
            for broker_id in (0, 1):
                for start, end in spans():
                    addr_rows.append(
                        (ns, cluster, broker, broker_id, f"10.0.{g}.{broker_id}:10911", start, end, 1, None, DAY)
                    )
        for t in range(6):
            for g in rng.sample(range(5), rng.randrange(1, 4)):  # broker-4 never has BrokerData
                for start, end in spans():
                    queue_rows.append(
                        (
                            ns,
                            f"t{t}",
                            f"broker-{g}",
                            rng.choice((2, 4, 8)),
                            rng.choice((0, 4, 8)),
                            rng.choice((2, 4, 6)),
                            0,
                            start,
                            end,
                            1,
                            None,
                            DAY,
                        )
                    )
    return queue_rows, addr_rows


def at_ms(ms: int) -> dt.datetime:
    return dt.datetime.fromtimestamp((T0 + ms) / 1000, tz=dt.UTC)


def _topic_row(row: dict) -> tuple:
    """A ``topic_distribution`` row from Spark (naive UTC timestamps) or Arrow (aware), comparable."""
    ts = row["snapshot_ts"]
    return (
        row["date"],
        ts if ts.tzinfo else ts.replace(tzinfo=dt.UTC),
        *(row[c] for c in TOPIC_DISTRIBUTION_SCHEMA.names[2:]),
    )


def test_pieces_give_what_the_exploded_snapshots_give(spark):
    """The stage aggregates pieces that hold over runs of instants; the result must be what the
    instant rows of ``route_snapshots`` (one-instant pieces) give, table for table."""
    import random

    from jobs.snapshots import agg_broker_data_runs, agg_route_pieces

    rng = random.Random(7)
    histories = [_random_history(rng) for _ in range(2)]
    # two random days side by side, told apart by server names
    queue_rows = [(f"{ns}-{i}", *rest) for i, (q, _) in enumerate(histories) for ns, *rest in q]
    addr_rows = [(f"{ns}-{i}", *rest) for i, (_, a) in enumerate(histories) for ns, *rest in a]
    queue_df = frame(spark, queue_rows, TOPIC_ROUTE_HISTORY_SCHEMA)
    addr_df = frame(spark, addr_rows, BROKER_ADDR_HISTORY_SCHEMA)
    cluster_df = frame(spark, [], CLUSTER_HISTORY_SCHEMA)
    previous_df = snapshots(spark, [])
    runs_df = agg_broker_data_runs(addr_df, DAY, STEP)
    exact_df = D.agg_exact_pieces(queue_df, D.agg_exact_broker_data_runs(addr_df, DAY), DAY)
    exact_runs_df = D.agg_exact_broker_data_runs(addr_df, DAY)
    by_pieces = build(
        agg_route_pieces(queue_df, runs_df, DAY, STEP),
        previous_df,
        addr_df,
        cluster_df,
        DAY,
        PARAMS,
        exact_pieces_df=exact_df,
        exact_broker_data_runs_df=exact_runs_df,
    )
    instants_df = agg_route_snapshots(queue_df, addr_df, DAY, STEP)
    by_instants = build(
        D.pieces_from_snapshots(instants_df, DAY, STEP),
        previous_df,
        addr_df,
        cluster_df,
        DAY,
        PARAMS,
        exact_pieces_df=exact_df,
        exact_broker_data_runs_df=exact_runs_df,
    )
    for name in ("topic_stats_df", "group_rows_df"):
        assert_df_equality(
            getattr(by_pieces, name), getattr(by_instants, name), ignore_row_order=True, ignore_nullable=True
        )
    found, expected = (sorted(tuple(r) for r in fr.findings_df.collect()) for fr in (by_pieces, by_instants))
    assert found == expected
    # the table's rows as the write tasks make them from the segments, in small and large batches
    want = sorted(_topic_row(r.asDict()) for r in D.agg_topic_distribution(by_instants.topic_stats_df, DAY).collect())
    expansion = D.topic_distribution_expansion(DAY, STEP)
    assert sorted(_topic_row(r.asDict()) for r in expansion.spark(by_pieces.topic_segments_df).collect()) == want
    assert by_pieces.topic_segments_df.count() < len(want)  # segments of several instants
    for max_rows in (1, 50, 1 << 20):
        batches = [
            b
            for batch in by_pieces.topic_segments_df.toArrow().to_batches()
            for b in expand_positions_batch(batch, DAY, STEP, TOPIC_DISTRIBUTION_SCHEMA.names, max_rows)
        ]
        assert all(b.schema.names == TOPIC_DISTRIBUTION_SCHEMA.names for b in batches)
        assert sorted(_topic_row(r) for b in batches for r in b.to_pylist()) == want
    # the random days make most kinds (not the cluster-set and shared-address ones: no such history)
    assert {
        "no_writable_queue",
        "single_broker_topic",
        "write_perm_wiped",
        "no_master",
        "queue_data_without_broker",
        "read_write_mismatch",
    } <= {r[0] for r in found}, found
    # the exact no_writable_queue spans are those of a plain walk over the history's milliseconds
    exact = sorted(
        (r["subject"], r["ns"], r["start"], r["end"])
        for r in by_pieces.findings_df.where(F.col("kind") == "no_writable_queue")
        .select(
            "subject",
            "ns",
            (F.unix_millis("start_ts") - T0).alias("start"),
            (F.unix_millis("end_ts") - T0).alias("end"),
        )
        .collect()
    )
    assert exact == _no_writable_spans(queue_rows, addr_rows)


def _no_writable_spans(queue_rows, addr_rows):
    """(topic, ns, start, end) in ms of the day where a topic has a route and a producer gets no
    queue (no writable QueueData with write queues on a group whose master is registered), by
    checking every span between two changes."""

    def ms(ts, default):
        return default if ts is None else round(ts.timestamp() * 1000) - T0

    def valid(row, t):
        return ms(row[-5], 0) <= t < ms(row[-4], DAY_MS)

    spans = []
    for ns, topic in sorted({(r[0], r[1]) for r in queue_rows}):
        rows = [r for r in queue_rows if (r[0], r[1]) == (ns, topic)]
        masters = [a for a in addr_rows if a[0] == ns and a[3] == 0 and a[2] in {r[2] for r in rows}]
        cuts = sorted(
            {0, DAY_MS} | {ms(r[-5], 0) for r in rows + masters} | {ms(r[-4], DAY_MS) for r in rows + masters}
        )
        for lo, hi in itertools.pairwise(cuts):
            live = [r for r in rows if valid(r, lo)]
            publishing = [
                r for r in live if r[5] & 2 and r[4] > 0 and any(a[2] == r[2] and valid(a, lo) for a in masters)
            ]
            if live and not publishing:
                if spans and spans[-1][:2] == (topic, ns) and spans[-1][3] == lo:
                    spans[-1] = (topic, ns, spans[-1][2], hi)
                else:
                    spans.append((topic, ns, lo, hi))
    return sorted(spans)
