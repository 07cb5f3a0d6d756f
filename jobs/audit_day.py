"""The stages of one day's audit that produce its findings, each run through the caller's stage runner
(:func:`jobs.nightly_audit.run` times, logs and records them), and the day's ``running`` mark."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from common.config import Config

if TYPE_CHECKING:  # Spark is imported by the code that starts it
    from pyspark.sql import SparkSession

    from jobs.ingest.segments import SegmentFile

StageRunner = Callable[[str, Callable[[], Any]], Any]
"""Runs one named stage (``name``, the function doing it) and returns the stage's result."""


@dataclass(frozen=True)
class FindingStages:
    """The results of the stages the report reads: rebuild, liveness, divergence, distribution, incidents."""

    rebuilt: Any
    live: Any
    div: Any
    dist: Any
    linked: Any


def mark_running(spark: SparkSession, lake_dir: str, day: dt.date) -> None:
    """Record the day ``running`` in ``audit_runs`` and mark its previous report unfinished."""
    from jobs.lake import audit_runs
    from jobs.report import status as report_status

    # Not ok from before the first write until after the last: a run that dies in between leaves
    # the day marked unfinished (queries and the report say so) instead of a mix that says ok.
    audit_runs.record(spark, lake_dir, day, "running", [], {})
    report_status.mark_unfinished(
        lake_dir,
        day,
        f"The audit of {day} did not finish: this report is from an earlier "
        f"run and the lake's tables may not match it. Rerun nsaudit audit --date {day}.",
    )


def run_finding_stages(
    stage: StageRunner,
    spark: SparkSession,
    config: Config,
    events_dir: str,
    lake_dir: str,
    day: dt.date,
    files: list[SegmentFile],
) -> FindingStages:
    """The stages from ingest to incidents, in order, sharing the day's findings."""
    from jobs import snapshots
    from jobs.analytics.distribution import stage as distribution
    from jobs.analytics.divergence import stage as divergence
    from jobs.analytics.incidents import stage as incidents
    from jobs.analytics.liveness import stage as liveness
    from jobs.analytics.security import stage as security
    from jobs.ingest import stage as ingest
    from jobs.lake.findings import DayFindings
    from jobs.rebuild import stage as rebuild

    # every stage's findings, written once, with their incidents, by the incidents stage
    findings = DayFindings(day)
    try:
        stage("ingest", lambda: ingest.run_ingest(spark, events_dir, lake_dir, day, config, findings, files))
        rebuilt = stage("rebuild", lambda: rebuild.run_rebuild(spark, lake_dir, day, config))
        stage("snapshots", lambda: snapshots.run_snapshots(spark, lake_dir, day, config))
        live = stage("liveness", lambda: liveness.run_liveness(spark, lake_dir, day, config, findings))
        div = stage("divergence", lambda: divergence.run_divergence(spark, lake_dir, day, config, findings))
        dist = stage("distribution", lambda: distribution.run_distribution(spark, lake_dir, day, config, findings))
        stage("security", lambda: security.run_security(spark, lake_dir, day, config, findings))
        linked = stage("incidents", lambda: incidents.run_incidents(spark, lake_dir, day, config, findings))
    finally:
        findings.release()  # a stage failed before the incidents stage released them
    return FindingStages(rebuilt, live, div, dist, linked)
