"""The snapshots stage: a day's ``route_snapshots`` from the rebuilt history tables."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame, SparkSession

from common.config import Config
from jobs import lake
from jobs.lake.days import replace_day
from jobs.lake.tables import read_table
from jobs.snapshots.expansion import route_snapshot_expansion
from jobs.snapshots.pieces import agg_broker_data_runs, agg_route_pieces
from schemas.routes import BROKER_ADDR_HISTORY_SCHEMA, PARTITION_BY, ROUTE_SNAPSHOTS_SCHEMA, TOPIC_ROUTE_HISTORY_SCHEMA


def agg_route_snapshots(
    topic_route_df: DataFrame, broker_addr_df: DataFrame, day: dt.date, snapshot_interval_ms: int
) -> DataFrame:
    """``route_snapshots`` rows of one day from that day's ``topic_route_history`` and
    ``broker_addr_history`` rows."""
    runs_df = agg_broker_data_runs(broker_addr_df, day, snapshot_interval_ms)
    pieces_df = agg_route_pieces(topic_route_df, runs_df, day, snapshot_interval_ms)
    return route_snapshot_expansion(day, snapshot_interval_ms).spark(pieces_df)


def run_snapshots(spark: SparkSession, lake_dir: str, day: dt.date, config: Config) -> None:
    """Recompute one day's ``route_snapshots`` from the lake's history tables (replaces the day),
    at the instants ``[audit] snapshot_interval_ms`` apart."""
    snapshot_interval_ms = config.audit.snapshot_interval_ms
    where = {"date": day}
    topic_route_df = read_table(
        spark, lake.table_path(lake_dir, lake.TOPIC_ROUTE_HISTORY), TOPIC_ROUTE_HISTORY_SCHEMA, where=where
    )
    broker_addr_df = read_table(
        spark, lake.table_path(lake_dir, lake.BROKER_ADDR_HISTORY), BROKER_ADDR_HISTORY_SCHEMA, where=where
    )
    runs_df = agg_broker_data_runs(broker_addr_df, day, snapshot_interval_ms)
    # the write tasks expand the pieces into the instant rows
    replace_day(
        agg_route_pieces(topic_route_df, runs_df, day, snapshot_interval_ms),
        lake_dir,
        lake.ROUTE_SNAPSHOTS,
        day,
        ROUTE_SNAPSHOTS_SCHEMA,
        partition_by=PARTITION_BY,
        expansion=route_snapshot_expansion(day, snapshot_interval_ms),
    )
