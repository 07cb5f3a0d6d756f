"""Per (snapshot instant, server, broker group): the figures of ``queue_distribution``, with its
cluster's imbalance. Groups without topics and cluster sets come from ``broker_addr_history``."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from jobs.analytics.distribution.queue_data import count_if, segment_positions, sum_long
from jobs.snapshots import explode_pieces, with_segments
from nameserver.model import MASTER_ID
from schemas.distribution import QUEUE_DISTRIBUTION_SCHEMA


def agg_group_totals(flagged_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """Per (snapshot_ts, ns, broker_name) with QueueData: the group's topic and queue totals, its
    ``cluster`` and, from the snapshot's BrokerData, ``queue_broker_addrs`` (number of entries,
    0 without BrokerData) and ``queue_has_master``.

    Aggregated per segment of the group's pieces (:func:`jobs.snapshots.with_segments`), then exploded to the
    segment's instants.
    """
    # cluster is the BrokerData's, one per group at an instant: as a key it splits nothing, and
    # it keeps every aggregate numeric (hash aggregation, no sort)
    keys = ["ns", "broker_name", "cluster"]
    segments_df = (
        with_segments(flagged_df, keys)
        .groupBy(*keys, *segment_positions())
        .agg(
            F.max(F.coalesce(F.size("broker_addrs"), F.lit(0))).alias("queue_broker_addrs"),
            F.max("has_master").alias("queue_has_master"),
            F.count(F.lit(1)).cast("int").alias("topics"),
            count_if(F.col("writable")).alias("writable_topics"),
            count_if(F.col("readable")).alias("readable_topics"),
            sum_long("read_queue_nums").alias("read_queues"),
            sum_long("write_queue_nums").alias("write_queues"),
            sum_long("publish_queues").alias("publish_queues"),
            sum_long("subscribe_queues").alias("subscribe_queues"),
            sum_long("unread_write_queues").alias("unread_write_queues"),
        )
    )
    return explode_pieces(segments_df, day, snapshot_interval_ms)


def agg_broker_groups(broker_data_runs_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """Per (snapshot_ts, ns, broker_name) with a BrokerData: ``broker_cluster``, ``broker_addrs``
    (entries of ``brokerAddrs``) and ``has_master`` (one of them is id 0).

    Args:
        broker_data_runs_df: :func:`jobs.snapshots.agg_broker_data_runs` (only the runs with a
            BrokerData are exploded to their instants).
        day: the UTC day.
        snapshot_interval_ms: spacing of the instants.
    """
    return explode_pieces(
        broker_data_runs_df.where(F.col("broker_addrs").isNotNull()).select(
            "ns",
            "broker_name",
            F.col("cluster").alias("broker_cluster"),
            F.size("broker_addrs").alias("broker_addrs"),
            F.map_contains_key("broker_addrs", F.lit(MASTER_ID).cast("long")).alias("has_master"),
            "first_pos",
            "last_pos",
        ),
        day,
        snapshot_interval_ms,
    )


def with_cluster_stats(groups_df: DataFrame) -> DataFrame:
    """Add the ``cluster_*`` columns and ``write_queue_share`` (null where ``cluster`` is null)."""
    w = Window.partitionBy("snapshot_ts", "ns", "cluster")
    known = F.col("cluster").isNotNull()
    queues = F.col("write_queues").cast("double")
    # From whole-number sums, so the figures do not depend on the order Spark meets the rows in
    # (a floating-point stddev_pop does, in its last bits): cv = sqrt(n * sum(x^2) - sum(x)^2) / sum(x).
    n = F.count(F.lit(1)).over(w)
    total = F.sum("write_queues").over(w)
    squares = F.sum(F.col("write_queues").cast("long") * F.col("write_queues")).over(w)
    mean = total.cast("double") / n
    spread = F.sqrt((n * squares - total * total).cast("double"))
    return (
        groups_df.withColumn("cluster_groups", F.when(known, n.cast("int")))
        .withColumn("cluster_write_queues", F.when(known, total))
        .withColumn("cluster_write_queues_mean", F.when(known, mean))
        # mean 0 (no write queue in the cluster): no ratio; try_divide keeps ANSI mode quiet
        .withColumn("cluster_write_queues_cv", F.when(known & (mean > 0), F.try_divide(spread, total.cast("double"))))
        .withColumn(
            "cluster_write_queues_max_over_mean",
            F.when(known & (mean > 0), F.try_divide(F.max("write_queues").over(w).cast("double"), mean)),
        )
        .withColumn("write_queue_share", F.when(known & (total > 0), F.try_divide(queues, total.cast("double"))))
    )


def agg_group_rows(group_totals_df: DataFrame, broker_groups_df: DataFrame, day: dt.date) -> DataFrame:
    """Every broker group with a BrokerData or a QueueData at each instant, with its totals and its
    cluster's imbalance: ``QUEUE_DISTRIBUTION_SCHEMA`` columns.

    Groups with a BrokerData and no topic count in their cluster with 0 queues; QueueData without
    BrokerData gets ``cluster`` null (and no cluster statistics).
    """
    zero_int, zero_long = F.lit(0), F.lit(0).cast("long")
    gt, bg = group_totals_df.alias("gt"), broker_groups_df.alias("bg")
    joined = gt.join(bg, ["snapshot_ts", "ns", "broker_name"], "full_outer")
    # Both sides come from the same broker_addr_history; the snapshot's copy covers a caller that
    # passes no history.
    return joined.select(
        F.lit(day).alias("date"),
        "snapshot_ts",
        "ns",
        F.coalesce(F.col("broker_cluster"), F.col("cluster")).alias("cluster"),
        "broker_name",
        F.coalesce(F.col("bg.broker_addrs"), F.col("queue_broker_addrs"), zero_int).alias("broker_addrs"),
        F.coalesce(F.col("bg.has_master"), F.col("queue_has_master"), F.lit(False)).alias("has_master"),
        *[F.coalesce(F.col(c), zero_int).alias(c) for c in ("topics", "writable_topics", "readable_topics")],
        *[
            F.coalesce(F.col(c), zero_long).alias(c)
            for c in ("read_queues", "write_queues", "publish_queues", "subscribe_queues", "unread_write_queues")
        ],
    ).transform(with_cluster_stats)


def agg_queue_distribution(group_rows_df: DataFrame) -> DataFrame:
    """``queue_distribution`` rows from :func:`agg_group_rows`."""
    return group_rows_df.select(*QUEUE_DISTRIBUTION_SCHEMA.names)
