"""Gather the report's data from the lake: aggregate and cap in Spark, collect only small frames.

Each ``agg_*`` here ends at a bounded row count (a cap per server, cluster or table) before
``toPandas``: the report never pulls event-sized data to the driver. The day's small tables
(findings, liveness windows, divergence episodes) are read without Spark (:mod:`jobs.report.small`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

import pandas as pd
from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs import lake as lake_tables
from jobs.analytics.distribution import agg_end_of_day_distribution
from jobs.lake.days import day_rows, read_day_arrow
from jobs.lake.tables import read_table, table_exists
from jobs.report.incidents import INCIDENT_COLUMNS
from jobs.report.live import read_live_opens, with_seen_live
from jobs.report.render import ReportData, write_report
from jobs.report.small import FINDING_COLUMNS, read_report_rows, read_small
from jobs.storage import locations
from schemas.events import EVENTS_TABLE_SCHEMA
from schemas.incidents import INCIDENTS_SCHEMA
from schemas.routes import ROUTE_SNAPSHOTS_SCHEMA

HEATMAP_BROKERS = 40
HEATMAP_TOPICS = 60
INCIDENT_ROWS = 500


def _read_day(spark: SparkSession, lake: str, name: str, schema: T.StructType, day: dt.date) -> DataFrame | None:
    path = lake_tables.table_path(lake, name)
    if not table_exists(path):
        return None
    return read_table(spark, path, schema, where={"date": day})


def agg_heatmap_rows(cells_df: DataFrame, brokers: int = HEATMAP_BROKERS, topics: int = HEATMAP_TOPICS) -> DataFrame:
    """The cells of the busiest brokers and topics of each cluster.

    Args:
        cells_df: the end-of-day write queues per (cluster, broker name, topic),
            :func:`jobs.analytics.distribution.agg_end_of_day_distribution` (the largest any server reports;
            they normally agree, and divergence has its own plot).
    """
    broker_rank = (
        cells_df.groupBy("cluster", "broker_name")
        .agg(F.sum("write_queue_nums").alias("total"))
        .withColumn("r", F.row_number().over(Window.partitionBy("cluster").orderBy(F.desc("total"), "broker_name")))
        .filter(F.col("r") <= brokers)
    )
    topic_rank = (
        cells_df.groupBy("cluster", "topic")
        .agg(F.sum("write_queue_nums").alias("total"))
        .withColumn("r", F.row_number().over(Window.partitionBy("cluster").orderBy(F.desc("total"), "topic")))
        .filter(F.col("r") <= topics)
    )
    return (
        cells_df.join(broker_rank.select("cluster", "broker_name"), ["cluster", "broker_name"])
        .join(topic_rank.select("cluster", "topic"), ["cluster", "topic"])
        .select("cluster", "broker_name", "topic", "write_queue_nums")
    )


def select_incident_rows(incidents_df: DataFrame, limit: int = INCIDENT_ROWS) -> DataFrame:
    """The report's incidents (``INCIDENT_COLUMNS``): by severity, then impact (topics no server
    routed, topics producers could not write, share of clients exposed, write queues), then start;
    at most ``limit``."""
    rank = F.when(F.col("severity") == "critical", 0).when(F.col("severity") == "warning", 1).otherwise(2)
    return (
        incidents_df.orderBy(
            rank,
            F.col("topics_unroutable").desc(),
            F.col("topics_unwritable").desc(),
            F.col("client_share").desc(),
            F.col("write_queues_unwritable").desc(),
            "start_ts",
            "incident_id",
        )
        .limit(limit)
        .select(*INCIDENT_COLUMNS)
    )


def agg_headline(events_df: DataFrame | None, end_cells_df: DataFrame | None) -> dict[str, Any]:
    """Servers, brokers, events and topics at the end of the day, in one pass each (the headline's
    counts that need Spark: the events are event-sized; :func:`severity_counts` gives the others).

    ``end_cells_df``: the end-of-day cells (:func:`jobs.analytics.distribution.agg_end_of_day_distribution`),
    whose topics are ``topics_at_end``.
    """
    headline: dict[str, Any] = {}
    if events_df is not None:
        # One aggregate per (server, address) first: distinct counts straight over the events
        # would expand every event once per distinct count (about twice the time on 8.6 M events).
        per_addr_df = events_df.groupBy("ns", "broker_addr").agg(
            F.count(F.lit(1)).alias("events"), F.max(F.col("type") == "register").alias("registered")
        )
        row = per_addr_df.agg(
            F.countDistinct("ns").alias("servers"),
            F.countDistinct(F.when(F.col("registered"), F.col("broker_addr"))).alias("brokers_registered"),
            F.countDistinct("broker_addr").alias("broker_addresses"),
            F.coalesce(F.sum("events"), F.lit(0)).alias("events"),
        ).first()
        assert row is not None, "an aggregate without grouping has a row"
        headline.update(row.asDict())
    if end_cells_df is not None:
        topics = end_cells_df.agg(F.countDistinct("topic")).first()
        assert topics is not None, "an aggregate without grouping has a row"
        headline["topics_at_end"] = topics[0]
    return headline


def severity_counts(name: str, severities: Iterable[str]) -> dict[str, Any]:
    """``<name>_critical``, ``_warning``, ``_info`` and ``<name>_by_severity`` (every severity,
    0 when absent) of rows with these severities.

    Example:
        >>> severity_counts("incidents", ["info", "critical", "info"])["incidents_by_severity"]
        {'critical': 1, 'warning': 0, 'info': 2}
    """
    by_severity = {"critical": 0, "warning": 0, "info": 0}
    for severity in severities:
        by_severity[severity] += 1
    return {**{f"{name}_{k}": v for k, v in by_severity.items()}, f"{name}_by_severity": by_severity}


def _small_counts(lake: str, day: dt.date, finding_severities: list[str]) -> dict[str, Any]:
    """``quarantined_lines`` and findings (``finding_severities``, every one of the day's) and
    incidents by severity, read from the day's small tables in the driver."""
    return {
        "quarantined_lines": day_rows(lake, lake_tables.QUARANTINE, day),
        **severity_counts("findings", finding_severities),
        **severity_counts(
            "incidents", read_day_arrow(lake, lake_tables.INCIDENTS, day, ["severity"]).column(0).to_pylist()
        ),
    }


def collect_report_data(spark: SparkSession, lake: str, day: dt.date, *stage_results: Any) -> ReportData:
    """Read the day's tables and build :class:`ReportData` (small frames only)."""
    events_df = _read_day(spark, lake, lake_tables.EVENTS, EVENTS_TABLE_SCHEMA, day)
    snapshots_df = _read_day(spark, lake, lake_tables.ROUTE_SNAPSHOTS, ROUTE_SNAPSHOTS_SCHEMA, day)
    # the end-of-day instant only: a literal filter, pushed to the files
    end_cells_df = agg_end_of_day_distribution(snapshots_df, day) if snapshots_df is not None else None
    incidents_df = _read_day(spark, lake, lake_tables.INCIDENTS, INCIDENTS_SCHEMA, day)
    if incidents_df is not None:
        incidents_df = with_seen_live(incidents_df, read_live_opens(spark, lake, day))

    def small(df: DataFrame | None, columns: list[str]) -> pd.DataFrame:
        return df.toPandas() if df is not None else pd.DataFrame(columns=columns)

    notes: list[str] = []
    for result in stage_results:
        notes.extend(getattr(result, "notes", []) or [])
    # the counts of small tables are read back without Spark; the events' and the routes' need it
    # every finding of the day, read once: counted for the headline, then ordered and capped
    findings = read_small(lake, lake_tables.FINDINGS, day, FINDING_COLUMNS)
    headline = {**agg_headline(events_df, end_cells_df), **_small_counts(lake, day, list(findings["severity"]))}
    rows = read_report_rows(lake, day, findings)  # the small tables' rows, ordered and capped in the driver
    return ReportData(
        day=day,
        headline=headline,
        liveness=rows["liveness"],
        divergences=rows["divergences"],
        findings=rows["findings"],
        distribution=small(
            agg_heatmap_rows(end_cells_df) if end_cells_df is not None else None,
            ["cluster", "broker_name", "topic", "write_queue_nums"],
        ),
        notes=[str(n) for n in notes],
        incidents=small(select_incident_rows(incidents_df) if incidents_df is not None else None, INCIDENT_COLUMNS),
    )


def write_day_report(lake: str, data: ReportData) -> tuple[str, str]:
    """Write ``<lake>/reports/<date>/index.html`` and ``summary.json``."""
    return write_report(locations.join(lake, "reports", data.day.isoformat()), data)
