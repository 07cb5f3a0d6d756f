"""Expiry timing: whether the scan removed each silent address on time.

A silent address must be removed at the first scan tick ``T > last_update + broker_expiry_ms``,
with ticks at ``ns_start + first_scan + k * scan_interval`` (docs/nameserver-semantics.md §2.5).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.analytics.liveness.params import LivenessParams

EXPIRY_CHECK_COLUMNS = (
    "ns",
    "broker_addr",
    "cluster",
    "broker_name",
    "broker_id",
    "seq",
    "ts_ms",
    "last_update_ms",
    "broker_expiry_ms",
    "scan_interval_ms",
    "schedule",
    "expected_ms",
    "late",
)


def with_expected_removal(expire_df: DataFrame, runs_df: DataFrame, params: LivenessParams) -> DataFrame:
    """Check each ``expire`` against the scan schedule of its run (§2.5, W17).

    ``expected_ms`` is the first tick ``T > last_update + expiry`` with ticks at
    ``start + first_scan + k * scan_interval`` (k >= 0) when the run's start is known, else the
    bound ``last_update + expiry + scan_interval``. ``late`` is a removal after
    ``expected + tolerance`` or after ``last_update + expiry + scan + tolerance``.

    Args:
        expire_df: ``expire`` rows with ``ns``, ``run``, ``seq``, ``ts_ms``, ``last_update_ms``
            and the broker keys.
        runs_df: :func:`jobs.analytics.liveness.runs.agg_runs`.
        params: first-scan delay, tolerance.

    Example:
        Run started at 0, last update 5000, expiry 120000, scan 10000: 125000 is on a tick and
        survives it, so the expected removal is 135000 (W17); an expire at 135000 is on time.
    """
    tolerance = params.late_expiry_tolerance_ms
    u, expiry, scan = F.col("last_update_ms"), F.col("broker_expiry_ms"), F.col("scan_interval_ms")
    bound = u + expiry + scan
    return (
        expire_df.join(runs_df, ["ns", "run"], "left")
        .withColumn("broker_expiry_ms", F.coalesce(expiry, F.lit(params.broker_expiry_ms).cast(T.LongType())))
        .withColumn("scan_interval_ms", F.coalesce(scan, F.lit(params.scan_interval_ms).cast(T.LongType())))
        # ms from the first tick to the deadline; ticks at or before the deadline do not remove
        .withColumn("_over", u + expiry - (F.col("start_ms") + params.first_scan_delay_ms))
        .withColumn("_k", F.when(F.col("_over") < 0, F.lit(0)).otherwise(F.expr("_over div scan_interval_ms") + 1))
        .withColumn(
            "expected_ms",
            F.when(
                F.col("start_ms").isNotNull(), F.col("start_ms") + params.first_scan_delay_ms + F.col("_k") * scan
            ).otherwise(bound),
        )
        .withColumn("late", (F.col("ts_ms") > F.col("expected_ms") + tolerance) | (F.col("ts_ms") > bound + tolerance))
        .select(*EXPIRY_CHECK_COLUMNS)
    )


def with_never_expired(windows_df: DataFrame, runs_df: DataFrame, params: LivenessParams) -> DataFrame:
    """Add ``deadline_ms``, ``bound_ms`` and ``never``: a silent entry the scan failed to remove.

    ``deadline_ms`` = last refresh + expiry + scan interval: by then the scan must have removed
    the entry. ``bound_ms`` is how long the server demonstrably kept it: the window's end for
    ``unregister``, ``channel_close`` and ``ns_stop``; the server's last event in the run for
    ``open`` and ``ns_restart`` windows (after a crash the log cannot say how long it ran).
    ``expire`` windows are judged by :func:`with_expected_removal`, ``unknown`` ends (lost lines)
    not at all. ``never`` is ``bound > deadline + tolerance``.
    """
    reason = F.col("end_reason")
    bound = F.when(reason.isin("unregister", "channel_close", "ns_stop"), F.unix_millis("end_ts")).when(
        reason.isin("open", "ns_restart"), F.col("last_event_ms")
    )
    expiry = F.coalesce(F.col("broker_expiry_ms"), F.lit(params.broker_expiry_ms).cast(T.LongType()))
    scan = F.coalesce(F.col("scan_interval_ms"), F.lit(params.scan_interval_ms).cast(T.LongType()))
    return (
        windows_df.join(
            runs_df.select("ns", "run", "broker_expiry_ms", "scan_interval_ms", "last_event_ms"), ["ns", "run"], "left"
        )
        .withColumn("deadline_ms", F.unix_millis("last_update_ts") + expiry + scan)
        .withColumn("bound_ms", bound)
        .withColumn(
            "never",
            F.coalesce(F.col("bound_ms") > F.col("deadline_ms") + params.late_expiry_tolerance_ms, F.lit(False)),
        )
        .drop("broker_expiry_ms", "scan_interval_ms", "last_event_ms")
    )
