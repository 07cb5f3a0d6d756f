"""The report's frame of the queues at the end of the day."""

from __future__ import annotations

import datetime as dt

import pandas as pd
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from common.timeutil import DAY_MS, day_start_ms
from jobs import lake
from jobs.lake.tables import read_table, table_exists
from schemas.routes import ROUTE_SNAPSHOTS_SCHEMA


def agg_end_of_day_distribution(snapshots_df: DataFrame, day: dt.date) -> DataFrame:
    """The report's frame: ``cluster``, ``broker_name``, ``topic``, ``write_queue_nums`` at the end
    of the day, the largest any server had (servers normally agree; one row per cell)."""
    last = F.timestamp_millis(F.lit(day_start_ms(day) + DAY_MS - 1))
    return (
        snapshots_df.where(F.col("snapshot_ts") == last)
        .groupBy("cluster", "broker_name", "topic")
        .agg(F.max("write_queue_nums").alias("write_queue_nums"))
        .select("cluster", "broker_name", "topic", "write_queue_nums")
    )


def end_of_day_distribution(spark: SparkSession, lake_dir: str, day: dt.date) -> pd.DataFrame:
    """:func:`agg_end_of_day_distribution` of a day in the lake, as pandas (fleet-sized: one row
    per topic and broker group), sorted; empty without snapshots."""
    path = lake.table_path(lake_dir, lake.ROUTE_SNAPSHOTS)
    columns = ["cluster", "broker_name", "topic", "write_queue_nums"]
    if not table_exists(path):
        return pd.DataFrame(columns=columns)
    snapshots_df = read_table(spark, path, ROUTE_SNAPSHOTS_SCHEMA, where={"date": day})
    frame = agg_end_of_day_distribution(snapshots_df, day).toPandas()
    return frame.sort_values(["cluster", "broker_name", "topic"], na_position="last").reset_index(drop=True)
