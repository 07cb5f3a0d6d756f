"""The day's events in epoch ms, each server's runs (between ``ns_start``/``ns_stop`` resets) and
what the lake says of the runs and windows carried over midnight.

A run is one life of a server's tables: the address events of one run share one set of tables.
Each server's resets travel to the address events as a small broadcast array that numbers its runs.
"""

from __future__ import annotations

import datetime as dt
from typing import cast

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.analytics.liveness.params import LivenessParams
from jobs.spark.profile import broadcast
from schemas.events import RESET_TYPES

DATA_VERSION_TYPE = T.StructType([T.StructField("timestamp", T.LongType()), T.StructField("counter", T.LongType())])

# what the transforms read of an event (epoch-ms times; see with_event_ms)
EVENT_COLUMNS = (
    "ns",
    "seq",
    "ts_ms",
    "type",
    "request_code",
    "cluster",
    "broker_name",
    "broker_id",
    "broker_addr",
    "data_version",
    "last_update_ms",
    "broker_expiry_ms",
    "scan_interval_ms",
)
RUN_COLUMNS = ("ns", "run", "start_ms", "broker_expiry_ms", "scan_interval_ms", "schedule", "last_event_ms")


# Column builders are functions, not constants: a Column needs a running SparkContext.
def _type() -> Column:
    return F.col("type")


def with_event_ms(events_df: DataFrame) -> DataFrame:
    """Add ``ts_ms`` and ``last_update_ms`` (epoch ms) whichever way the table stores the times.

    The ``events`` table keeps ``ts`` as a timestamp beside ``ts_ms``; ``last_update_ts`` may be a
    timestamp or the log's epoch ms.
    """
    df = events_df
    if "ts_ms" not in df.columns:
        ts_type = df.schema["ts"].dataType
        df = df.withColumn("ts_ms", F.unix_millis("ts") if isinstance(ts_type, T.TimestampType) else F.col("ts"))
    if "last_update_ts" in df.columns:
        lu_type = df.schema["last_update_ts"].dataType
        last = F.unix_millis("last_update_ts") if isinstance(lu_type, T.TimestampType) else F.col("last_update_ts")
    else:
        last = F.lit(None)
    return df.withColumn("last_update_ms", last.cast(T.LongType()))


def agg_resets(events_df: DataFrame) -> DataFrame:
    """Per server, its ``ns_start``/``ns_stop`` events of the day as ``resets``, sorted by seq."""
    return (
        events_df.where(_type().isin(*RESET_TYPES))
        .groupBy("ns")
        .agg(
            F.array_sort(
                F.collect_list(F.struct("seq", "ts_ms", "type", "broker_expiry_ms", "scan_interval_ms"))
            ).alias("resets")
        )
        .select("ns", "resets")
    )


def agg_run_intervals(resets_df: DataFrame) -> DataFrame:
    """Per server with resets today, its runs as seq intervals ``[lo_seq, hi_seq)``.

    Run 0 is what was running at 00:00; the k-th reset (``ns_start`` or ``ns_stop``) opens run k,
    so the address events of one run share one set of tables. ``opened_by`` is the reset that
    opened the run (null for run 0), ``next_reset`` the one that ends it (null for the last run);
    both are :func:`agg_resets` structs.
    """
    resets_type = cast(T.ArrayType, resets_df.schema["resets"].dataType)  # agg_resets: an array of structs
    first = F.array(F.lit(None).cast(resets_type.elementType))
    following = F.get(F.col("resets"), F.col("run"))
    return resets_df.select(
        "ns", "resets", F.posexplode(F.concat(first, F.col("resets"))).alias("run", "opened_by")
    ).select(
        "ns",
        "run",
        F.coalesce(F.col("opened_by.seq"), F.lit(0).cast(T.LongType())).alias("lo_seq"),
        F.coalesce(following["seq"], F.lit(2**63 - 1)).alias("hi_seq"),
        "opened_by",
        following.alias("next_reset"),
    )


def with_run(df: DataFrame, run_intervals_df: DataFrame) -> DataFrame:
    """Add ``run`` (:func:`agg_run_intervals`); a server without resets today is in run 0 all day.

    A broadcast join on ``ns`` with the seq range as condition: a handful of intervals per server,
    evaluated in generated code, where a per-row search of an array would be interpreted.
    """
    intervals_df = run_intervals_df.select(
        F.col("ns").alias("_iv_ns"), F.col("run").alias("_iv_run"), "lo_seq", "hi_seq"
    )
    inside = (F.col("ns") == F.col("_iv_ns")) & (F.col("seq") >= F.col("lo_seq")) & (F.col("seq") < F.col("hi_seq"))
    return (
        df.join(broadcast(intervals_df), inside, "left")
        .withColumn("run", F.coalesce(F.col("_iv_run"), F.lit(0)))
        .drop("_iv_ns", "_iv_run", "lo_seq", "hi_seq")
    )


def select_carry_rows(prev_windows_df: DataFrame) -> DataFrame:
    """One ``_carry`` row per window open at the end of the day before: ``ns``, ``broker_addr``,
    its identity and ``last_update_ms`` (the window's last refresh)."""
    return prev_windows_df.where(F.col("end_reason") == "open").select(
        "ns",
        "broker_addr",
        "cluster",
        "broker_name",
        "broker_id",
        F.unix_millis("last_update_ts").alias("last_update_ms"),
    )


def agg_runs(
    run_events_df: DataFrame, run_intervals_df: DataFrame, carried_runs_df: DataFrame, params: LivenessParams
) -> DataFrame:
    """Per (ns, run): the run's start and timers, and the server's last event in the run.

    A run ``r >= 1`` opened by an ``ns_start`` starts there, with that event's timers. Run 0 (up
    at 00:00) takes its start from ``carried_runs_df`` (``ns``, ``start_ms``,
    ``broker_expiry_ms``, ``scan_interval_ms``) when the lake knows it. ``schedule`` says where the
    start came from: ``ns_start``, ``ns_runs``, or null (unknown: expiry is then judged against
    the bound ``last_update + expiry + scan``). Timers fall back to ``params``.

    Args:
        run_events_df: the day's events (``ns``, ``ts_ms``) with ``run`` (:func:`with_run`), or
            any rows whose greatest ``ts_ms`` per (ns, run) is that of the events.
        run_intervals_df: :func:`agg_run_intervals`.
        carried_runs_df: the run open at 00:00 per server, possibly empty.
        params: timer defaults.
    """
    last_df = run_events_df.groupBy("ns", "run").agg(F.max("ts_ms").alias("last_event_ms"))
    opened = F.col("opened_by")
    started_df = run_intervals_df.where(opened["type"] == "ns_start").select(
        "ns",
        "run",
        opened["ts_ms"].alias("start_ms"),
        opened["broker_expiry_ms"].alias("expiry"),
        opened["scan_interval_ms"].alias("scan"),
        F.lit("ns_start").alias("schedule"),
    )
    carried_df = carried_runs_df.select(
        "ns",
        F.lit(0).alias("run"),
        "start_ms",
        F.col("broker_expiry_ms").alias("expiry"),
        F.col("scan_interval_ms").alias("scan"),
        F.lit("ns_runs").alias("schedule"),
    )
    return (
        last_df.join(started_df.unionByName(carried_df), ["ns", "run"], "full")
        .select(
            "ns",
            "run",
            "start_ms",
            F.coalesce("expiry", F.lit(params.broker_expiry_ms)).cast(T.LongType()).alias("broker_expiry_ms"),
            F.coalesce("scan", F.lit(params.scan_interval_ms)).cast(T.LongType()).alias("scan_interval_ms"),
            F.when(F.col("start_ms").isNotNull(), F.col("schedule")).alias("schedule"),
            "last_event_ms",
        )
        .select(*RUN_COLUMNS)
    )


def agg_carried_runs(ns_runs_df: DataFrame, day: dt.date) -> DataFrame:
    """The run of each server still open at the end of the day before ``day``, with its real start.

    ``ns_runs`` clips runs to days (a run carried across midnight restarts at 00:00 with the same
    ``start_seq``), so the true start is the earliest ``start_ts`` among the rows of that
    ``start_seq``; ``start_date`` is the day it started (where its ``ns_start`` event lives).
    Runs that began before the lake (``start_seq`` null) are unknown and left out.

    Returns:
        ``ns``, ``start_seq``, ``start_ms``, ``start_date``.
    """
    open_df = ns_runs_df.where(
        (F.col("date") == F.lit(day - dt.timedelta(days=1)))
        & (F.col("stop_reason") == "open")
        & F.col("start_seq").isNotNull()
    ).select("ns", "start_seq")
    return (
        ns_runs_df.join(open_df, ["ns", "start_seq"])
        .groupBy("ns", "start_seq")
        .agg(
            F.min_by(F.struct(F.unix_millis("start_ts").alias("ms"), F.col("date").alias("d")), "start_ts").alias("_s")
        )
        .select("ns", "start_seq", F.col("_s.ms").alias("start_ms"), F.col("_s.d").alias("start_date"))
    )


def agg_previous_day_up(ns_runs_df: DataFrame, day: dt.date) -> DataFrame:
    """Per server with ``ns_runs`` rows the day before: ``up_at_end`` and its ``last_stop_ms``."""
    return (
        ns_runs_df.where(F.col("date") == F.lit(day - dt.timedelta(days=1)))
        .groupBy("ns")
        .agg(
            F.max(F.col("stop_reason") == "open").alias("up_at_end"),
            F.max(F.when(F.col("stop_reason") == "ns_stop", F.unix_millis("stop_ts"))).alias("last_stop_ms"),
        )
        .select("ns", "up_at_end", "last_stop_ms")
    )
