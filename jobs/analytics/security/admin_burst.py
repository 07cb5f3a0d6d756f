"""``admin_burst`` (warning, subject the source host): more than ``admin_burst_changes`` admin
changes from one host to one server within ``admin_burst_window_ms``."""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from jobs.analytics.security.columns import to_ts
from jobs.analytics.security.params import SecurityParams
from jobs.lake.findings import finding_columns
from nameserver.codec import RequestCode
from schemas.events import ADMIN_TYPES

ADMIN_CODES = tuple(
    int(code)
    for code in (
        RequestCode.UNREGISTER_BROKER,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,
        RequestCode.DELETE_TOPIC_IN_NAMESRV,
        RequestCode.ADD_WRITE_PERM_OF_BROKER,
    )
)


def _agg_burst_runs(admin_df: DataFrame, params: SecurityParams) -> DataFrame:
    """One row per run of overlapping over-threshold windows of an (ns, host): its span and busiest count."""
    window_ms = params.admin_burst_window_ms
    per_host = Window.partitionBy("ns", "remote_host")
    trailing = per_host.orderBy("ts_ms").rangeBetween(-window_ms, 0)
    marked_df = (
        admin_df.withColumn("in_window", F.count(F.lit(1)).over(trailing))
        .withColumn("window_start_ms", F.min("ts_ms").over(trailing))
        .where(F.col("in_window") > params.admin_burst_changes)
    )
    ordered = per_host.orderBy("ts_ms", "seq")
    return (
        marked_df.withColumn("prev_end_ms", F.lag("ts_ms").over(ordered))
        .withColumn(
            "new_burst",
            F.when(F.col("prev_end_ms").isNull() | (F.col("window_start_ms") > F.col("prev_end_ms")), 1).otherwise(0),
        )
        .withColumn("burst", F.sum("new_burst").over(ordered.rowsBetween(Window.unboundedPreceding, 0)))
        .groupBy("ns", "remote_host", "burst")
        .agg(
            F.min("window_start_ms").alias("start_ms"),
            F.max("ts_ms").alias("end_ms"),
            F.max("in_window").alias("max_in_window"),
        )
    )


def agg_admin_bursts(events_df: DataFrame, params: SecurityParams) -> DataFrame:
    """``admin_burst`` findings: per (ns, source host), each run of overlapping windows of
    ``admin_burst_window_ms`` holding more than ``admin_burst_changes`` admin changes.

    A change at ``t`` counts the changes in ``[t - window, t]`` (ties included); runs of such
    windows that overlap make one finding from the first change of the first window to the last
    change, with the number of changes in it, the busiest window's count and the request codes.
    """
    window_ms = params.admin_burst_window_ms
    admin_df = events_df.where(
        F.col("type").isin(*ADMIN_TYPES) & F.col("request_code").isin(*ADMIN_CODES) & F.col("remote_host").isNotNull()
    ).select("ns", "remote_host", "seq", "ts_ms", "request_code")
    bursts_df = _agg_burst_runs(admin_df, params)
    b_df, a_df = bursts_df.alias("b"), admin_df.alias("a")
    inside = (
        (F.col("a.ns") == F.col("b.ns"))
        & (F.col("a.remote_host") == F.col("b.remote_host"))
        & (F.col("a.ts_ms").between(F.col("b.start_ms"), F.col("b.end_ms")))
    )
    return (
        b_df.join(a_df, inside)
        .groupBy("b.ns", "b.remote_host", "b.burst", "b.start_ms", "b.end_ms", "b.max_in_window")
        .agg(F.count(F.lit(1)).alias("changes"), F.array_sort(F.collect_set("a.request_code")).alias("request_codes"))
        .select(
            *finding_columns(
                kind="admin_burst",
                severity="warning",
                subject=F.col("remote_host"),
                ns=F.col("ns"),
                start_ts=to_ts(F.col("start_ms")),
                end_ts=to_ts(F.col("end_ms")),
                detail={
                    "changes": F.col("changes"),
                    "max_in_window": F.col("max_in_window"),
                    "window_ms": F.lit(window_ms),
                    "threshold": F.lit(params.admin_burst_changes),
                    "request_codes": F.col("request_codes"),
                },
            )
        )
    )
