"""The divergence stage: compare the name servers for a day and write ``ns_divergences`` and the
day's ``consistency`` findings."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from common.config import Config
from jobs import lake
from jobs.analytics.divergence.episodes import build_episodes, select_divergences
from jobs.analytics.divergence.facts import LIVE_WINDOW_COLUMNS, build_keyed_facts, select_observed_live_windows
from jobs.analytics.divergence.findings import CATEGORY, agg_divergence_findings, agg_observed_broker_missing
from jobs.analytics.divergence.grace import Grace, agg_grace_inputs, derive_grace, grace_note, with_poll_interval
from jobs.analytics.divergence.span import Span
from jobs.analytics.divergence.unroutable import agg_unroutable_findings
from jobs.analytics.divergence.up_periods import agg_up_periods
from jobs.lake.days import read_day_arrow, read_or_empty, replace_day
from jobs.lake.findings import DayFindings
from jobs.spark.frames import CachedFrames, checkpoint_frame
from schemas.divergence import NS_DIVERGENCES_SCHEMA
from schemas.events import EVENTS_TABLE_SCHEMA
from schemas.liveness import LIVENESS_WINDOWS_SCHEMA
from schemas.routes import BROKER_ADDR_HISTORY_SCHEMA, NS_RUNS_SCHEMA, NS_STATE_SCHEMA, TOPIC_ROUTE_HISTORY_SCHEMA


@dataclass(frozen=True)
class DivergenceResult:
    """What a day's divergence stage wrote.

    Attributes:
        day: the UTC day.
        grace: the grace used and how it was obtained.
        grace_ms: ``grace.grace_ms`` (a number for the stage's log line).
        episodes: ``ns_divergences`` rows written.
        episodes_by_kind: of those, per kind (kinds with none are absent).
        notes: lines for the report's headline (the grace used).
    """

    day: dt.date
    grace: Grace
    grace_ms: int
    episodes: int
    episodes_by_kind: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def resolve_grace(spark: SparkSession, lake_dir: str, day: dt.date, config: Config) -> Grace:
    """The day's grace (:func:`derive_grace`), reading the day's liveness windows and ``ns_start``
    events only when it is not configured, widened by the observed servers' longest poll interval
    (:func:`with_poll_interval`, from the day's ``ns_runs``)."""
    polls = [
        ms
        for ms in read_day_arrow(lake_dir, lake.NS_RUNS, day, ["resolution_ms"]).column(0).to_pylist()
        if ms is not None
    ]
    poll_ms = max(polls) if polls else None
    return with_poll_interval(_base_grace(spark, lake_dir, day, config), poll_ms)


def _base_grace(spark: SparkSession, lake_dir: str, day: dt.date, config: Config) -> Grace:
    if config.audit.divergence_grace_ms is not None:
        return derive_grace(None, None, config)
    windows_df = read_or_empty(spark, lake_dir, lake.LIVENESS_WINDOWS, LIVENESS_WINDOWS_SCHEMA, where={"date": [day]})
    events_df = read_or_empty(spark, lake_dir, lake.EVENTS, EVENTS_TABLE_SCHEMA, where={"date": [day]})
    starts_df = events_df.where(F.col("type") == "ns_start").select("scan_interval_ms")
    row = agg_grace_inputs(windows_df, starts_df).first()  # one row of two numbers
    assert row is not None, "an aggregate without grouping has a row"
    return derive_grace(row["heartbeat_period_ms"], row["scan_interval_ms"], config)


def run_divergence(
    spark: SparkSession, lake_dir: str, day: dt.date, config: Config, findings: DayFindings | None = None
) -> DivergenceResult:
    """Compare the name servers for ``day``: replaces the day in ``ns_divergences`` and the day's
    ``consistency`` findings.

    Reads ``topic_route_history``, ``broker_addr_history``, ``ns_runs`` (from the rebuild) and
    ``liveness_windows`` (from the liveness stage) of the day and the day before. Besides the
    episodes, a topic no live server routes any more is a ``topic_unroutable`` finding
    (:mod:`jobs.analytics.divergence.unroutable`).

    Args:
        findings: the audit's findings of the day, which this stage's join (written by the
            incidents stage); None: they are written now.
    """
    grace = resolve_grace(spark, lake_dir, day, config)
    span = Span.of(day, grace.grace_ms)
    days = {"date": [day - dt.timedelta(days=1), day]}
    addr_df = read_or_empty(spark, lake_dir, lake.BROKER_ADDR_HISTORY, BROKER_ADDR_HISTORY_SCHEMA, where=days)
    state_df = read_or_empty(spark, lake_dir, lake.NS_STATE, NS_STATE_SCHEMA, where=days)
    windows_df = read_or_empty(spark, lake_dir, lake.LIVENESS_WINDOWS, LIVENESS_WINDOWS_SCHEMA, where=days)
    queue_df = read_or_empty(spark, lake_dir, lake.TOPIC_ROUTE_HISTORY, TOPIC_ROUTE_HISTORY_SCHEMA, where=days)
    keyed_df = build_keyed_facts(queue_df, addr_df, _live_windows(windows_df, addr_df, state_df), span)
    periods_df = agg_up_periods(read_or_empty(spark, lake_dir, lake.NS_RUNS, NS_RUNS_SCHEMA, where=days), span)
    # small (one row per episode) and read by the table and the findings: computed once, cut from its plan
    episodes_df = checkpoint_frame(build_episodes(keyed_df, periods_df, day, grace.grace_ms))
    kept = CachedFrames(cached=(episodes_df,))
    own = findings is None
    findings = findings if findings is not None else DayFindings(day)
    try:
        replace_day(
            select_divergences(episodes_df, day),
            lake_dir,
            lake.NS_DIVERGENCES,
            day,
            NS_DIVERGENCES_SCHEMA,
            few_rows=True,
        )
        findings.add(
            CATEGORY,
            agg_divergence_findings(episodes_df, span, grace)
            .unionByName(_observed_broker_missing(episodes_df, windows_df, state_df, span, grace))
            .unionByName(agg_unroutable_findings(queue_df, periods_df, span)),
            keep=kept,
        )  # a topic no live server routes
        if own:
            findings.write_category(lake_dir, CATEGORY)
    finally:
        if own:
            kept.release()
    by_kind: dict[str, int] = {}
    for kind in read_day_arrow(lake_dir, lake.NS_DIVERGENCES, day, ["kind"]).column(0).to_pylist():
        by_kind[kind] = by_kind.get(kind, 0) + 1
    return DivergenceResult(
        day, grace, grace.grace_ms, sum(by_kind.values()), dict(sorted(by_kind.items())), [grace_note(grace)]
    )


def _live_windows(windows_df: DataFrame, addr_df: DataFrame, state_df: DataFrame) -> DataFrame:
    """The brokers' live windows: the liveness stage's, and those the observed servers' cluster info gives."""
    return windows_df.select(*LIVE_WINDOW_COLUMNS).unionByName(select_observed_live_windows(addr_df, state_df))


def _observed_broker_missing(
    episodes_df: DataFrame, windows_df: DataFrame, state_df: DataFrame, span: Span, grace: Grace
) -> DataFrame:
    """The findings of a real server missing a broker a shadow name server has live (docs/audit.md,
    "Shadow name server")."""
    names_df = windows_df.groupBy("broker_addr").agg(F.max("broker_name").alias("broker_name"))
    observed_df = state_df.where(F.col("observed")).select("ns").distinct()
    return agg_observed_broker_missing(episodes_df, observed_df, names_df, span, grace)
