"""Liveness of broker addresses per name server: windows, expiry timing, availability, findings.

A *liveness window* is one live entry of an address in one server's ``brokerLiveTable``
(semantics spec §1.1): it opens with a ``register`` (the address had no live entry) and ends with
the first later ``unregister``, ``expire`` or ``channel_close`` of the address, or when the server's
tables vanish (``ns_stop``; ``ns_start`` = a crash restart, end reason ``ns_restart``). Everything
is columnar: each server's ``ns_start``/``ns_stop`` events travel to the address events as a small
broadcast array that numbers the server's *runs*, and one window over each stream (ns, address,
run) ordered by ``seq`` assigns every event to its liveness window (:mod:`jobs.analytics.liveness.windows`:
that sort is the stage's cost, so it carries numbers only, the stream as one int).

Two kinds of rows stand for the time before the day's first event of an address:

* a window open at the end of the previous day (``liveness_windows``, end reason ``open``)
  enters the event stream as a synthetic ``_carry`` row at 00:00 (``carried_in`` =
  ``previous_day``), bringing its identity and last refresh;
* without one, an address whose first events today prove a live entry (a 103 ``heartbeat``, an
  ``expire`` or a ``channel_close``, which the server logs only for live addresses) gets a window
  from 00:00 with ``carried_in`` = ``unknown``. A 904 or 322 proves nothing: the server logs
  those for unknown addresses too (§2.6, §2.7).

Refreshes (what sets ``last_update``): every 103; a 904 inside a window; a 322 inside a window
whose ``data_version`` equals the stored one, the latest 103's in the window (before the day's
first 103 of a carried window the stored version is unknown, so such a 322 is not counted).

A window that is still live when a new ``register`` of the address arrives can only come from
lost log lines (a ``register`` means there was no live entry). It ends at that ``register`` with
end reason ``unknown``, so windows of one address on one server never overlap.

Expiry timing (§2.5): a silent address must be removed at the first scan tick
``T > last_update + broker_expiry_ms``, ticks at ``ns_start + first_scan + k * scan_interval``.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs import lake
from jobs.analytics.liveness import windows as LW
from jobs.lake.tables import read_table, table_exists, write_table
from jobs.lake.findings import write_findings
from jobs.spark.frames import CachedFrames, checkpoint_frame, local_frame
from common.config import Config
from common.timeutil import DAY_MS, day_start_ms
from schemas.events import EVENTS_TABLE_SCHEMA
from schemas.liveness import BROKER_AVAILABILITY_SCHEMA, LIVENESS_WINDOWS_SCHEMA
from schemas.routes import NS_RUNS_SCHEMA

RESETS = ("ns_start", "ns_stop")
CATEGORY = "liveness"

DATA_VERSION_TYPE = T.StructType([T.StructField("timestamp", T.LongType()), T.StructField("counter", T.LongType())])

# what the transforms read of an event (epoch-ms times; see with_event_ms)
EVENT_COLUMNS = (
    "ns", "seq", "ts_ms", "type", "request_code", "cluster", "broker_name", "broker_id", "broker_addr",
    "data_version", "last_update_ms", "broker_expiry_ms", "scan_interval_ms",
)
WINDOW_COLUMNS = tuple(LIVENESS_WINDOWS_SCHEMA.names) + ("run",)
RUN_COLUMNS = ("ns", "run", "start_ms", "broker_expiry_ms", "scan_interval_ms", "schedule", "last_event_ms")
EXPIRY_CHECK_COLUMNS = (
    "ns", "broker_addr", "cluster", "broker_name", "broker_id", "seq", "ts_ms", "last_update_ms",
    "broker_expiry_ms", "scan_interval_ms", "schedule", "expected_ms", "late",
)
FINDING_COLUMNS = ("kind", "severity", "subject", "ns", "start_ts", "end_ts", "detail")


# Column builders are functions, not constants: a Column needs a running SparkContext.
def _type() -> Column:
    return F.col("type")


@dataclass(frozen=True)
class LivenessParams:
    """Timer defaults and audit thresholds the transforms use (from :class:`Config`).

    The timers are fallbacks: a run's own ``ns_start`` values win when known.
    """

    broker_expiry_ms: int = 120_000
    scan_interval_ms: int = 10_000
    first_scan_delay_ms: int = 5_000
    late_expiry_tolerance_ms: int = 2_000
    heartbeat_period_ms: int = 30_000
    late_heartbeat_slack_ms: int = 15_000
    flapping_windows_per_day: int = 6

    @classmethod
    def from_config(cls, config: Config) -> "LivenessParams":
        """Take the name-server timers and the audit thresholds of a loaded configuration."""
        ns, audit = config.nameserver, config.audit
        return cls(
            broker_expiry_ms=ns.broker_expiry_ms, scan_interval_ms=ns.scan_interval_ms,
            first_scan_delay_ms=ns.first_scan_delay_ms, late_expiry_tolerance_ms=audit.late_expiry_tolerance_ms,
            heartbeat_period_ms=audit.heartbeat_period_ms, late_heartbeat_slack_ms=audit.late_heartbeat_slack_ms,
            flapping_windows_per_day=audit.flapping_windows_per_day,
        )


@dataclass(frozen=True)
class LivenessResult:
    """What a day's liveness stage wrote.

    Attributes:
        day: the UTC day.
        events: events of the day read.
        windows: liveness windows written.
        open_windows: of those, still open at the end of the day.
        broker_addrs: distinct broker addresses with a window.
        findings_by_kind: findings written, per kind (kinds with none are absent).
        availability_df: the day's ``broker_availability`` rows as written (lazy, small: one row
            per broker address), for the report.
    """

    day: dt.date
    events: int
    windows: int
    open_windows: int
    broker_addrs: int
    findings_by_kind: dict[str, int] = field(default_factory=dict)
    availability_df: DataFrame | None = None


# ---------------------------------------------------------------------------- events and runs


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
        events_df.where(_type().isin(*RESETS))
        .groupBy("ns")
        .agg(F.array_sort(F.collect_list(F.struct("seq", "ts_ms", "type", "broker_expiry_ms", "scan_interval_ms")))
             .alias("resets"))
        .select("ns", "resets")
    )


def agg_run_intervals(resets_df: DataFrame) -> DataFrame:
    """Per server with resets today, its runs as seq intervals ``[lo_seq, hi_seq)``.

    Run 0 is what was running at 00:00; the k-th reset (``ns_start`` or ``ns_stop``) opens run k,
    so the address events of one run share one set of tables. ``opened_by`` is the reset that
    opened the run (null for run 0), ``next_reset`` the one that ends it (null for the last run);
    both are :func:`agg_resets` structs.
    """
    first = F.array(F.lit(None).cast(resets_df.schema["resets"].dataType.elementType))
    following = F.get(F.col("resets"), F.col("run"))
    return (
        resets_df.select("ns", "resets", F.posexplode(F.concat(first, F.col("resets"))).alias("run", "opened_by"))
        .select(
            "ns",
            "run",
            F.coalesce(F.col("opened_by.seq"), F.lit(0).cast(T.LongType())).alias("lo_seq"),
            F.coalesce(following["seq"], F.lit(2**63 - 1)).alias("hi_seq"),
            "opened_by",
            following.alias("next_reset"),
        )
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
        df.join(F.broadcast(intervals_df), inside, "left")
        .withColumn("run", F.coalesce(F.col("_iv_run"), F.lit(0)))
        .drop("_iv_ns", "_iv_run", "lo_seq", "hi_seq")
    )


def select_carry_rows(prev_windows_df: DataFrame) -> DataFrame:
    """One ``_carry`` row per window open at the end of the day before: ``ns``, ``broker_addr``,
    its identity and ``last_update_ms`` (the window's last refresh)."""
    return prev_windows_df.where(F.col("end_reason") == "open").select(
        "ns", "broker_addr", "cluster", "broker_name", "broker_id",
        F.unix_millis("last_update_ts").alias("last_update_ms"),
    )


def agg_runs(run_events_df: DataFrame, run_intervals_df: DataFrame, carried_runs_df: DataFrame,
             params: LivenessParams) -> DataFrame:
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
        "ns", "run", opened["ts_ms"].alias("start_ms"), opened["broker_expiry_ms"].alias("expiry"),
        opened["scan_interval_ms"].alias("scan"), F.lit("ns_start").alias("schedule"),
    )
    carried_df = carried_runs_df.select(
        "ns", F.lit(0).alias("run"), "start_ms", F.col("broker_expiry_ms").alias("expiry"),
        F.col("scan_interval_ms").alias("scan"), F.lit("ns_runs").alias("schedule"),
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
        (F.col("date") == F.lit(day - dt.timedelta(days=1))) & (F.col("stop_reason") == "open")
        & F.col("start_seq").isNotNull()
    ).select("ns", "start_seq")
    return (
        ns_runs_df.join(open_df, ["ns", "start_seq"])
        .groupBy("ns", "start_seq")
        .agg(F.min_by(F.struct(F.unix_millis("start_ts").alias("ms"), F.col("date").alias("d")), "start_ts").alias("_s"))
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


# ---------------------------------------------------------------------------- expiry timing


def with_expected_removal(expire_df: DataFrame, runs_df: DataFrame, params: LivenessParams) -> DataFrame:
    """Check each ``expire`` against the scan schedule of its run (semantics §2.5, W17).

    ``expected_ms`` is the first tick ``T > last_update + expiry`` with ticks at
    ``start + first_scan + k * scan_interval`` (k >= 0) when the run's start is known, else the
    bound ``last_update + expiry + scan_interval``. ``late`` is a removal after
    ``expected + tolerance`` or after ``last_update + expiry + scan + tolerance``.

    Args:
        expire_df: ``expire`` rows with ``ns``, ``run``, ``seq``, ``ts_ms``, ``last_update_ms``
            and the broker keys.
        runs_df: :func:`agg_runs`.
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
            F.when(F.col("start_ms").isNotNull(),
                   F.col("start_ms") + params.first_scan_delay_ms + F.col("_k") * scan).otherwise(bound),
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
    bound = (
        F.when(reason.isin("unregister", "channel_close", "ns_stop"), F.unix_millis("end_ts"))
        .when(reason.isin("open", "ns_restart"), F.col("last_event_ms"))
    )
    expiry = F.coalesce(F.col("broker_expiry_ms"), F.lit(params.broker_expiry_ms).cast(T.LongType()))
    scan = F.coalesce(F.col("scan_interval_ms"), F.lit(params.scan_interval_ms).cast(T.LongType()))
    return (
        windows_df.join(runs_df.select("ns", "run", "broker_expiry_ms", "scan_interval_ms", "last_event_ms"),
                        ["ns", "run"], "left")
        .withColumn("deadline_ms", F.unix_millis("last_update_ts") + expiry + scan)
        .withColumn("bound_ms", bound)
        .withColumn("never", F.coalesce(F.col("bound_ms") > F.col("deadline_ms") + params.late_expiry_tolerance_ms,
                                        F.lit(False)))
        .drop("broker_expiry_ms", "scan_interval_ms", "last_event_ms")
    )


# ---------------------------------------------------------------------------- findings


def _finding(kind: str, severity: Column | str, subject: Column, start_ms: Column, end_ms: Column,
             detail: Column) -> list[Column]:
    """The finding columns (``FINDING_COLUMNS``) from column expressions; times in epoch ms."""
    sev = F.lit(severity) if isinstance(severity, str) else severity
    return [
        F.lit(kind).alias("kind"), sev.alias("severity"), subject.alias("subject"), F.col("ns"),
        F.timestamp_millis(start_ms).alias("start_ts"), F.timestamp_millis(end_ms).alias("end_ts"),
        F.to_json(detail, {"ignoreNullFields": "false"}).alias("detail"),
    ]


def _ts(ms: Column) -> Column:
    # timestamps in detail JSON render as ISO-8601 UTC (session time zone), milliseconds kept
    return F.timestamp_millis(ms)


def agg_late_expiry_findings(checks_df: DataFrame, never_df: DataFrame) -> DataFrame:
    """``late_expiry``: an expire after its expected tick + tolerance (warning), or a silent entry
    never removed (critical, ``actual`` = "never")."""
    late_df = checks_df.where("late").select(
        *_finding(
            "late_expiry", "warning", F.col("broker_addr"), F.col("expected_ms"), F.col("ts_ms"),
            F.struct(
                _ts(F.col("last_update_ms")).alias("last_update"), _ts(F.col("expected_ms")).alias("expected"),
                _ts(F.col("ts_ms")).alias("actual"),
                (F.col("ts_ms") - F.col("expected_ms")).alias("delay_ms"),
                "broker_expiry_ms", "scan_interval_ms", "schedule", "cluster", "broker_name", "broker_id",
            ),
        )
    )
    never_df = never_df.where("never").select(
        *_finding(
            "late_expiry", "critical", F.col("broker_addr"), F.col("deadline_ms"), F.col("bound_ms"),
            F.struct(
                F.col("last_update_ts").alias("last_update"), _ts(F.col("deadline_ms")).alias("expected"),
                F.lit("never").alias("actual"), (F.col("bound_ms") - F.col("deadline_ms")).alias("delay_ms"),
                "end_reason", _ts(F.col("bound_ms")).alias("still_live_at"), "cluster", "broker_name", "broker_id",
            ),
        )
    )
    return late_df.unionByName(never_df)


def agg_flapping_findings(windows_df: DataFrame, params: LivenessParams) -> DataFrame:
    """``broker_flapping`` (warning): an address opened more windows on one server in the day than
    ``flapping_windows_per_day`` (carried windows were opened on an earlier day and do not count)."""
    reason = F.col("end_reason")
    return (
        windows_df.where(F.col("carried_in").isNull())
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
            *_finding(
                "broker_flapping", "warning", F.col("broker_addr"), F.unix_millis("first_start"),
                F.coalesce(F.unix_millis("last_end"), F.unix_millis("last_start")),
                F.struct("windows", F.lit(params.flapping_windows_per_day).alias("threshold"),
                         "expired", "unregistered", "channel_closed"),
            )
        )
    )


def agg_broker_expired_findings(checks_df: DataFrame) -> DataFrame:
    """``broker_expired`` (warning): the scan removed an address that went silent without
    unregistering (it died, hung, or lost its link to this server); from last update to removal."""
    return checks_df.select(
        *_finding(
            "broker_expired", "warning", F.col("broker_addr"), F.col("last_update_ms"), F.col("ts_ms"),
            F.struct("cluster", "broker_name", "broker_id", _ts(F.col("last_update_ms")).alias("last_update"),
                     _ts(F.col("expected_ms")).alias("expected"), (F.col("ts_ms") - F.col("last_update_ms")).alias("silent_ms")),
        )
    )


def agg_unregistered_findings(windows_df: DataFrame) -> DataFrame:
    """``broker_unregistered`` (info): a live address left cleanly (UNREGISTER_BROKER, 104)."""
    return windows_df.where(F.col("end_reason") == "unregister").select(
        *_finding(
            "broker_unregistered", "info", F.col("broker_addr"), F.unix_millis("start_ts"), F.unix_millis("end_ts"),
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
        resets_df: :func:`agg_resets`.
        runs_df: :func:`agg_runs` (``last_event_ms`` per run: the run before a reset at position
            ``p`` of the array is run ``p``).
        prev_up_df: :func:`agg_previous_day_up`, possibly empty.
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
        F.when(prev.isNotNull(), prev["type"] == "ns_start")
        .when(had_events, F.lit(True))
        .otherwise(F.col("up_at_end"))
    )
    restarted = prev.isNotNull() | had_events | F.col("up_at_end").isNotNull() | (F.col("reset.seq") > 1)
    last_life = F.when(prev.isNotNull() | had_events, F.col("_before_ms")).when(~F.col("up_at_end"), F.col("last_stop_ms"))
    return (
        starts_df.join(before_df, ["ns", "pos"], "left")
        .join(prev_up_df, "ns", "left")
        .where(restarted)
        .withColumn("crash", crash)
        .withColumn("_life_ms", last_life)
        .select(
            *_finding(
                "ns_restart", F.when(F.col("crash"), F.lit("critical")).otherwise(F.lit("warning")), F.col("ns"),
                F.col("_life_ms"), F.col("reset.ts_ms"),
                F.struct("crash", F.col("reset.seq").alias("start_seq"), _ts(F.col("_life_ms")).alias("last_seen"),
                         (F.col("reset.ts_ms") - F.col("_life_ms")).alias("down_ms")),
            )
        )
    )


# ---------------------------------------------------------------------------- availability


def agg_broker_availability(windows_df: DataFrame, servers_df: DataFrame, day: dt.date) -> DataFrame:
    """``broker_availability`` rows: per address, live time per server and on any / all servers.

    Windows are clipped to the day; an open one counts until 24:00. "Any" and "all" come from a
    sweep over the window boundaries of all servers: the count of servers holding the address
    live, between consecutive boundaries.

    Args:
        windows_df: :func:`agg_windows` rows of the day.
        servers_df: ``ns`` of every server audited that day (one row each).
        day: the UTC day.

    Example:
        ns-a live 00:00-12:00, ns-b 06:00-24:00, two servers: any 24 h (1.0), all 6 h (0.25),
        ``availability_by_ns`` {ns-a: 0.5, ns-b: 0.75}.
    """
    start, end = day_start_ms(day), day_start_ms(day) + DAY_MS
    spans_df = windows_df.select(
        "ns", "broker_addr", "start_ts", "cluster", "broker_name", "broker_id",
        F.greatest(F.unix_millis("start_ts"), F.lit(start)).alias("_from"),
        F.least(F.coalesce(F.unix_millis("end_ts"), F.lit(end)), F.lit(end)).alias("_to"),
    )
    n_df = servers_df.agg(F.count(F.lit(1)).cast(T.IntegerType()).alias("servers"))

    per_ns_df = spans_df.groupBy("ns", "broker_addr").agg(F.sum(F.col("_to") - F.col("_from")).alias("live_ms"))
    grid_df = spans_df.select("broker_addr").distinct().crossJoin(servers_df.select("ns"))
    by_ns_df = (
        grid_df.join(per_ns_df, ["ns", "broker_addr"], "left")
        .groupBy("broker_addr")
        .agg(F.map_from_entries(F.array_sort(F.collect_list(F.struct("ns", F.coalesce("live_ms", F.lit(0)).cast(T.LongType())))))
             .alias("live_ms_by_ns"))
    )

    edges = F.array(F.struct(F.col("_from").alias("t"), F.lit(1).alias("d")),
                    F.struct(F.col("_to").alias("t"), F.lit(-1).alias("d")))
    sweep = Window.partitionBy("broker_addr").orderBy("t")
    cover_df = (
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
            F.sum(F.when(F.col("live_on") >= F.col("servers"), F.col("_len")).otherwise(0)).cast(T.LongType())
            .alias("live_all_ms"),
        )
    )
    identity_df = spans_df.groupBy("broker_addr").agg(
        F.max_by(F.struct("cluster", "broker_name", "broker_id"), "start_ts").alias("_id"),
        F.count(F.lit(1)).alias("windows"),
    )
    return (
        identity_df.join(by_ns_df, "broker_addr").join(cover_df, "broker_addr").crossJoin(n_df)
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


# ---------------------------------------------------------------------------- the stage


@dataclass(frozen=True)
class LivenessFrames(CachedFrames):
    """The stage's outputs for one day, as lazy DataFrames.

    The small intermediates several outputs share (runs, windows, expiry checks) are computed
    when the frames are built and checkpointed (:func:`jobs.spark.frames.checkpoint_frame`), so each is
    computed once and later plans read its rows, not its plan; :meth:`release` frees them, after
    the last read.

    Attributes:
        windows_df: ``LIVENESS_WINDOWS_SCHEMA`` rows.
        findings_df: ``FINDING_COLUMNS`` rows (category ``liveness``).
        availability_df: ``BROKER_AVAILABILITY_SCHEMA`` rows.
        cached: the checkpointed intermediates.
    """

    windows_df: DataFrame
    findings_df: DataFrame
    availability_df: DataFrame


def build_liveness(
    events_df: DataFrame,
    prev_windows_df: DataFrame,
    carried_runs_df: DataFrame,
    prev_up_df: DataFrame,
    day: dt.date,
    params: LivenessParams,
) -> LivenessFrames:
    """Compose the transforms: windows, expiry checks, findings and availability for one day.

    Args:
        events_df: the day's events (``events`` table layout).
        prev_windows_df: ``liveness_windows`` of the day before (only ``open`` rows matter);
            empty when that day is not in the lake.
        carried_runs_df: the run open at 00:00 per server with its ``ns_start`` timers (``ns``,
            ``start_ms``, ``broker_expiry_ms``, ``scan_interval_ms``); may be empty.
        prev_up_df: :func:`agg_previous_day_up`; may be empty.
        day: the UTC day.
        params: thresholds and timer defaults.
    """
    day_events_df = with_event_ms(events_df).select(*EVENT_COLUMNS)
    late_gap_ms = params.heartbeat_period_ms + params.late_heartbeat_slack_ms
    # the small intermediates are each read by several later queries: computed once, cut from
    # their plans (checkpoint_frame)
    resets_df = checkpoint_frame(agg_resets(day_events_df))
    intervals_df = checkpoint_frame(agg_run_intervals(resets_df))
    # one scan gives each run's last event and the day's streams (ns, address, run): a row per
    # stream with its last event, and one per run for the events without an address
    stream_last_df = checkpoint_frame(
        with_run(day_events_df.select("ns", "seq", "ts_ms", "broker_addr"), intervals_df)
        .groupBy("ns", "run", "broker_addr").agg(F.max("ts_ms").alias("ts_ms"))
    )
    runs_df = checkpoint_frame(agg_runs(stream_last_df, intervals_df, carried_runs_df, params))
    carry_df = select_carry_rows(prev_windows_df)
    # a _carry row (seq 0) is in run 0; checkpointed: the address events are tagged with it, and
    # the windows take their strings back from it
    numbered_df = checkpoint_frame(LW.number_streams(
        stream_last_df.where(F.col("broker_addr").isNotNull()).select(*LW.STREAM_KEYS)
        .unionByName(carry_df.select("ns", F.lit(0).alias("run"), "broker_addr")),
        intervals_df,
    ))
    # computed before the identity lookup, which reads it twice (its keys, then the join)
    unnamed_df = checkpoint_frame(
        LW.select_address_stream(day_events_df)
        .unionByName(LW.select_carry_stream(carry_df))
        .transform(lambda df: LW.with_stream_id(df, numbered_df))
        .transform(LW.with_window_keys)
        .transform(lambda df: LW.agg_windows(df, numbered_df, intervals_df, day, late_gap_ms))
    )
    windows_df = checkpoint_frame(
        LW.with_window_identity(unnamed_df, LW.select_named_rows(day_events_df, carry_df))
        .select(*WINDOW_COLUMNS)
    )
    # expiries need their run, not their window: no sort of the whole stream again
    expire_df = with_run(
        day_events_df.where(_type() == "expire").select(
            "ns", "seq", "ts_ms", "last_update_ms", "broker_addr", "cluster", "broker_name", "broker_id"
        ),
        intervals_df,
    )
    checks_df = checkpoint_frame(with_expected_removal(expire_df, runs_df, params))
    never_df = with_never_expired(windows_df, runs_df, params)
    findings_df = (
        agg_late_expiry_findings(checks_df, never_df)
        .unionByName(agg_broker_expired_findings(checks_df))
        .unionByName(agg_flapping_findings(windows_df, params))
        .unionByName(agg_unregistered_findings(windows_df))
        .unionByName(agg_ns_restart_findings(resets_df, runs_df, prev_up_df))
        .select(*FINDING_COLUMNS)
    )
    # a server with an event today has a run with a last event: no second scan of the events
    servers_df = (
        runs_df.where(F.col("last_event_ms").isNotNull()).select("ns")
        .unionByName(carry_df.select("ns"))
        .distinct()
    )
    availability_df = agg_broker_availability(windows_df, servers_df, day)
    return LivenessFrames(
        windows_df.select(*LIVENESS_WINDOWS_SCHEMA.names), findings_df, availability_df,
        cached=(resets_df, intervals_df, stream_last_df, runs_df, numbered_df, unnamed_df, windows_df, checks_df),
    )


# ---------------------------------------------------------------------------- the job


def run_liveness(spark: SparkSession, lake_dir: str, day: dt.date, config: Config) -> LivenessResult:
    """Audit liveness for ``day``: replaces the day in ``liveness_windows``, ``broker_availability``
    and the ``liveness`` findings (a rerun gives the same rows).

    Reads the day's ``events``; the day before's ``liveness_windows`` (windows carried over
    midnight) and ``ns_runs`` (scan schedule of a run started before today, and whether a server
    was up at the end of it) when the lake has them.

    Raises:
        FileNotFoundError: the lake has no ``events`` table.
    """
    params = LivenessParams.from_config(config)
    events_df = read_table(spark, lake.table_path(lake_dir, lake.EVENTS), EVENTS_TABLE_SCHEMA, where={"date": day})
    prev_windows_df = _read_or_empty(spark, lake_dir, lake.LIVENESS_WINDOWS, LIVENESS_WINDOWS_SCHEMA,
                                     {"date": day - dt.timedelta(days=1)})
    ns_runs_df = _read_or_empty(spark, lake_dir, lake.NS_RUNS, NS_RUNS_SCHEMA, None)
    carried_runs_df = _carried_run_timers(spark, lake_dir, agg_carried_runs(ns_runs_df, day))
    frames = build_liveness(events_df, prev_windows_df, carried_runs_df, agg_previous_day_up(ns_runs_df, day),
                            day, params)
    try:
        _replace_day(frames.windows_df, lake_dir, lake.LIVENESS_WINDOWS, LIVENESS_WINDOWS_SCHEMA, day)
        _replace_day(frames.availability_df, lake_dir, lake.BROKER_AVAILABILITY, BROKER_AVAILABILITY_SCHEMA, day)
        write_findings(frames.findings_df, lake_dir, day, category=CATEGORY)
        # one small row of counts and a row per finding kind: the job's log, not data
        totals = frames.windows_df.agg(
            F.count(F.lit(1)).alias("windows"),
            F.count(F.when(F.col("end_reason") == "open", 1)).alias("open_windows"),
            F.countDistinct("broker_addr").alias("broker_addrs"),
        ).first()
        by_kind = {r["kind"]: r["n"] for r in frames.findings_df.groupBy("kind").agg(F.count(F.lit(1)).alias("n")).collect()}
        events = events_df.count()
    finally:
        frames.release()
    availability_df = read_table(spark, lake.table_path(lake_dir, lake.BROKER_AVAILABILITY), BROKER_AVAILABILITY_SCHEMA,
                                 where={"date": day})
    return LivenessResult(day, events, totals["windows"], totals["open_windows"], totals["broker_addrs"],
                          by_kind, availability_df)


def _read_or_empty(spark: SparkSession, lake_dir: str, name: str, schema: T.StructType, where: dict | None) -> DataFrame:
    path = lake.table_path(lake_dir, name)
    if not table_exists(path):
        return local_frame(spark, [], schema)
    return read_table(spark, path, schema, where=where)


def _carried_run_timers(spark: SparkSession, lake_dir: str, carried_df: DataFrame) -> DataFrame:
    """The ``ns_start`` timers of the runs carried into the day, read from the days they began.

    At most one run per server, so the (date, ns) partitions to read are collected; a run whose
    ``ns_start`` is not in the lake keeps its start with null timers (config defaults apply).
    """
    keys = carried_df.select("ns", "start_date").distinct().collect()  # one row per server at most
    if not keys:
        return local_frame(spark, [], T.StructType([T.StructField("ns", T.StringType())] + [
            T.StructField(c, T.LongType()) for c in ("start_ms", "broker_expiry_ms", "scan_interval_ms")]))
    starts_df = (
        read_table(spark, lake.table_path(lake_dir, lake.EVENTS), EVENTS_TABLE_SCHEMA,
                   where={"date": sorted({k["start_date"] for k in keys}), "ns": sorted({k["ns"] for k in keys})})
        .where(F.col("type") == "ns_start")
        .select("ns", F.col("seq").alias("start_seq"), "broker_expiry_ms", "scan_interval_ms")
    )
    return carried_df.join(starts_df, ["ns", "start_seq"], "left").select(
        "ns", "start_ms", "broker_expiry_ms", "scan_interval_ms"
    )


def _replace_day(df: DataFrame, lake_dir: str, name: str, schema: T.StructType, day: dt.date) -> None:
    # windows and availability: a row per live entry or broker of the day
    write_table(df, lake.table_path(lake_dir, name), mode="overwrite", partition_by=["date"],
                replace_where={"date": day}, schema=schema, few_rows=True)
