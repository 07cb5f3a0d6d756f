"""``route_snapshots``: the instants a history interval covers, and the routes joined per instant."""

from __future__ import annotations

import datetime as dt

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from common.timeutil import DAY_MS, day_start_ms
from jobs.rebuild.tables import select_broker_addr_history, select_topic_route_history
from jobs.snapshots import (
    agg_broker_data_runs,
    agg_route_pieces,
    agg_route_snapshots,
    end_position,
    expand_positions_batch,
    route_snapshot_expansion,
    snapshot_instants_ms,
    with_snapshot_ts,
)
from schemas.routes import ROUTE_SNAPSHOTS_SCHEMA

DAY = dt.date(2026, 11, 21)
T0 = day_start_ms(DAY)
MIN = 60_000
END = T0 + DAY_MS - 1  # 23:59:59.999, the end-of-day snapshot
UTC = dt.UTC


def ts(ms):
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, UTC)


def test_snapshot_instants_are_the_grid_and_the_end_of_the_day():
    instants = snapshot_instants_ms(DAY, 300_000)
    assert instants[:2] == [T0, T0 + 300_000] and instants[-2:] == [T0 + DAY_MS - 300_000, END]
    assert len(instants) == 288 + 1


@pytest.mark.parametrize("interval", [1, 7, MIN, 5 * MIN, 7 * 3_600_000, DAY_MS - 1, DAY_MS, DAY_MS + 5])
def test_the_end_position_is_the_last_instant_of_the_day(interval):
    if interval >= 1000:
        assert end_position(interval) == len(snapshot_instants_ms(DAY, interval)) - 1
    # the same from the grid as a range (a list would hold up to 86 M instants): 23:59:59.999 is
    # the last grid instant, or the one after it
    grid = range(T0, T0 + DAY_MS, interval)
    assert end_position(interval) == (len(grid) - 1 if grid[-1] == END else len(grid))


def test_each_interval_explodes_into_the_instants_it_covers(spark):
    schema = T.StructType(
        [
            T.StructField("id", T.StringType()),
            T.StructField("valid_from_ts", T.TimestampType()),
            T.StructField("valid_to_ts", T.TimestampType()),
        ]
    )
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
        [
            ("inside", ts(T0 + 5 * MIN)),
            ("inside", ts(T0 + 10 * MIN)),
            ("on-grid", ts(T0 + 5 * MIN)),
            ("open", ts(T0 + DAY_MS - 5 * MIN)),
            ("open", ts(END)),
            ("midnight", ts(T0)),
            ("last-ms", ts(END)),
        ],
        T.StructType([schema["id"], T.StructField("snapshot_ts", T.TimestampType())]),
    )
    assert_df_equality(got, want, ignore_nullable=True, ignore_row_order=True)


def test_snapshot_interval_must_be_positive(spark):
    with pytest.raises(ValueError):
        with_snapshot_ts(spark.range(1), DAY, 0)


def _walk_rows(spark, rows):
    """Walk-output-shaped rows (only the columns the selects read)."""
    schema = T.StructType(
        [
            T.StructField("kind", T.StringType()),
            T.StructField("ns", T.StringType()),
            T.StructField("topic", T.StringType()),
            T.StructField("broker_name", T.StringType()),
            T.StructField("cluster", T.StringType()),
            T.StructField("broker_id", T.LongType()),
            T.StructField("broker_addr", T.StringType()),
            T.StructField("read_queue_nums", T.IntegerType()),
            T.StructField("write_queue_nums", T.IntegerType()),
            T.StructField("perm", T.IntegerType()),
            T.StructField("topic_sys_flag", T.IntegerType()),
            T.StructField("valid_from_ms", T.LongType()),
            T.StructField("valid_to_ms", T.LongType()),
            T.StructField("from_seq", T.LongType()),
            T.StructField("to_seq", T.LongType()),
        ]
    )
    return spark.createDataFrame(rows, schema)


def test_queue_rows_get_the_broker_data_of_their_group_at_each_instant(spark):
    h = 3_600_000
    walk = _walk_rows(
        spark,
        [
            ("queue", "ns-a", "TopicA", "broker-a", None, None, None, 8, 8, 6, 0, T0, T0 + 2 * h, 1, 9),
            ("queue", "ns-a", "TopicA", "broker-a", None, None, None, 8, 8, 4, 0, T0 + 2 * h, None, 9, None),
            ("queue", "ns-a", "TopicB", "broker-z", None, None, None, 4, 4, 6, 0, T0 + 2 * h, T0 + 2 * h + 1, 3, 4),
            ("addr", "ns-a", None, "broker-a", "C1", 10, "10.0.0.3:10911", None, None, None, None, T0, None, 1, None),
            ("addr", "ns-a", None, "broker-a", "C1", 0, "10.0.0.1:10911", None, None, None, None, T0, None, 1, None),
            (
                "addr",
                "ns-a",
                None,
                "broker-a",
                "C1",
                2,
                "10.0.0.2:10911",
                None,
                None,
                None,
                None,
                T0 + 2 * h,
                None,
                9,
                None,
            ),
        ],
    )
    got = agg_route_snapshots(select_topic_route_history(walk, DAY), select_broker_addr_history(walk, DAY), DAY, 2 * h)
    assert got.schema.names == ROUTE_SNAPSHOTS_SCHEMA.names
    # collect() gives naive datetimes in the session's zone (UTC, tests/conftest.py)
    rows = {(r["snapshot_ts"].replace(tzinfo=UTC), r["topic"]): r for r in got.collect()}
    assert len(rows) == 12 + 1 + 1  # TopicA at every 2 h and the end; TopicB only at 02:00
    first = rows[(ts(T0), "TopicA")]
    assert (first["cluster"], first["broker_addrs"], first["perm"]) == (
        "C1",
        {0: "10.0.0.1:10911", 10: "10.0.0.3:10911"},
        6,
    )
    later = rows[(ts(END), "TopicA")]
    assert later["broker_addrs"] == {0: "10.0.0.1:10911", 2: "10.0.0.2:10911", 10: "10.0.0.3:10911"}
    assert later["perm"] == 4 and later["date"] == DAY
    # a name without BrokerData (impossible by I4, but the join must not drop the queue row)
    dangling = rows[(ts(T0 + 2 * h), "TopicB")]
    assert dangling["cluster"] is None and dangling["broker_addrs"] is None


def test_a_null_interval_end_and_an_empty_day_give_only_what_is_valid(spark):
    empty = _walk_rows(spark, [])
    got = agg_route_snapshots(
        select_topic_route_history(empty, DAY), select_broker_addr_history(empty, DAY), DAY, 300_000
    )
    assert got.count() == 0


PIECES = T.StructType(
    [
        T.StructField("ns", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("cluster", T.StringType()),
        T.StructField("broker_name", T.StringType()),
        T.StructField("broker_addrs", T.MapType(T.LongType(), T.StringType(), False)),
        T.StructField("read_queue_nums", T.IntegerType()),
        T.StructField("write_queue_nums", T.IntegerType()),
        T.StructField("perm", T.IntegerType()),
        T.StructField("topic_sys_flag", T.IntegerType()),
        T.StructField("first_pos", T.LongType()),
        T.StructField("last_pos", T.LongType()),
    ]
)


def _canonical(row: dict) -> tuple:
    ts_value = row["snapshot_ts"]
    if ts_value.tzinfo is None:  # Spark's collect: naive, in the session's zone (UTC)
        ts_value = ts_value.replace(tzinfo=UTC)
    addrs = row["broker_addrs"]
    if isinstance(addrs, list):  # Arrow's map as a list of pairs
        addrs = dict(addrs)
    return (
        ts_value,
        *(row[c] for c in ROUTE_SNAPSHOTS_SCHEMA.names if c not in ("snapshot_ts", "broker_addrs")),
        tuple(sorted(addrs.items())) if addrs is not None else None,
    )


@pytest.mark.parametrize("max_rows", [1, 3, 1 << 20])
def test_the_write_tasks_expand_pieces_into_the_rows_spark_explodes(spark, max_rows):
    interval = 2 * 3_600_000  # positions 0..11 are the grid, 12 is 23:59:59.999
    pieces = [
        ("ns-a", "TopicA", "C1", "broker-a", {0: "10.0.0.1:10911", 1: "10.0.0.2:10911"}, 8, 8, 6, 0, 0, 12),
        ("ns-a", "TopicA", "C1", "broker-b", {0: "10.0.0.3:10911"}, 4, 4, 6, 0, 3, 3),  # one instant
        ("ns-b", "TopicB", None, "broker-z", None, 4, 4, 2, 1, 11, 12),  # no BrokerData, to the end
        ("ns-b", "TopicC", "C2", "broker-c", {}, 1, 0, 4, 0, 12, 12),  # only the end of the day
    ]
    pieces_df = spark.createDataFrame(pieces, PIECES)
    want = {_canonical(r.asDict()) for r in route_snapshot_expansion(DAY, interval).spark(pieces_df).collect()}
    assert len(want) == 13 + 1 + 2 + 1

    batches = [
        out
        for batch in pieces_df.toArrow().to_batches()
        for out in expand_positions_batch(batch, DAY, interval, ROUTE_SNAPSHOTS_SCHEMA.names, max_rows)
    ]

    got = [_canonical(r) for b in batches for r in b.to_pylist()]
    assert len(got) == len(want) and set(got) == want
    assert all(b.schema.names == ROUTE_SNAPSHOTS_SCHEMA.names for b in batches)
    # a batch holds at most max_rows rows, or the rows of one piece
    assert all(b.num_rows <= max(max_rows, 13) for b in batches)
    assert (max_rows == 1) == (len(batches) == len(pieces))


def test_an_empty_batch_of_pieces_expands_to_nothing():
    assert (
        list(
            expand_positions_batch(
                pa.RecordBatch.from_pylist([], schema=to_arrow_schema(PIECES)), DAY, MIN, ROUTE_SNAPSHOTS_SCHEMA.names
            )
        )
        == []
    )


def test_pieces_and_their_expansion_give_the_snapshots_of_the_walk(spark):
    h = 3_600_000
    walk = _walk_rows(
        spark,
        [
            ("queue", "ns-a", "TopicA", "broker-a", None, None, None, 8, 8, 6, 0, T0, T0 + 5 * h, 1, 9),
            ("queue", "ns-a", "TopicA", "broker-a", None, None, None, 8, 8, 4, 0, T0 + 5 * h, None, 9, None),
            (
                "addr",
                "ns-a",
                None,
                "broker-a",
                "C1",
                0,
                "10.0.0.1:10911",
                None,
                None,
                None,
                None,
                T0,
                T0 + 7 * h,
                1,
                20,
            ),
            (
                "addr",
                "ns-a",
                None,
                "broker-a",
                "C1",
                0,
                "10.0.0.9:10911",
                None,
                None,
                None,
                None,
                T0 + 9 * h,
                None,
                30,
                None,
            ),
        ],
    )
    topic_route_df = select_topic_route_history(walk, DAY)
    pieces_df = agg_route_pieces(
        topic_route_df, agg_broker_data_runs(select_broker_addr_history(walk, DAY), DAY, h), DAY, h
    )
    got = {
        _canonical(r)
        for batch in pieces_df.toArrow().to_batches()
        for b in expand_positions_batch(batch, DAY, h, ROUTE_SNAPSHOTS_SCHEMA.names)
        for r in b.to_pylist()
    }
    want = {
        _canonical(r.asDict())
        for r in agg_route_snapshots(topic_route_df, select_broker_addr_history(walk, DAY), DAY, h).collect()
    }
    assert got == want and len(want) == 25
    # 08:00 is between the two addresses: no BrokerData then
    assert [r for r in got if r[0] == ts(T0 + 8 * h)][0][-1] is None
