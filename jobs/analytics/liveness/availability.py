"""``broker_availability``: per broker address, its live time per server and on any / all servers."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from common.timeutil import DAY_MS, day_start_ms
from schemas.liveness import BROKER_AVAILABILITY_SCHEMA


def agg_broker_availability(windows_df: DataFrame, servers_df: DataFrame, day: dt.date) -> DataFrame:
    """``broker_availability`` rows: per address, live time per server and on any / all servers.

    Windows are clipped to the day; an open one counts until 24:00. "Any" and "all" come from a
    sweep over the window boundaries of all servers: the count of servers holding the address
    live, between consecutive boundaries.

    Args:
        windows_df: :func:`jobs.analytics.liveness.windows.agg_windows` rows of the day.
        servers_df: ``ns`` of every server audited that day (one row each).
        day: the UTC day.

    Example:
        ns-a live 00:00-12:00, ns-b 06:00-24:00, two servers: any 24 h (1.0), all 6 h (0.25),
        ``availability_by_ns`` {ns-a: 0.5, ns-b: 0.75}.
    """
    start, end = day_start_ms(day), day_start_ms(day) + DAY_MS
    spans_df = windows_df.select(
        "ns",
        "broker_addr",
        "start_ts",
        "cluster",
        "broker_name",
        "broker_id",
        F.greatest(F.unix_millis("start_ts"), F.lit(start)).alias("_from"),
        F.least(F.coalesce(F.unix_millis("end_ts"), F.lit(end)), F.lit(end)).alias("_to"),
    )
    n_df = servers_df.agg(F.count(F.lit(1)).cast(T.IntegerType()).alias("servers"))
    by_ns_df = _agg_live_by_ns(spans_df, servers_df)
    cover_df = _agg_live_any_all(spans_df, n_df)
    identity_df = spans_df.groupBy("broker_addr").agg(
        F.max_by(F.struct("cluster", "broker_name", "broker_id"), "start_ts").alias("_id"),
        F.count(F.lit(1)).alias("windows"),
    )
    return (
        identity_df.join(by_ns_df, "broker_addr")
        .join(cover_df, "broker_addr")
        .crossJoin(n_df)
        .select(
            F.lit(day).alias("date"),
            "broker_addr",
            F.col("_id.cluster").alias("cluster"),
            F.col("_id.broker_name").alias("broker_name"),
            F.col("_id.broker_id").alias("broker_id"),
            "servers",
            "windows",
            "live_ms_by_ns",
            F.transform_values("live_ms_by_ns", lambda _, v: v / F.lit(float(DAY_MS))).alias("availability_by_ns"),
            "live_any_ms",
            "live_all_ms",
            (F.col("live_any_ms") / F.lit(float(DAY_MS))).alias("availability_any"),
            (F.col("live_all_ms") / F.lit(float(DAY_MS))).alias("availability_all"),
        )
        .select(*BROKER_AVAILABILITY_SCHEMA.names)
    )


def _agg_live_by_ns(spans_df: DataFrame, servers_df: DataFrame) -> DataFrame:
    """Per address, ``live_ms_by_ns``: its live ms on every audited server (0 where never live)."""
    per_ns_df = spans_df.groupBy("ns", "broker_addr").agg(F.sum(F.col("_to") - F.col("_from")).alias("live_ms"))
    grid_df = spans_df.select("broker_addr").distinct().crossJoin(servers_df.select("ns"))
    return (
        grid_df.join(per_ns_df, ["ns", "broker_addr"], "left")
        .groupBy("broker_addr")
        .agg(
            F.map_from_entries(
                F.array_sort(F.collect_list(F.struct("ns", F.coalesce("live_ms", F.lit(0)).cast(T.LongType()))))
            ).alias("live_ms_by_ns")
        )
    )


def _agg_live_any_all(spans_df: DataFrame, n_df: DataFrame) -> DataFrame:
    """Per address, ``live_any_ms`` and ``live_all_ms``: a sweep over the window boundaries counts
    the servers holding the address live between consecutive boundaries."""
    edges = F.array(
        F.struct(F.col("_from").alias("t"), F.lit(1).alias("d")),
        F.struct(F.col("_to").alias("t"), F.lit(-1).alias("d")),
    )
    sweep = Window.partitionBy("broker_addr").orderBy("t")
    return (
        spans_df.select("broker_addr", F.explode(edges).alias("e"))
        .groupBy("broker_addr", F.col("e.t").alias("t"))
        .agg(F.sum("e.d").alias("d"))
        .select(
            "broker_addr",
            F.sum("d").over(sweep.rowsBetween(Window.unboundedPreceding, Window.currentRow)).alias("live_on"),
            F.coalesce(F.lead("t").over(sweep) - F.col("t"), F.lit(0)).alias("_len"),
        )
        .crossJoin(n_df)
        .groupBy("broker_addr")
        .agg(
            F.sum(F.when(F.col("live_on") > 0, F.col("_len")).otherwise(0)).cast(T.LongType()).alias("live_any_ms"),
            F.sum(F.when(F.col("live_on") >= F.col("servers"), F.col("_len")).otherwise(0))
            .cast(T.LongType())
            .alias("live_all_ms"),
        )
    )
