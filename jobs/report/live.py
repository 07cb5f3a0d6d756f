"""When each incident was first seen live: the ``live_incident`` events ``nsaudit collect`` wrote
(docs/collect.md, "Live incidents") matched to the day's incidents.

A live incident is the same one when it has the incident's subject and began no earlier than the
nightly grouping gap before the incident's start and no later than its end (the live judgement
groups findings as the incidents stage does, so its start is the incident's, give or take what
the day boundary cuts). Both sides are small: one row per incident, one per live incident.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from jobs import lake as lake_tables
from jobs.analytics.incidents.grouping import INCIDENT_GAP_MS
from jobs.lake.tables import read_table, table_exists
from jobs.spark.profile import broadcast
from schemas.events import EVENTS_TABLE_SCHEMA


def read_live_opens(spark: SparkSession, lake: str, day: dt.date) -> DataFrame | None:
    """``subject``, ``live_start_ms``, ``seen_ms``: the live incidents opened on the day or the day
    before (one held open across midnight was opened then); None without an ``events`` table."""
    path = lake_tables.table_path(lake, lake_tables.EVENTS)
    if not table_exists(path):
        return None
    events_df = read_table(spark, path, EVENTS_TABLE_SCHEMA, where={"date": [day - dt.timedelta(days=1), day]})
    return events_df.where((F.col("type") == "live_incident") & (F.col("incident_state") == "open")).select(
        "subject", (F.col("ts_ms") - F.col("incident_ms")).alias("live_start_ms"), F.col("ts_ms").alias("seen_ms")
    )


def with_seen_live(incidents_df: DataFrame, opens_df: DataFrame | None, gap_ms: int = INCIDENT_GAP_MS) -> DataFrame:
    """Add ``seen_live_ts``: when ``nsaudit collect`` first opened a live incident of the same
    subject that began from ``gap_ms`` before the incident's start to its end; null when none did
    (no collector, or what only the whole day shows)."""
    if opens_df is None:
        return incidents_df.withColumn("seen_live_ts", F.lit(None).cast("timestamp"))
    opens = broadcast(opens_df.alias("o"))
    match = (
        (F.col("i.subject") == F.col("o.subject"))
        & (F.col("o.live_start_ms") >= F.unix_millis("i.start_ts") - gap_ms)
        & (F.col("o.live_start_ms") <= F.unix_millis("i.end_ts"))
    )
    seen_df = (
        incidents_df.select("incident_id", "subject", "start_ts", "end_ts")
        .alias("i")
        .join(opens, match)
        .groupBy("i.incident_id")
        .agg(F.min("o.seen_ms").alias("_seen_ms"))
    )
    return (
        incidents_df.join(seen_df, "incident_id", "left")
        .withColumn("seen_live_ts", F.timestamp_millis("_seen_ms"))
        .drop("_seen_ms")
    )
