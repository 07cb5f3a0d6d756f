"""The rebuilt tables' rows, cut from the walk's output (``WALK_OUTPUT_SCHEMA`` rows, one
``kind`` per table): validity intervals of each route-table cell, the server runs and the
end-of-day state.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F


def _interval() -> list[Column | str]:
    """The interval columns of every history table, from the walk's epoch-ms columns."""
    return [
        F.timestamp_millis("valid_from_ms").alias("valid_from_ts"),
        F.timestamp_millis("valid_to_ms").alias("valid_to_ts"),
        "from_seq",
        "to_seq",
    ]


def select_topic_route_history(walk_df: DataFrame, day: dt.date) -> DataFrame:
    """``topic_route_history`` rows of a walk."""
    return walk_df.where(F.col("kind") == "queue").select(
        "ns",
        "topic",
        "broker_name",
        "read_queue_nums",
        "write_queue_nums",
        "perm",
        "topic_sys_flag",
        *_interval(),
        F.lit(day).alias("date"),
    )


def select_broker_addr_history(walk_df: DataFrame, day: dt.date) -> DataFrame:
    """``broker_addr_history`` rows of a walk."""
    return walk_df.where(F.col("kind") == "addr").select(
        "ns", "cluster", "broker_name", "broker_id", "broker_addr", *_interval(), F.lit(day).alias("date")
    )


def select_cluster_history(walk_df: DataFrame, day: dt.date) -> DataFrame:
    """``cluster_history`` rows of a walk."""
    return walk_df.where(F.col("kind") == "cluster").select(
        "ns", "cluster", "broker_name", *_interval(), F.lit(day).alias("date")
    )


def select_filter_server_history(walk_df: DataFrame, day: dt.date) -> DataFrame:
    """``filter_server_history`` rows of a walk."""
    return walk_df.where(F.col("kind") == "filter").select(
        "ns", "broker_addr", "filter_servers", *_interval(), F.lit(day).alias("date")
    )


def select_ns_runs(walk_df: DataFrame, day: dt.date) -> DataFrame:
    """``ns_runs`` rows of a walk."""
    return walk_df.where(F.col("kind") == "run").select(
        "ns",
        F.timestamp_millis("valid_from_ms").alias("start_ts"),
        F.timestamp_millis("valid_to_ms").alias("stop_ts"),
        F.col("from_seq").alias("start_seq"),
        F.col("to_seq").alias("stop_seq"),
        "stop_reason",
        F.lit(None).cast("bigint").alias("resolution_ms"),
        F.lit(day).alias("date"),
    )


def select_ns_state(walk_df: DataFrame, day: dt.date) -> DataFrame:
    """``ns_state`` rows of a walk."""
    return walk_df.where(F.col("kind") == "state").select(
        F.lit(day).alias("date"),
        "ns",
        "up",
        "up_at_start",
        "last_seq",
        F.timestamp_millis("last_ts_ms").alias("last_ts"),
        "events",
        "interesting_events",
        "started_without_state",
        "unresolved_topics",
        "state_json",
        F.lit(False).alias("observed"),
        F.lit(None).cast("bigint").alias("resolution_ms"),
    )
