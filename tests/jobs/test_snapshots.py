"""``route_snapshots``: the instants a history interval covers, and the routes joined per instant."""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality
from pyspark.sql import types as T

from jobs.rebuild import select_broker_addr_history, select_topic_route_history
from jobs.snapshots import agg_route_snapshots, snapshot_instants_ms, with_snapshot_ts
from nameserver.timeutil import DAY_MS, day_start_ms
from schemas.routes import ROUTE_SNAPSHOTS_SCHEMA

DAY = dt.date(2026, 11, 21)
T0 = day_start_ms(DAY)
MIN = 60_000
END = T0 + DAY_MS - 1  # 23:59:59.999, the end-of-day snapshot
UTC = dt.timezone.utc


def ts(ms):
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, UTC)


def test_snapshot_instants_are_the_grid_and_the_end_of_the_day():
    instants = snapshot_instants_ms(DAY, 300_000)
    assert instants[:2] == [T0, T0 + 300_000] and instants[-2:] == [T0 + DAY_MS - 300_000, END]
    assert len(instants) == 288 + 1


def test_each_interval_explodes_into_the_instants_it_covers(spark):
    schema = T.StructType([T.StructField("id", T.StringType()), T.StructField("valid_from_ts", T.TimestampType()),
                           T.StructField("valid_to_ts", T.TimestampType())])
    rows = [
        ("inside", ts(T0 + 3 * MIN), ts(T0 + 12 * MIN)),  # 00:05, 00:10
        ("on-grid", ts(T0 + 5 * MIN), ts(T0 + 10 * MIN)),  # from is inclusive, to exclusive: 00:05
        ("between", ts(T0 + 6 * MIN), ts(T0 + 9 * MIN)),  # covers no grid instant
        ("open", ts(T0 + DAY_MS - 7 * MIN), None),  # still valid at the end of the day: 23:55 and the end
        ("midnight", ts(T0), ts(T0 + 1)),  # carried in and replaced 1 ms later: 00:00
        ("last-ms", ts(END), None),  # set by an event at 23:59:59.999
    ]
    got = with_snapshot_ts(spark.createDataFrame(rows, schema), DAY, 5 * MIN).select("id", "snapshot_ts")
    want = spark.createDataFrame(
        [("inside", ts(T0 + 5 * MIN)), ("inside", ts(T0 + 10 * MIN)), ("on-grid", ts(T0 + 5 * MIN)),
         ("open", ts(T0 + DAY_MS - 5 * MIN)), ("open", ts(END)), ("midnight", ts(T0)), ("last-ms", ts(END))],
        T.StructType([schema["id"], T.StructField("snapshot_ts", T.TimestampType())]),
    )
    assert_df_equality(got, want, ignore_nullable=True, ignore_row_order=True)


def test_snapshot_interval_must_be_positive(spark):
    with pytest.raises(ValueError):
        with_snapshot_ts(spark.range(1), DAY, 0)


def _walk_rows(spark, rows):
    """Walk-output-shaped rows (only the columns the selects read)."""
    schema = T.StructType([
        T.StructField("kind", T.StringType()), T.StructField("ns", T.StringType()),
        T.StructField("topic", T.StringType()), T.StructField("broker_name", T.StringType()),
        T.StructField("cluster", T.StringType()), T.StructField("broker_id", T.LongType()),
        T.StructField("broker_addr", T.StringType()), T.StructField("read_queue_nums", T.IntegerType()),
        T.StructField("write_queue_nums", T.IntegerType()), T.StructField("perm", T.IntegerType()),
        T.StructField("topic_sys_flag", T.IntegerType()), T.StructField("valid_from_ms", T.LongType()),
        T.StructField("valid_to_ms", T.LongType()), T.StructField("from_seq", T.LongType()),
        T.StructField("to_seq", T.LongType()),
    ])
    return spark.createDataFrame(rows, schema)


def test_queue_rows_get_the_broker_data_of_their_group_at_each_instant(spark):
    h = 3_600_000
    walk = _walk_rows(spark, [
        ("queue", "ns-a", "TopicA", "broker-a", None, None, None, 8, 8, 6, 0, T0, T0 + 2 * h, 1, 9),
        ("queue", "ns-a", "TopicA", "broker-a", None, None, None, 8, 8, 4, 0, T0 + 2 * h, None, 9, None),
        ("queue", "ns-a", "TopicB", "broker-z", None, None, None, 4, 4, 6, 0, T0 + 2 * h, T0 + 2 * h + 1, 3, 4),
        ("addr", "ns-a", None, "broker-a", "C1", 10, "10.0.0.3:10911", None, None, None, None, T0, None, 1, None),
        ("addr", "ns-a", None, "broker-a", "C1", 0, "10.0.0.1:10911", None, None, None, None, T0, None, 1, None),
        ("addr", "ns-a", None, "broker-a", "C1", 2, "10.0.0.2:10911", None, None, None, None, T0 + 2 * h, None, 9,
         None),
    ])
    got = agg_route_snapshots(select_topic_route_history(walk, DAY), select_broker_addr_history(walk, DAY), DAY,
                              2 * h)
    assert got.schema.names == ROUTE_SNAPSHOTS_SCHEMA.names
    # collect() gives naive datetimes in the session's zone (UTC, tests/conftest.py)
    rows = {(r["snapshot_ts"].replace(tzinfo=UTC), r["topic"]): r for r in got.collect()}
    assert len(rows) == 12 + 1 + 1  # TopicA at every 2 h and the end; TopicB only at 02:00
    first = rows[(ts(T0), "TopicA")]
    assert (first["cluster"], first["broker_addrs"], first["perm"]) == (
        "C1", {0: "10.0.0.1:10911", 10: "10.0.0.3:10911"}, 6)
    later = rows[(ts(END), "TopicA")]
    assert later["broker_addrs"] == {0: "10.0.0.1:10911", 2: "10.0.0.2:10911", 10: "10.0.0.3:10911"}
    assert later["perm"] == 4 and later["date"] == DAY
    # a name without BrokerData (impossible by I4, but the join must not drop the queue row)
    dangling = rows[(ts(T0 + 2 * h), "TopicB")]
    assert dangling["cluster"] is None and dangling["broker_addrs"] is None


def test_a_null_interval_end_and_an_empty_day_give_only_what_is_valid(spark):
    empty = _walk_rows(spark, [])
    got = agg_route_snapshots(select_topic_route_history(empty, DAY), select_broker_addr_history(empty, DAY), DAY,
                              300_000)
    assert got.count() == 0
