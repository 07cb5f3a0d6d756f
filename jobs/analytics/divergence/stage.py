"""The divergence stage: compare the name servers for a day and write ``ns_divergences`` and the
day's ``consistency`` findings."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import pandas as pd
from pyspark.sql import Row, SparkSession
from pyspark.sql import functions as F

from jobs import lake
from jobs.analytics.divergence.episodes import build_episodes, select_divergences
from jobs.analytics.divergence.facts import LIVE_WINDOW_COLUMNS, build_keyed_facts, select_observed_live_windows
from jobs.analytics.divergence.findings import (
    CATEGORY,
    agg_divergence_findings,
    agg_observed_broker_missing,
    select_report_rows,
)
from jobs.analytics.divergence.grace import Grace, agg_grace_inputs, derive_grace, grace_note, with_poll_interval
from jobs.analytics.divergence.span import Span
from jobs.analytics.divergence.unroutable import agg_unroutable_findings
from jobs.analytics.divergence.up_periods import agg_up_periods
from jobs.lake.days import read_or_empty, replace_day
from jobs.lake.findings import write_findings
from jobs.spark.frames import checkpoint_frame, release_frame
from common.config import Config
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
        findings_by_severity: ``ns_divergence`` findings written, per severity.
        report_df: pandas frame for the report (:func:`jobs.analytics.divergence.findings.select_report_rows`:
            ``ns_views`` as text, longest first, at most ``REPORT_ROWS`` rows).
        notes: lines for the report's headline (the grace used).
    """

    day: dt.date
    grace: Grace
    grace_ms: int
    episodes: int
    episodes_by_kind: dict[str, int] = field(default_factory=dict)
    findings_by_severity: dict[str, int] = field(default_factory=dict)
    report_df: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)


def resolve_grace(spark: SparkSession, lake_dir: str, day: dt.date, config: Config) -> Grace:
    """The day's grace (:func:`derive_grace`), reading the day's liveness windows and ``ns_start``
    events only when it is not configured, widened by the observed servers' longest poll interval
    (:func:`with_poll_interval`, from the day's ``ns_runs``)."""
    runs_df = read_or_empty(spark, lake_dir, lake.NS_RUNS, NS_RUNS_SCHEMA, where={"date": [day]})
    poll_ms = runs_df.agg(F.max("resolution_ms").alias("poll_ms")).first()["poll_ms"]  # one number
    return with_poll_interval(_base_grace(spark, lake_dir, day, config), poll_ms)


def _base_grace(spark: SparkSession, lake_dir: str, day: dt.date, config: Config) -> Grace:
    if config.audit.divergence_grace_ms is not None:
        return derive_grace(None, None, config)
    windows_df = read_or_empty(spark, lake_dir, lake.LIVENESS_WINDOWS, LIVENESS_WINDOWS_SCHEMA, where={"date": [day]})
    events_df = read_or_empty(spark, lake_dir, lake.EVENTS, EVENTS_TABLE_SCHEMA, where={"date": [day]})
    starts_df = events_df.where(F.col("type") == "ns_start").select("scan_interval_ms")
    row = agg_grace_inputs(windows_df, starts_df).first()  # one row of two numbers
    return derive_grace(row["heartbeat_period_ms"], row["scan_interval_ms"], config)


def run_divergence(spark: SparkSession, lake_dir: str, day: dt.date, config: Config) -> DivergenceResult:
    """Compare the name servers for ``day``: replaces the day in ``ns_divergences`` and the day's
    ``consistency`` findings.

    Reads ``topic_route_history``, ``broker_addr_history``, ``ns_runs`` (from the rebuild) and
    ``liveness_windows`` (from the liveness stage) of the day and the day before. Besides the
    episodes, a topic no live server routes any more is a ``topic_unroutable`` finding
    (:mod:`jobs.analytics.divergence.unroutable`).
    """
    grace = resolve_grace(spark, lake_dir, day, config)
    span = Span.of(day, grace.grace_ms)
    days = {"date": [day - dt.timedelta(days=1), day]}
    addr_df = read_or_empty(spark, lake_dir, lake.BROKER_ADDR_HISTORY, BROKER_ADDR_HISTORY_SCHEMA, where=days)
    state_df = read_or_empty(spark, lake_dir, lake.NS_STATE, NS_STATE_SCHEMA, where=days)
    windows_df = read_or_empty(spark, lake_dir, lake.LIVENESS_WINDOWS, LIVENESS_WINDOWS_SCHEMA, where=days)
    queue_df = read_or_empty(spark, lake_dir, lake.TOPIC_ROUTE_HISTORY, TOPIC_ROUTE_HISTORY_SCHEMA, where=days)
    keyed_df = build_keyed_facts(
        queue_df,
        addr_df,
        windows_df.select(*LIVE_WINDOW_COLUMNS).unionByName(select_observed_live_windows(addr_df, state_df)),
        span,
    )
    periods_df = agg_up_periods(read_or_empty(spark, lake_dir, lake.NS_RUNS, NS_RUNS_SCHEMA, where=days), span)
    # small (one row per episode) and read four times below: computed once, cut from its plan
    episodes_df = checkpoint_frame(build_episodes(keyed_df, periods_df, day, grace.grace_ms))
    try:
        replace_day(select_divergences(episodes_df, day), lake_dir, lake.NS_DIVERGENCES, day, NS_DIVERGENCES_SCHEMA,
                    few_rows=True)
        # a real server missing a broker a shadow name server has live (docs/audit.md, "Shadow name server")
        names_df = windows_df.groupBy("broker_addr").agg(F.max("broker_name").alias("broker_name"))
        observed_df = state_df.where(F.col("observed")).select("ns").distinct()
        findings_df = agg_divergence_findings(episodes_df, span, grace).unionByName(
            agg_observed_broker_missing(episodes_df, observed_df, names_df, span, grace)).unionByName(
            agg_unroutable_findings(queue_df, periods_df, span))  # a topic no live server routes
        write_findings(findings_df, lake_dir, day, CATEGORY)
        # one small row per (kind, critical): the stage's log line
        counts = episodes_df.groupBy("kind", "critical").count().collect()
        report_df = select_report_rows(episodes_df).toPandas()
    finally:
        release_frame(episodes_df)
    by_kind, by_severity = _count_episodes(counts)
    return DivergenceResult(day, grace, grace.grace_ms, sum(by_kind.values()), by_kind, by_severity, report_df,
                            [grace_note(grace)])


def _count_episodes(counts: list[Row]) -> tuple[dict[str, int], dict[str, int]]:
    """Episodes per kind and per severity from the (``kind``, ``critical``, ``count``) rows."""
    by_kind: dict[str, int] = {}
    by_severity: dict[str, int] = {}
    for row in counts:
        by_kind[row["kind"]] = by_kind.get(row["kind"], 0) + row["count"]
        severity = "critical" if row["critical"] else "warning"
        by_severity[severity] = by_severity.get(severity, 0) + row["count"]
    return by_kind, by_severity
