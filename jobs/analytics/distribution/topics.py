"""Per (server, topic): the figures of ``topic_distribution``, aggregated over the segments on
which the topic's pieces do not change and only then exploded to the snapshot instants."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.analytics.distribution.queue_data import PIECE_COLUMNS, count_if, segment_positions, sum_long
from jobs.lake.tables import RowExpansion
from jobs.snapshots import explode_pieces, position_expansion, snapshot_position, with_segments
from jobs.spark.frames import spread
from schemas.distribution import TOPIC_DISTRIBUTION_SCHEMA


def pieces_from_snapshots(snapshots_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """``route_snapshots`` rows as pieces of one instant each (see
    :func:`jobs.snapshots.agg_route_pieces`)."""
    pos = snapshot_position(F.col("snapshot_ts"), day, snapshot_interval_ms)
    return snapshots_df.select(*PIECE_COLUMNS, pos.alias("first_pos"), pos.alias("last_pos"))


def agg_topic_segments(flagged_df: DataFrame) -> DataFrame:
    """Per (ns, topic) and run of instant positions (``first_pos`` to ``last_pos``) over which the
    topic's QueueData stay the same on that server: ``TOPIC_DISTRIBUTION_SCHEMA`` columns but
    ``date`` and ``snapshot_ts``, which hold at each of those instants.

    Aggregated per segment of the topic's pieces (:func:`jobs.snapshots.with_segments`): only counts and sums,
    so Spark aggregates in a hash table; which broker names a finding is about is looked up
    afterwards, for the findings only
    (:func:`jobs.analytics.distribution.exact.with_last_queue_datas`). :func:`agg_topic_stats`
    makes the instant rows.

    Args:
        flagged_df: :func:`jobs.analytics.distribution.queue_data.with_queue_flags` pieces.
    """
    keys = ["ns", "topic"]
    segments_df = (
        with_segments(flagged_df, keys)
        .groupBy(*keys, *segment_positions())
        .agg(
            F.count(F.lit(1)).cast("int").alias("brokers"),
            count_if(F.col("has_master")).alias("brokers_with_master"),
            count_if(F.col("writable")).alias("writable_brokers"),
            count_if(F.col("readable")).alias("readable_brokers"),
            count_if(F.col("publish_queues") > 0).alias("publishing_brokers"),
            sum_long("read_queue_nums").alias("read_queues"),
            sum_long("write_queue_nums").alias("write_queues"),
            sum_long("publish_queues").alias("publish_queues"),
            sum_long("subscribe_queues").alias("subscribe_queues"),
            sum_long("unread_write_queues").alias("unread_write_queues"),
        )
    )
    # the segments are few, but their instant rows are many (a row per topic and server at each
    # instant): spread the segments, so that as many tasks make them
    return spread(segments_df, *keys)


def agg_topic_stats(topic_segments_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """Per (snapshot_ts, ns, topic): ``TOPIC_DISTRIBUTION_SCHEMA`` columns but ``date``, from
    :func:`agg_topic_segments` (a row per instant of each segment).

    Args:
        topic_segments_df: :func:`agg_topic_segments` rows.
        day: the UTC day.
        snapshot_interval_ms: spacing of the instants.
    """
    return explode_pieces(topic_segments_df, day, snapshot_interval_ms)


def agg_topic_distribution(topic_stats_df: DataFrame, day: dt.date) -> DataFrame:
    """``topic_distribution`` rows from :func:`agg_topic_stats`."""
    return topic_stats_df.withColumn("date", F.lit(day)).select(*TOPIC_DISTRIBUTION_SCHEMA.names)


def topic_distribution_expansion(day: dt.date, snapshot_interval_ms: int) -> RowExpansion:
    """How the write of ``topic_distribution`` makes its instant rows from
    :func:`agg_topic_segments` rows in the write tasks (many rows, never converted from the JVM's
    rows one by one; see :class:`jobs.lake.tables.RowExpansion`)."""
    return position_expansion(day, snapshot_interval_ms, TOPIC_DISTRIBUTION_SCHEMA.names)
