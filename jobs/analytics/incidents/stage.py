"""The incidents stage: the day's findings, of every stage, grouped by root cause.

Reads the day's ``findings`` (every category), ``broker_addr_history`` (which broker name an
address belongs to) and ``ns_runs`` (the servers of the day); writes ``incidents``
(:mod:`schemas.incidents`) and the day's ``findings`` again, each with its ``incident_id``. Runs
after every stage that writes findings and before the report.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from common.config import Config
from jobs import lake
from jobs.analytics.incidents.causes import (
    with_cause,
    with_detail_fields,
    with_restart_causes,
    with_servers,
    with_span_ms,
    with_unroutable_causes,
)
from jobs.analytics.incidents.grouping import INCIDENT_GAP_MS, agg_incidents, with_incident_ids
from jobs.lake.days import day_rows, read_day_arrow, read_or_empty, replace_day
from jobs.lake.findings import DayFindings
from jobs.spark.frames import checkpoint_frame, release_frame
from schemas.findings import FINDINGS_PARTITION_BY, FINDINGS_SCHEMA, SEVERITIES
from schemas.incidents import INCIDENTS_SCHEMA, PARTITION_BY
from schemas.routes import BROKER_ADDR_HISTORY_SCHEMA, NS_RUNS_SCHEMA


@dataclass(frozen=True)
class IncidentsResult:
    """What a day's incidents stage wrote.

    Attributes:
        day: the UTC day.
        findings: findings of the day, each now in one incident.
        incidents_by_severity: incidents per severity (every severity, 0 when none).
    """

    day: dt.date
    findings: int
    incidents_by_severity: dict[str, int] = field(default_factory=dict)

    def counts(self) -> dict[str, int]:
        """The integer figures, for the audit's stage log line."""
        return {
            "findings": self.findings,
            "incidents": sum(self.incidents_by_severity.values()),
            **{f"incidents_{s}": n for s, n in self.incidents_by_severity.items()},
        }


def link_findings(
    findings_df: DataFrame,
    addr_names_df: DataFrame,
    day: dt.date,
    snapshot_interval_ms: int,
    gap_ms: int = INCIDENT_GAP_MS,
) -> DataFrame:
    """The day's findings with what grouping needs (``family``, ``cause_key``, ``servers``,
    ``start_ms``, ``end_ms``, ``_d``) and their ``incident_id`` (see
    :func:`jobs.analytics.incidents.grouping.with_incident_ids`).

    Args:
        findings_df: ``findings`` rows of one day (``finding_id`` set).
        addr_names_df: ``broker_addr``, ``addr_broker_name``, one row per address.
        day: the UTC day.
        snapshot_interval_ms: the spacing of the instants the sampled findings were checked at.
        gap_ms: findings of one cause further apart than this are separate incidents.
    """
    return (
        findings_df.drop("incident_id")
        .transform(with_detail_fields)
        .transform(lambda df: with_cause(df, addr_names_df))
        .transform(with_servers)
        .transform(lambda df: with_span_ms(df, day, snapshot_interval_ms))
        .transform(lambda df: with_restart_causes(df, gap_ms))
        .transform(lambda df: with_unroutable_causes(df, gap_ms))
        .transform(lambda df: with_incident_ids(df, day, gap_ms))
    )


def agg_addr_names(broker_addr_df: DataFrame) -> DataFrame:
    """``broker_addr``, ``addr_broker_name``: the broker name each address of the day registered
    under last (a broker name per address)."""
    return broker_addr_df.groupBy("broker_addr").agg(F.max_by("broker_name", "valid_from_ts").alias("addr_broker_name"))


def agg_server_count(ns_runs_df: DataFrame, findings_df: DataFrame) -> DataFrame:
    """One row, ``n_servers``: servers up at some time of the day, or named by a finding (1 at least)."""
    servers_df = ns_runs_df.select("ns").unionByName(findings_df.where(F.col("ns").isNotNull()).select("ns"))
    return servers_df.agg(F.greatest(F.count_distinct("ns"), F.lit(1)).alias("n_servers"))


def run_incidents(
    spark: SparkSession, lake_dir: str, day: dt.date, config: Config, findings: DayFindings | None = None
) -> IncidentsResult:
    """Group the day's findings into incidents; writes ``incidents`` and the day's ``findings``
    with their ``incident_id`` (both replaced, so a rerun gives the same rows).

    Args:
        findings: every stage's findings of the day, gathered by the nightly audit and written
            here for the first time (then released); None: the day's ``findings`` in the lake.
    """
    today = {"date": day}
    # a row per finding, read by most steps of the linking: one scan of their rows, not of every
    # stage's (or the table's files) per step
    try:
        findings_df = checkpoint_frame(
            read_or_empty(spark, lake_dir, lake.FINDINGS, FINDINGS_SCHEMA, where=today)
            if findings is None
            else findings.frame(spark)
        )
    finally:
        if findings is not None:
            findings.release()  # every stage's intermediates: their findings are in the checkpoint now
    addr_names_df = agg_addr_names(
        read_or_empty(spark, lake_dir, lake.BROKER_ADDR_HISTORY, BROKER_ADDR_HISTORY_SCHEMA, where=today)
    )
    try:
        # small (a row per finding), read by both writes; and it must be read before findings is replaced
        linked_df = checkpoint_frame(link_findings(findings_df, addr_names_df, day, config.audit.snapshot_interval_ms))
    finally:
        release_frame(findings_df)
    try:
        incidents_df = agg_incidents(
            linked_df,
            agg_server_count(read_or_empty(spark, lake_dir, lake.NS_RUNS, NS_RUNS_SCHEMA, where=today), linked_df),
            day,
        )
        replace_day(
            incidents_df, lake_dir, lake.INCIDENTS, day, INCIDENTS_SCHEMA, partition_by=PARTITION_BY, few_rows=True
        )
        replace_day(
            linked_df.select(*FINDINGS_SCHEMA.names),
            lake_dir,
            lake.FINDINGS,
            day,
            FINDINGS_SCHEMA,
            partition_by=FINDINGS_PARTITION_BY,
            few_rows=True,
        )
    finally:
        release_frame(linked_df)
    by_severity = {s: 0 for s in SEVERITIES}
    for severity in read_day_arrow(lake_dir, lake.INCIDENTS, day, ["severity"]).column(0).to_pylist():
        by_severity[severity] += 1
    return IncidentsResult(day, day_rows(lake_dir, lake.FINDINGS, day), by_severity)
