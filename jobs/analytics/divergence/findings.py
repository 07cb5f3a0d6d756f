"""The ``ns_divergence`` findings (category ``consistency``) and the report's rows of the episodes."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.analytics.divergence.grace import Grace
from jobs.analytics.divergence.kinds import BROKER_MISSING, QUEUE_DATA_MISMATCH, ROUTE_MISSING
from jobs.analytics.divergence.span import Span
from jobs.lake.findings import finding_columns

CATEGORY = "consistency"
FINDING_KIND = "ns_divergence"
REPORT_ROWS = 500
REPORT_COLUMNS = ("kind", "subject", "start_ts", "end_ts", "duration_ms", "ns_views")


def _subject() -> Column:
    """The topic (route_missing, queue_data_mismatch), broker address or broker name."""
    kind = F.col("kind")
    return (
        F.when(kind.isin(ROUTE_MISSING, QUEUE_DATA_MISMATCH), F.col("topic"))
        .when(kind == BROKER_MISSING, F.col("broker_addr"))
        .otherwise(F.col("broker_name"))
    )


def agg_divergence_findings(episodes_df: DataFrame, span: Span, grace: Grace) -> DataFrame:
    """One ``ns_divergence`` finding per episode: warning, critical when a route was missing on a
    majority of the up servers. ``detail``: kind, key, ns_views, majority, duration_ms, exposure,
    servers_wrong, servers_up, grace_ms (and how it was obtained), began_before_day,
    continues_next_day."""
    key = F.map_filter(
        F.create_map(F.lit("topic"), F.col("topic"), F.lit("broker_name"), F.col("broker_name"),
                     F.lit("broker_addr"), F.col("broker_addr")),
        lambda _, v: v.isNotNull(),
    )
    detail = F.struct(
        "kind",
        key.alias("key"),
        F.map_from_entries("views").alias("ns_views"),
        "majority",
        (F.col("end_ms") - F.col("start_ms")).alias("duration_ms"),
        "exposure",
        "servers_wrong",
        "servers_up",
        F.lit(grace.grace_ms).alias("grace_ms"),
        F.lit(grace.source).alias("grace_source"),
        "began_before_day",
        (F.col("end_ms") == span.day_end_ms).alias("continues_next_day"),
    )
    return episodes_df.select(
        *finding_columns(
            span.day, CATEGORY, FINDING_KIND,
            F.when(F.col("critical"), F.lit("critical")).otherwise(F.lit("warning")),
            _subject(), F.lit(None).cast(T.StringType()),
            F.timestamp_millis("start_ms"), F.timestamp_millis("end_ms"), detail,
        )
    )


def select_report_rows(episodes_df: DataFrame, limit: int = REPORT_ROWS) -> DataFrame:
    """The report's rows (:data:`REPORT_COLUMNS`), longest first, ``ns_views`` as
    ``ns-a=live, ns-b=absent``."""
    views_text = F.array_join(F.transform("views", lambda v: F.concat(v["ns"], F.lit("="), v["view"])), ", ")
    return (
        episodes_df.select(
            "kind", _subject().alias("subject"), F.timestamp_millis("start_ms").alias("start_ts"),
            F.timestamp_millis("end_ms").alias("end_ts"), (F.col("end_ms") - F.col("start_ms")).alias("duration_ms"),
            views_text.alias("ns_views"),
        )
        .orderBy(F.col("duration_ms").desc(), "kind", "subject", "start_ts")
        .limit(limit)
    )
