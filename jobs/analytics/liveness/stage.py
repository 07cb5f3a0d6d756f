"""The liveness stage: a day's windows, expiry checks, findings and availability, read and written."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from common.config import Config
from jobs import lake
from jobs.analytics.liveness import windows as LW
from jobs.analytics.liveness.availability import agg_broker_availability
from jobs.analytics.liveness.expiry import with_expected_removal, with_never_expired
from jobs.analytics.liveness.findings import (
    CATEGORY,
    FINDING_COLUMNS,
    agg_broker_expired_findings,
    agg_flapping_findings,
    agg_late_expiry_findings,
    agg_ns_restart_findings,
    agg_unregistered_findings,
)
from jobs.analytics.liveness.identity import select_named_rows, with_window_identity
from jobs.analytics.liveness.observed import agg_observed_broker_gone_findings, agg_observed_server_down_findings
from jobs.analytics.liveness.params import LivenessParams
from jobs.analytics.liveness.runs import (
    EVENT_COLUMNS,
    agg_carried_runs,
    agg_previous_day_up,
    agg_resets,
    agg_run_intervals,
    agg_runs,
    select_carry_rows,
    with_event_ms,
    with_run,
)
from jobs.lake.days import read_day_arrow, read_or_empty, replace_day
from jobs.lake.findings import DayFindings
from jobs.lake.tables import read_table
from jobs.spark.frames import CachedFrames, checkpoint_frame, local_frame
from jobs.spark.profile import broadcast
from schemas.event_types import OBSERVATION_TYPES
from schemas.events import EVENTS_TABLE_SCHEMA
from schemas.liveness import BROKER_AVAILABILITY_SCHEMA, LIVENESS_WINDOWS_SCHEMA
from schemas.routes import BROKER_ADDR_HISTORY_SCHEMA, NS_RUNS_SCHEMA, NS_STATE_SCHEMA

WINDOW_COLUMNS = tuple(LIVENESS_WINDOWS_SCHEMA.names) + ("run",)


@dataclass(frozen=True)
class LivenessResult:
    """What a day's liveness stage wrote.

    Attributes:
        day: the UTC day.
        windows: liveness windows written.
        open_windows: of those, still open at the end of the day.
        broker_addrs: distinct broker addresses with a window.
        findings_by_kind: findings written, per kind (kinds with none are absent); empty in the
            nightly audit, which writes every stage's findings at its end.
    """

    day: dt.date
    windows: int
    open_windows: int
    broker_addrs: int
    findings_by_kind: dict[str, int] = field(default_factory=dict)


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
        prev_up_df: :func:`jobs.analytics.liveness.runs.agg_previous_day_up`; may be empty.
        day: the UTC day.
        params: thresholds and timer defaults.
    """
    day_events_df = with_event_ms(events_df).select(*EVENT_COLUMNS)
    # the small intermediates are each read by several later queries: computed once, cut from
    # their plans (checkpoint_frame)
    resets_df = checkpoint_frame(agg_resets(day_events_df))
    intervals_df = checkpoint_frame(agg_run_intervals(resets_df))
    # one scan gives each run's last event and the day's streams (ns, address, run): a row per
    # stream with its last event, and one per run for the events without an address
    stream_last_df = checkpoint_frame(
        with_run(day_events_df.select("ns", "seq", "ts_ms", "broker_addr"), intervals_df)
        .groupBy("ns", "run", "broker_addr")
        .agg(F.max("ts_ms").alias("ts_ms"))
    )
    runs_df = checkpoint_frame(agg_runs(stream_last_df, intervals_df, carried_runs_df, params))
    carry_df = select_carry_rows(prev_windows_df)
    late_gap_ms = params.heartbeat_period_ms + params.late_heartbeat_slack_ms
    numbered_df, unnamed_df, windows_df = _build_windows(
        day_events_df, carry_df, stream_last_df, intervals_df, day, late_gap_ms
    )
    # expiries need their run, not their window: no sort of the whole stream again
    expire_df = with_run(
        day_events_df.where(F.col("type") == "expire").select(
            "ns", "seq", "ts_ms", "last_update_ms", "broker_addr", "cluster", "broker_name", "broker_id"
        ),
        intervals_df,
    )
    checks_df = checkpoint_frame(with_expected_removal(expire_df, runs_df, params))
    findings_df = _union_findings(checks_df, windows_df, resets_df, runs_df, prev_up_df, params)
    # a server with an event today has a run with a last event: no second scan of the events
    servers_df = (
        runs_df.where(F.col("last_event_ms").isNotNull()).select("ns").unionByName(carry_df.select("ns")).distinct()
    )
    availability_df = agg_broker_availability(windows_df, servers_df, day)
    return LivenessFrames(
        windows_df.select(*LIVENESS_WINDOWS_SCHEMA.names),
        findings_df,
        availability_df,
        cached=(resets_df, intervals_df, stream_last_df, runs_df, numbered_df, unnamed_df, windows_df, checks_df),
    )


def _build_windows(
    day_events_df: DataFrame,
    carry_df: DataFrame,
    stream_last_df: DataFrame,
    intervals_df: DataFrame,
    day: dt.date,
    late_gap_ms: int,
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The day's streams numbered, its windows without and with their identity (``WINDOW_COLUMNS``),
    each checkpointed."""
    # a _carry row (seq 0) is in run 0; checkpointed: the address events are tagged with it, and
    # the windows take their strings back from it
    numbered_df = checkpoint_frame(
        LW.number_streams(
            stream_last_df.where(F.col("broker_addr").isNotNull())
            .select(*LW.STREAM_KEYS)
            .unionByName(carry_df.select("ns", F.lit(0).alias("run"), "broker_addr")),
            intervals_df,
        )
    )
    # computed before the identity lookup, which reads it twice (its keys, then the join)
    unnamed_df = checkpoint_frame(
        LW.select_address_stream(day_events_df)
        .unionByName(LW.select_carry_stream(carry_df))
        .transform(lambda df: LW.with_stream_id(df, numbered_df))
        .transform(LW.with_window_keys)
        .transform(lambda df: LW.agg_windows(df, numbered_df, intervals_df, day, late_gap_ms))
    )
    windows_df = checkpoint_frame(
        with_window_identity(unnamed_df, select_named_rows(day_events_df, carry_df)).select(*WINDOW_COLUMNS)
    )
    return numbered_df, unnamed_df, windows_df


def _union_findings(
    checks_df: DataFrame,
    windows_df: DataFrame,
    resets_df: DataFrame,
    runs_df: DataFrame,
    prev_up_df: DataFrame,
    params: LivenessParams,
) -> DataFrame:
    """Every ``liveness`` finding of the day (``FINDING_COLUMNS``)."""
    never_df = with_never_expired(windows_df, runs_df, params)
    return (
        agg_late_expiry_findings(checks_df, never_df)
        .unionByName(agg_broker_expired_findings(checks_df))
        .unionByName(agg_flapping_findings(windows_df, params))
        .unionByName(agg_unregistered_findings(windows_df))
        .unionByName(agg_ns_restart_findings(resets_df, runs_df, prev_up_df))
        .select(*FINDING_COLUMNS)
    )


def run_liveness(
    spark: SparkSession, lake_dir: str, day: dt.date, config: Config, findings: DayFindings | None = None
) -> LivenessResult:
    """Audit liveness for ``day``: replaces the day in ``liveness_windows``, ``broker_availability``
    and the ``liveness`` findings (a rerun gives the same rows).

    Reads the day's ``events``; the day before's ``liveness_windows`` (windows carried over
    midnight) and ``ns_runs`` (scan schedule of a run started before today, and whether a server
    was up at the end of it) when the lake has them.

    Args:
        findings: the audit's findings of the day, which this stage's join (written by the
            incidents stage); None: they are written now.

    Raises:
        FileNotFoundError: the lake has no ``events`` table.
    """
    params = LivenessParams.from_config(config)
    # observation streams (nsaudit collect) are no name server whose brokers live or expire
    events_df = read_table(
        spark, lake.table_path(lake_dir, lake.EVENTS), EVENTS_TABLE_SCHEMA, where={"date": day}
    ).where(~F.col("type").isin(*OBSERVATION_TYPES))
    prev_windows_df = read_or_empty(
        spark, lake_dir, lake.LIVENESS_WINDOWS, LIVENESS_WINDOWS_SCHEMA, where={"date": day - dt.timedelta(days=1)}
    )
    # an observed server's runs are periods its state was known, not runs of a server of ours
    ns_runs_df = read_or_empty(spark, lake_dir, lake.NS_RUNS, NS_RUNS_SCHEMA).where(
        F.col("resolution_ms").isNull() & ~F.col("stop_reason").startswith("observe_")
    )
    carried_runs_df = _carried_run_timers(spark, lake_dir, day, agg_carried_runs(ns_runs_df, day))
    frames = build_liveness(
        events_df, prev_windows_df, carried_runs_df, agg_previous_day_up(ns_runs_df, day), day, params
    )
    own = findings is None
    findings = findings if findings is not None else DayFindings(day)
    kept = False
    try:
        # windows and availability: a row per live entry or broker of the day
        replace_day(frames.windows_df, lake_dir, lake.LIVENESS_WINDOWS, day, LIVENESS_WINDOWS_SCHEMA, few_rows=True)
        replace_day(
            frames.availability_df, lake_dir, lake.BROKER_AVAILABILITY, day, BROKER_AVAILABILITY_SCHEMA, few_rows=True
        )
        findings.add(CATEGORY, frames.findings_df.unionByName(_observed_findings(spark, lake_dir, day)), keep=frames)
        kept = True
        by_kind = findings.write_category(lake_dir, CATEGORY) if own else {}
    finally:
        if own or not kept:
            frames.release()
    return _result(lake_dir, day, by_kind)


def _result(lake_dir: str, day: dt.date, by_kind: dict[str, int]) -> LivenessResult:
    """The stage's counts, read back from the windows it wrote (a row per live entry)."""
    rows = read_day_arrow(lake_dir, lake.LIVENESS_WINDOWS, day, ["broker_addr", "end_reason"])
    addrs, reasons = rows.column("broker_addr").to_pylist(), rows.column("end_reason").to_pylist()
    return LivenessResult(day, rows.num_rows, sum(r == "open" for r in reasons), len(set(addrs)), by_kind)


def _observed_findings(spark: SparkSession, lake_dir: str, day: dt.date) -> DataFrame:
    """The day's liveness-as-observed findings (:mod:`jobs.analytics.liveness.observed`), from the
    rebuild's tables of the observed servers (none on a day without ``nsaudit collect`` streams)."""
    today = {"date": day}
    observed_df = broadcast(
        read_or_empty(spark, lake_dir, lake.NS_STATE, NS_STATE_SCHEMA, where=today)
        .where(F.col("observed"))
        .select("ns")
        .distinct()
    )
    runs_df = read_or_empty(spark, lake_dir, lake.NS_RUNS, NS_RUNS_SCHEMA, where=today)
    addr_df = read_or_empty(spark, lake_dir, lake.BROKER_ADDR_HISTORY, BROKER_ADDR_HISTORY_SCHEMA, where=today)
    runs_df, addr_df = (df.join(observed_df, "ns", "left_semi") for df in (runs_df, addr_df))
    return agg_observed_broker_gone_findings(addr_df, runs_df, day).unionByName(
        agg_observed_server_down_findings(runs_df, addr_df, day)
    )


# the timers of the runs carried into the day (:func:`_carried_run_timers`)
_CARRIED_TIMERS_SCHEMA = T.StructType(
    [T.StructField("ns", T.StringType())]
    + [T.StructField(c, T.LongType()) for c in ("start_ms", "broker_expiry_ms", "scan_interval_ms")]
)


def _carried_run_timers(spark: SparkSession, lake_dir: str, day: dt.date, carried_df: DataFrame) -> DataFrame:
    """The ``ns_start`` timers of the runs carried into the day, read from the days they began.

    At most one run per server, so the (date, ns) partitions to read are collected; a run whose
    ``ns_start`` is not in the lake keeps its start with null timers (config defaults apply). The
    day before's ``ns_runs`` (a row per run) tell first, without Spark, whether any is carried.
    """
    if not _runs_open_at_midnight(lake_dir, day):
        return local_frame(spark, [], _CARRIED_TIMERS_SCHEMA)
    keys = carried_df.select("ns", "start_date").distinct().collect()  # one row per server at most
    if not keys:
        return local_frame(spark, [], _CARRIED_TIMERS_SCHEMA)
    starts_df = (
        read_table(
            spark,
            lake.table_path(lake_dir, lake.EVENTS),
            EVENTS_TABLE_SCHEMA,
            where={"date": sorted({k["start_date"] for k in keys}), "ns": sorted({k["ns"] for k in keys})},
        )
        .where(F.col("type") == "ns_start")
        .select("ns", F.col("seq").alias("start_seq"), "broker_expiry_ms", "scan_interval_ms")
    )
    return carried_df.join(starts_df, ["ns", "start_seq"], "left").select(
        "ns", "start_ms", "broker_expiry_ms", "scan_interval_ms"
    )


def _runs_open_at_midnight(lake_dir: str, day: dt.date) -> bool:
    """Whether a run of a server of ours (not an observed one) with a known start was open at the
    end of the day before ``day``: what :func:`jobs.analytics.liveness.runs.agg_carried_runs` carries."""
    before = read_day_arrow(
        lake_dir, lake.NS_RUNS, day - dt.timedelta(days=1), ["stop_reason", "start_seq", "resolution_ms"]
    ).to_pylist()
    return any(r["stop_reason"] == "open" and r["start_seq"] is not None and r["resolution_ms"] is None for r in before)
