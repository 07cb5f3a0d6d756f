"""Episodes: touching disagreeing segments of a key (gaps and islands, a window per key).

How episodes are formed, what their views, ``servers_wrong`` / ``servers_up`` and ``exposure``
are, and how an episode across midnight is judged against the grace: docs/audit.md,
"Divergence".
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.analytics.divergence.kinds import KEY_COLUMNS
from jobs.analytics.divergence.segments import select_disagreeing_segments
from jobs.analytics.divergence.span import Span


def agg_episodes(disagree_df: DataFrame, span: Span, grace_ms: int) -> DataFrame:
    """Merge touching disagreeing segments into episodes longer than the grace that reach into the
    day (:data:`EPISODE_COLUMNS`).

    ``views``, ``majority``, ``servers_wrong`` and ``servers_up`` are those of the longest stretch
    (docs/audit.md, "Divergence"); ``start_ms`` is cut to 00:00 for an episode that began the day before
    (``began_before_day``), while the grace is judged on its whole length within the span.

    Example:
        Segments [0, 10 s) and [10 s, 50 s) disagreeing, [50 s, 60 s) agreeing, [60 s, 70 s)
        disagreeing, grace 40 s: one episode [0, 50 s); [60 s, 70 s) is too short.
    """
    stretches_df = agg_stretches(disagree_df)
    # longest stretch; among equals the earliest
    rank = F.struct((F.col("_to") - F.col("_from")).alias("len"), (-F.col("_from")).alias("early"))
    stretch = F.struct("views", "majority", "servers_wrong", "servers_up")
    return (
        stretches_df.groupBy(*KEY_COLUMNS, "_ep")
        .agg(
            F.min("_from").alias("_start"),
            F.max("_to").alias("end_ms"),
            F.max_by(stretch, rank).alias("_longest"),
            F.round(F.sum("exposure"), 3).alias("exposure"),
            F.max("critical").alias("critical"),
        )
        .where((F.col("end_ms") - F.col("_start") > grace_ms) & (F.col("end_ms") > span.day_start_ms))
        .select(
            *KEY_COLUMNS,
            F.greatest(F.col("_start"), F.lit(span.day_start_ms)).alias("start_ms"),
            "end_ms",
            F.col("_longest.views").alias("views"),
            F.col("_longest.majority").alias("majority"),
            F.col("_longest.servers_wrong").alias("servers_wrong"),
            F.col("_longest.servers_up").alias("servers_up"),
            "exposure",
            "critical",
            (F.col("_start") < span.day_start_ms).alias("began_before_day"),
        )
    )


def agg_stretches(disagree_df: DataFrame) -> DataFrame:
    """Disagreeing segments merged into stretches: per key, ``_ep`` numbers its episodes
    (touching segments) and ``_st`` its stretches (same views and same up servers), with each
    stretch's ``_from``, ``_to``, views, summed ``exposure`` and ``critical``."""
    by_key = Window.partitionBy("kind", "key").orderBy("seg_from")
    upto = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    prev_to = F.lag("seg_to").over(by_key)
    new_episode = prev_to.isNull() | (prev_to != F.col("seg_from"))
    new_stretch = (
        new_episode
        | (F.lag("views").over(by_key) != F.col("views"))
        | (F.lag("servers_up").over(by_key) != F.col("servers_up"))
    )
    return (
        disagree_df.withColumn("_new_ep", new_episode.cast(T.IntegerType()))
        .withColumn("_new_st", new_stretch.cast(T.IntegerType()))
        .withColumn("_ep", F.sum("_new_ep").over(upto))
        .withColumn("_st", F.sum("_new_st").over(upto))
        .groupBy(*KEY_COLUMNS, "_ep", "_st")
        .agg(
            F.min("seg_from").alias("_from"),
            F.max("seg_to").alias("_to"),
            F.first("views").alias("views"),
            F.first("majority").alias("majority"),
            F.first("servers_wrong").alias("servers_wrong"),
            F.first("servers_up").alias("servers_up"),
            F.sum("exposure").alias("exposure"),
            F.max("critical").alias("critical"),
        )
    )


def build_episodes(keyed_df: DataFrame, periods_df: DataFrame, day: dt.date, grace_ms: int) -> DataFrame:
    """Segments and episodes for one day (:data:`EPISODE_COLUMNS`).

    Args:
        keyed_df: :func:`jobs.analytics.divergence.facts.build_keyed_facts` over
            :meth:`Span.of` ``(day, grace_ms)``.
        periods_df: :func:`jobs.analytics.divergence.up_periods.agg_up_periods` over the same span.
        day: the UTC day.
        grace_ms: disagreements lasting at most this long are not episodes.
    """
    span = Span.of(day, grace_ms)
    return agg_episodes(select_disagreeing_segments(keyed_df, periods_df, span), span, grace_ms)


def select_divergences(episodes_df: DataFrame, day: dt.date) -> DataFrame:
    """``ns_divergences`` rows (:data:`NS_DIVERGENCES_SCHEMA`) of the episodes."""
    return episodes_df.select(
        F.lit(day).alias("date"),
        "kind",
        "topic",
        "broker_name",
        "broker_addr",
        F.timestamp_millis("start_ms").alias("start_ts"),
        F.timestamp_millis("end_ms").alias("end_ts"),
        (F.col("end_ms") - F.col("start_ms")).alias("duration_ms"),
        F.map_from_entries("views").alias("ns_views"),
        F.col("servers_wrong").cast(T.IntegerType()).alias("servers_wrong"),
        F.col("servers_up").cast(T.IntegerType()).alias("servers_up"),
        F.col("exposure").cast(T.DoubleType()).alias("exposure"),
    )
