"""The ``ns_divergence`` findings (category ``consistency``) and the report's rows of the episodes."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.analytics.divergence.grace import Grace
from jobs.analytics.divergence.kinds import ABSENT, BROKER_MISSING, QUEUE_DATA_MISMATCH, ROUTE_MISSING
from jobs.analytics.divergence.span import Span
from jobs.lake.findings import finding_columns
from jobs.spark.profile import broadcast

CATEGORY = "consistency"
FINDING_KIND = "ns_divergence"


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
        F.create_map(
            F.lit("topic"),
            F.col("topic"),
            F.lit("broker_name"),
            F.col("broker_name"),
            F.lit("broker_addr"),
            F.col("broker_addr"),
        ),
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
            span.day,
            CATEGORY,
            FINDING_KIND,
            F.when(F.col("critical"), F.lit("critical")).otherwise(F.lit("warning")),
            _subject(),
            F.lit(None).cast(T.StringType()),
            F.timestamp_millis("start_ms"),
            F.timestamp_millis("end_ms"),
            detail,
        )
    )


OBSERVED_BROKER_MISSING = "observed_broker_missing"


def agg_observed_broker_missing(
    episodes_df: DataFrame, observed_df: DataFrame, names_df: DataFrame, span: Span, grace: Grace
) -> DataFrame:
    """One ``observed_broker_missing`` finding per observed server that is ``absent`` in a
    ``broker_missing`` episode in which a server of nsaudit's own (a shadow name server the brokers
    register with) has the address live: the broker's registrations reach the shadow but not that
    real server (its ``namesrvAddr`` lacks the server, or the path to it is cut). The episode's
    views are those of its longest stretch; it lasted longer than the grace, which includes one
    poll interval.

    Args:
        episodes_df: the day's episodes (``EPISODE_COLUMNS``).
        observed_df: ``ns`` of the observed servers.
        names_df: ``broker_addr``, ``broker_name`` of the addresses in the day's liveness windows.
    """
    observed_ns = F.col("observed_ns")
    shadows = F.transform(
        F.filter("views", lambda v: (v["view"] == "live") & ~F.array_contains(observed_ns, v["ns"])), lambda v: v["ns"]
    )
    missing = F.filter("views", lambda v: (v["view"] == ABSENT) & F.array_contains(observed_ns, v["ns"]))
    detail = F.struct(
        "broker_addr",
        "broker_name",
        F.col("_shadows").alias("shadow_servers"),
        (F.col("end_ms") - F.col("start_ms")).alias("duration_ms"),
        F.lit(grace.grace_ms).alias("grace_ms"),
        "began_before_day",
        (F.col("end_ms") == span.day_end_ms).alias("continues_next_day"),
    )
    return (
        episodes_df.where(F.col("kind") == BROKER_MISSING)
        .drop("broker_name")
        .crossJoin(broadcast(observed_df.agg(F.collect_set("ns").alias("observed_ns"))))
        .join(broadcast(names_df), "broker_addr", "left")
        .withColumn("_shadows", F.array_sort(shadows))
        .where(F.size("_shadows") > 0)
        .select("*", F.explode(missing).alias("_missing"))
        .select(
            *finding_columns(
                span.day,
                CATEGORY,
                OBSERVED_BROKER_MISSING,
                "warning",
                F.coalesce("broker_name", "broker_addr"),
                F.col("_missing.ns"),
                F.timestamp_millis("start_ms"),
                F.timestamp_millis("end_ms"),
                detail,
            )
        )
    )
