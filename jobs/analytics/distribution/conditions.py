"""The per-instant conditions of the ``distribution`` findings (:mod:`jobs.analytics.distribution.kinds`)
but the exact ones (:mod:`jobs.analytics.distribution.exact`), and what their runs' details add at
the run's last instant.

Section and scenario labels (§3, W21) are those of docs/nameserver-semantics.md.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.analytics.distribution.moves import SKEW_PLAN_TYPE, suggest_moves
from jobs.analytics.distribution.params import DistributionParams
from jobs.snapshots import with_snapshot_ts
from jobs.spark.profile import broadcast


def filter_queue_skew(group_rows_df: DataFrame, params: DistributionParams) -> DataFrame:
    """``queue_skew`` instants: a cluster of two or more groups whose write queues per group exceed
    either threshold (equal to a threshold is within it)."""
    skewed = (F.col("cluster_groups") >= 2) & (
        (F.col("cluster_write_queues_cv") > params.queue_skew_cv)
        | (F.col("cluster_write_queues_max_over_mean") > params.queue_skew_max_over_mean)
    )
    return (
        group_rows_df.where(skewed)
        .groupBy("ns", "cluster", "snapshot_ts")
        .agg(
            F.first("cluster_groups").alias("groups"),
            F.first("cluster_write_queues").alias("write_queues"),
            F.first("cluster_write_queues_mean").alias("mean"),
            F.first("cluster_write_queues_cv").alias("cv"),
            F.first("cluster_write_queues_max_over_mean").alias("max_over_mean"),
            F.map_from_entries(F.array_sort(F.collect_list(F.struct("broker_name", "write_queues")))).alias(
                "write_queues_by_broker"
            ),
        )
        .select(
            "ns",
            F.col("cluster").alias("subject"),
            "snapshot_ts",
            F.struct(
                "groups",
                "write_queues",
                "mean",
                "cv",
                "max_over_mean",
                F.lit(params.queue_skew_cv).alias("cv_threshold"),
                F.lit(params.queue_skew_max_over_mean).alias("max_over_mean_threshold"),
                "write_queues_by_broker",
            ).alias("detail"),
        )
    )


def with_skew_plan(runs_df: DataFrame, params: DistributionParams) -> DataFrame:
    """Add :func:`jobs.analytics.distribution.moves.suggest_moves` of each ``queue_skew`` run's
    last instant to its ``detail``."""
    cv_max, ratio_max = params.queue_skew_cv, params.queue_skew_max_over_mean

    @F.udf(SKEW_PLAN_TYPE)
    def plan(by_broker: dict[str, int]) -> dict[str, Any]:
        return suggest_moves(by_broker or {}, cv_max, ratio_max)

    return (
        runs_df.withColumn("_plan", plan(F.col("detail.write_queues_by_broker")))
        .withColumn("detail", F.struct("detail.*", "_plan.*"))
        .drop("_plan")
    )


def filter_queue_data_without_broker(group_rows_df: DataFrame) -> DataFrame:
    """``queue_data_without_broker`` instants: QueueData of a broker name with no BrokerData."""
    return group_rows_df.where((F.col("broker_addrs") == 0) & (F.col("topics") > 0)).select(
        "ns",
        F.col("broker_name").alias("subject"),
        "snapshot_ts",
        F.struct("topics", "read_queues", "write_queues", "subscribe_queues").alias("detail"),
    )


def _with_several(history_df: DataFrame, key: str, value: str) -> DataFrame:
    """The history rows of the (ns, ``key``) that had more than one ``value`` during the day: the
    only ones that can break "one value at a time", so only they are exploded to instants."""
    keys_df = history_df.groupBy("ns", key).agg(F.countDistinct(value).alias("_values")).where(F.col("_values") > 1)
    return history_df.join(broadcast(keys_df.drop("_values")), ["ns", key], "left_semi")


def filter_broker_in_two_clusters(
    cluster_df: DataFrame, broker_groups_df: DataFrame, day: dt.date, snapshot_interval_ms: int
) -> DataFrame:
    """``broker_in_two_clusters`` instants: a broker name in more than one cluster set.

    Args:
        cluster_df: the day's ``cluster_history``.
        broker_groups_df: :func:`jobs.analytics.distribution.groups.agg_broker_groups`, for the
            BrokerData's own cluster (null when
            the name has none: a dangling name, W21).
        day: the UTC day.
        snapshot_interval_ms: spacing of the instants.
    """
    return (
        with_snapshot_ts(_with_several(cluster_df, "broker_name", "cluster"), day, snapshot_interval_ms)
        .groupBy("ns", "broker_name", "snapshot_ts")
        .agg(F.array_sort(F.collect_set("cluster")).alias("clusters"))
        .where(F.size("clusters") > 1)
        .join(
            broker_groups_df.select(
                "ns", "broker_name", "snapshot_ts", F.col("broker_cluster").alias("broker_data_cluster")
            ),
            ["ns", "broker_name", "snapshot_ts"],
            "left",
        )
        .select(
            "ns",
            F.col("broker_name").alias("subject"),
            "snapshot_ts",
            F.struct("clusters", "broker_data_cluster").alias("detail"),
        )
    )


def filter_addr_in_two_groups(broker_addr_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """``addr_in_two_groups`` instants: one broker address under more than one broker name.

    Args:
        broker_addr_df: the day's ``broker_addr_history``.
        day: the UTC day.
        snapshot_interval_ms: spacing of the instants.
    """
    return (
        with_snapshot_ts(_with_several(broker_addr_df, "broker_addr", "broker_name"), day, snapshot_interval_ms)
        .groupBy("ns", "broker_addr", "snapshot_ts")
        .agg(
            F.array_sort(F.collect_set("broker_name")).alias("broker_names"),
            F.array_sort(F.collect_list(F.struct("broker_name", "broker_id", "cluster"))).alias("entries"),
        )
        .where(F.size("broker_names") > 1)
        .select(
            "ns",
            F.col("broker_addr").alias("subject"),
            "snapshot_ts",
            F.struct("broker_names", "entries").alias("detail"),
        )
    )
