"""Running the walk on the executors: one ``applyInArrow`` group per server, holding its
interesting events (:mod:`jobs.rebuild.marking`) and one meta row (the previous day's state and
the day's counts), walked by :func:`jobs.rebuild.walk.walk_rows`.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.rebuild.marking import select_interesting_keys, with_topics
from jobs.rebuild.walk import walk_rows
from jobs.spark.profile import broadcast
from jobs.spark.pyworker import keep_archive_listings

if TYPE_CHECKING:  # imported in the task (the walker's closure stays plain data)
    import pyarrow as pa

# the event keys the walk applies (docs/nameserver-semantics.md §6), ``ts`` as epoch ms
WALK_EVENT_COLUMNS = (
    "ns",
    "seq",
    "ts",
    "type",
    "request_code",
    "channel",
    "remote",
    "cluster",
    "broker_name",
    "broker_id",
    "broker_addr",
    "ha_addr",
    "data_version",
    "topics_digest",
    "topics",
    "filter_servers",
    "request_version",
    "broker_expiry_ms",
    "topic",
)

WALK_OUTPUT_SCHEMA = T.StructType(
    [
        T.StructField("kind", T.StringType()),  # queue | addr | cluster | filter | run | state
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
        T.StructField("filter_servers", T.ArrayType(T.StringType(), False)),
        T.StructField("valid_from_ms", T.LongType()),
        T.StructField("valid_to_ms", T.LongType()),
        T.StructField("from_seq", T.LongType()),
        T.StructField("to_seq", T.LongType()),
        T.StructField("stop_reason", T.StringType()),
        T.StructField("up", T.BooleanType()),
        T.StructField("up_at_start", T.BooleanType()),
        T.StructField("last_seq", T.LongType()),
        T.StructField("last_ts_ms", T.LongType()),
        T.StructField("events", T.LongType()),
        T.StructField("interesting_events", T.LongType()),
        T.StructField("started_without_state", T.BooleanType()),
        T.StructField("unresolved_topics", T.LongType()),
        T.StructField("state_json", T.StringType()),
    ]
)


def agg_walk_meta(blocks_df: DataFrame, prev_state_df: DataFrame) -> DataFrame:
    """One row per server to walk: the previous day's ``state_json`` and the day's event counts.

    Servers with no event today but a state from yesterday are included: their tables carry on.
    """
    day_df = blocks_df.groupBy("ns").agg(
        F.sum("n").alias("day_events"),
        F.max("hi").alias("day_last_seq"),
        F.max_by("last_ts", "hi").alias("day_last_ts"),
        # only "is it ns_start" matters; other kinds' blocks have no single type
        F.min_by(F.coalesce("type", "kind"), "lo").alias("day_first_type"),
    )
    return (
        day_df.join(prev_state_df.select("ns", F.col("state_json").alias("prev_state_json")), "ns", "full")
        .withColumn("is_meta", F.lit(True))
        .select("ns", "is_meta", "prev_state_json", "day_events", "day_last_seq", "day_last_ts", "day_first_type")
    )


def agg_walk(
    events_df: DataFrame, blocks_df: DataFrame, prev_state_df: DataFrame, day: dt.date, keys_df: DataFrame | None = None
) -> DataFrame:
    """Walk each server's interesting events from its previous state (``WALK_OUTPUT_SCHEMA`` rows).

    Args:
        events_df: the day's events, ``ts`` in epoch ms (:func:`jobs.rebuild.marking.with_ts_ms`).
        blocks_df: :func:`jobs.rebuild.marking.agg_blocks` of ``events_df``; read several times, so the
            caller caches it.
        prev_state_df: ``ns_state`` rows of the day before (``ns``, ``state_json``).
        day: the UTC day.
        keys_df: :func:`jobs.rebuild.marking.select_interesting_keys` of the two, when the caller has it cached.
    """
    if keys_df is None:
        keys_df = select_interesting_keys(events_df, blocks_df)
    # a few thousand keys per server-day: broadcast them rather than shuffle the day
    interesting_df = (
        events_df.drop("topics")
        .join(broadcast(keys_df), ["ns", "seq"])
        .transform(lambda df: with_topics(df, events_df, first_only=True))
        .select(*WALK_EVENT_COLUMNS)
        .withColumn("is_meta", F.lit(False))
    )
    walk_input_df = interesting_df.unionByName(agg_walk_meta(blocks_df, prev_state_df), allowMissingColumns=True)
    return walk_input_df.groupBy("ns").applyInArrow(_arrow_walker(day), WALK_OUTPUT_SCHEMA)


def _arrow_walker(day: dt.date) -> Callable[[pa.Table], pa.Table]:
    """The function Spark runs per server (``applyInArrow``); plain data only in its closure."""
    schema = WALK_OUTPUT_SCHEMA

    def walk(table: pa.Table) -> pa.Table:
        keep_archive_listings()
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        return pa.Table.from_pydict(walk_rows(table.to_pylist(), day), schema=to_arrow_schema(schema))

    return walk
