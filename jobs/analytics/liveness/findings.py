"""The ``liveness`` findings: late expiries, expired, flapping and unregistered brokers, restarts."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from jobs.analytics.liveness.params import LivenessParams

CATEGORY = "liveness"
FINDING_COLUMNS = ("kind", "severity", "subject", "ns", "start_ts", "end_ts", "detail")


def liveness_finding(
    kind: str, severity: Column | str, subject: Column, start_ms: Column, end_ms: Column, detail: Column
) -> list[Column]:
    """The finding columns (``FINDING_COLUMNS``) from column expressions; times in epoch ms."""
    sev = F.lit(severity) if isinstance(severity, str) else severity
    return [
        F.lit(kind).alias("kind"),
        sev.alias("severity"),
        subject.alias("subject"),
        F.col("ns"),
        F.timestamp_millis(start_ms).alias("start_ts"),
        F.timestamp_millis(end_ms).alias("end_ts"),
        F.to_json(detail, {"ignoreNullFields": "false"}).alias("detail"),
    ]


def _ts(ms: Column) -> Column:
    # timestamps in detail JSON render as ISO-8601 UTC (session time zone), milliseconds kept
    return F.timestamp_millis(ms)


def agg_late_expiry_findings(checks_df: DataFrame, never_df: DataFrame) -> DataFrame:
    """``late_expiry``: an expire after its expected tick + tolerance (warning), or a silent entry
    never removed (critical, ``actual`` = "never")."""
    late_df = checks_df.where("late").select(
        *liveness_finding(
            "late_expiry",
            "warning",
            F.col("broker_addr"),
            F.col("expected_ms"),
            F.col("ts_ms"),
            F.struct(
                _ts(F.col("last_update_ms")).alias("last_update"),
                _ts(F.col("expected_ms")).alias("expected"),
                _ts(F.col("ts_ms")).alias("actual"),
                (F.col("ts_ms") - F.col("expected_ms")).alias("delay_ms"),
                "broker_expiry_ms",
                "scan_interval_ms",
                "schedule",
                "cluster",
                "broker_name",
                "broker_id",
            ),
        )
    )
    never_df = never_df.where("never").select(
        *liveness_finding(
            "late_expiry",
            "critical",
            F.col("broker_addr"),
            F.col("deadline_ms"),
            F.col("bound_ms"),
            F.struct(
                F.col("last_update_ts").alias("last_update"),
                _ts(F.col("deadline_ms")).alias("expected"),
                F.lit("never").alias("actual"),
                (F.col("bound_ms") - F.col("deadline_ms")).alias("delay_ms"),
                "end_reason",
                _ts(F.col("bound_ms")).alias("still_live_at"),
                "cluster",
                "broker_name",
                "broker_id",
            ),
        )
    )
    return late_df.unionByName(never_df)


def agg_flapping_findings(windows_df: DataFrame, params: LivenessParams) -> DataFrame:
    """``broker_flapping`` (warning): an address opened more windows on one server in the day than
    ``flapping_windows_per_day``. Carried windows were opened on an earlier day, and a window
    opened after the server stopped or restarted is the server's doing (its tables were emptied
    and every broker registers again): neither counts."""
    reason = F.col("end_reason")
    before = F.lag("end_reason").over(Window.partitionBy("ns", "broker_addr").orderBy("start_ts"))
    return (
        windows_df.withColumn("_after_server", F.coalesce(before.isin("ns_stop", "ns_restart"), F.lit(False)))
        .where(F.col("carried_in").isNull() & ~F.col("_after_server"))
        .groupBy("ns", "broker_addr")
        .agg(
            F.count(F.lit(1)).alias("windows"),
            F.min("start_ts").alias("first_start"),
            F.max("start_ts").alias("last_start"),
            F.max_by("end_ts", "start_ts").alias("last_end"),
            F.count(F.when(reason == "expire", 1)).alias("expired"),
            F.count(F.when(reason == "unregister", 1)).alias("unregistered"),
            F.count(F.when(reason == "channel_close", 1)).alias("channel_closed"),
        )
        .where(F.col("windows") > params.flapping_windows_per_day)
        .select(
            *liveness_finding(
                "broker_flapping",
                "warning",
                F.col("broker_addr"),
                F.unix_millis("first_start"),
                F.coalesce(F.unix_millis("last_end"), F.unix_millis("last_start")),
                F.struct(
                    "windows",
                    F.lit(params.flapping_windows_per_day).alias("threshold"),
                    "expired",
                    "unregistered",
                    "channel_closed",
                ),
            )
        )
    )


def agg_broker_expired_findings(checks_df: DataFrame) -> DataFrame:
    """``broker_expired`` (warning): the scan removed an address that went silent without
    unregistering (it died, hung, or lost its link to this server); from last update to removal."""
    return checks_df.select(
        *liveness_finding(
            "broker_expired",
            "warning",
            F.col("broker_addr"),
            F.col("last_update_ms"),
            F.col("ts_ms"),
            F.struct(
                "cluster",
                "broker_name",
                "broker_id",
                _ts(F.col("last_update_ms")).alias("last_update"),
                _ts(F.col("expected_ms")).alias("expected"),
                (F.col("ts_ms") - F.col("last_update_ms")).alias("silent_ms"),
            ),
        )
    )


def agg_unregistered_findings(windows_df: DataFrame) -> DataFrame:
    """``broker_unregistered`` (info): a live address left cleanly (UNREGISTER_BROKER, 104)."""
    return windows_df.where(F.col("end_reason") == "unregister").select(
        *liveness_finding(
            "broker_unregistered",
            "info",
            F.col("broker_addr"),
            F.unix_millis("start_ts"),
            F.unix_millis("end_ts"),
            F.struct("cluster", "broker_name", "broker_id", "last_update_ts", "duration_ms", "carried_in"),
        )
    )


def agg_ns_restart_findings(resets_df: DataFrame, runs_df: DataFrame, prev_up_df: DataFrame) -> DataFrame:
    """``ns_restart``: a server started again (warning), after a crash (critical).

    An ``ns_start`` is a restart when the server was seen before: an earlier event today or in
    the lake, or a seq above 1 (seqs continue across restarts and start at 1 in a new log). It
    is a crash restart when no ``ns_stop`` came first: the reset before it today is an
    ``ns_start``, or it is the day's first reset and the server had events before it today or was
    up at the end of the day before. When nothing says how the previous run ended, ``crash`` is
    null (warning). ``start_ts`` is the last sign of life before it: the ``ns_stop``, or the last
    event before a crash; null when the lake has none.

    Args:
        resets_df: :func:`jobs.analytics.liveness.runs.agg_resets`.
        runs_df: :func:`jobs.analytics.liveness.runs.agg_runs` (``last_event_ms`` per run: the run
            before a reset at position ``p`` of the array is run ``p``).
        prev_up_df: :func:`jobs.analytics.liveness.runs.agg_previous_day_up`, possibly empty.
    """
    starts_df = (
        resets_df.select("ns", "resets", F.posexplode("resets").alias("pos", "reset"))
        .withColumn("prev", F.when(F.col("pos") > 0, F.get(F.col("resets"), F.col("pos") - 1)))
        .where(F.col("reset.type") == "ns_start")
    )
    before_df = runs_df.select("ns", F.col("run").alias("pos"), F.col("last_event_ms").alias("_before_ms"))
    prev = F.col("prev")
    had_events = F.col("_before_ms").isNotNull()
    crash = (
        F.when(prev.isNotNull(), prev["type"] == "ns_start").when(had_events, F.lit(True)).otherwise(F.col("up_at_end"))
    )
    restarted = prev.isNotNull() | had_events | F.col("up_at_end").isNotNull() | (F.col("reset.seq") > 1)
    last_life = F.when(prev.isNotNull() | had_events, F.col("_before_ms")).when(
        ~F.col("up_at_end"), F.col("last_stop_ms")
    )
    return (
        starts_df.join(before_df, ["ns", "pos"], "left")
        .join(prev_up_df, "ns", "left")
        .where(restarted)
        .withColumn("crash", crash)
        .withColumn("_life_ms", last_life)
        .select(
            *liveness_finding(
                "ns_restart",
                F.when(F.col("crash"), F.lit("critical")).otherwise(F.lit("warning")),
                F.col("ns"),
                F.col("_life_ms"),
                F.col("reset.ts_ms"),
                F.struct(
                    "crash",
                    F.col("reset.seq").alias("start_seq"),
                    _ts(F.col("_life_ms")).alias("last_seen"),
                    (F.col("reset.ts_ms") - F.col("_life_ms")).alias("down_ms"),
                ),
            )
        )
    )
