"""Queue distribution audit: where each server's routes put the queues, and what is wrong with it.

Input is every server's routes at the ``route_snapshots`` instants (``00:00 + k *
snapshot_interval_ms`` and ``23:59:59.999``), taken as *pieces*: a ``route_snapshots`` row that
holds over a run of consecutive instants (:func:`jobs.snapshots.agg_route_pieces`, made from the
day's ``topic_route_history`` and ``broker_addr_history`` exactly as ``route_snapshots`` is). The
per-topic and per-group figures are aggregated over the segments on which a key's pieces do not
change and only then exploded to instants (``topic_distribution``'s 1.7 M rows on the reference day
in its write tasks, see :func:`topic_distribution_expansion`), so the day's ~10^7 instant rows of
``route_snapshots`` are never read back. The
day's ``broker_addr_history`` and ``cluster_history`` give what a snapshot row cannot show (broker
groups without topics, cluster sets). Queue counts are what a client derives from a route
(semantics spec §3): a producer takes ``write_queue_nums`` queues of every QueueData with
``perm & 2`` whose group has a master (id 0); a consumer takes ``read_queue_nums`` queues of every
QueueData with ``perm & 4``.

Outputs, each replaced per day: ``queue_distribution`` (per snapshot, server and broker group, with
its cluster's imbalance) and ``topic_distribution`` (per snapshot, server and topic), see
:mod:`schemas.distribution`; and findings of category ``distribution``. A condition is checked at
every snapshot instant and the instants where it holds are merged, per (kind, subject, server),
into runs of consecutive instants: ``start_ts`` / ``end_ts`` are the first and last instant of a
run, ``detail`` is the state at its last instant plus ``snapshots`` (instants in the run).

Kinds and severities. Severities are chosen so that a fault-free, balanced fleet raises nothing
above info (``single_broker_topic`` is a choice, not a fault); ``read_write_mismatch`` and
``queue_skew`` are configuration findings a user must see even though nothing happened during the
day (the simulator's layout faults ``read_lt_write`` and ``queue_skew`` make them).

============================== ============ ======== ==============================================
kind                           subject      severity holds at an instant when
============================== ============ ======== ==============================================
``no_writable_queue``          topic        critical the topic has a route but a producer gets no
                                                     queue from it
``read_write_mismatch``        topic        warning  a readable and writable QueueData has fewer
                                                     read than write queues
``single_broker_topic``        topic        info     all of the topic's QueueData are on one group
``write_perm_wiped``           broker name  warning  a QueueData of the group lacks ``perm & 2``
                                                     while the same (topic, group) is writable on
                                                     another server then, or was earlier on this
                                                     one (today, or at the end of yesterday)
``queue_skew``                 cluster      warning  the cluster's write queues per group exceed
                                                     ``queue_skew_cv`` or
                                                     ``queue_skew_max_over_mean``
``no_master``                  broker name  warning  a BrokerData has no id 0
``queue_data_without_broker``  broker name  warning  QueueData of a name with no BrokerData
                                                     (breaks invariant I4)
``broker_in_two_clusters``     broker name  warning  the name is in two cluster sets (W21)
``addr_in_two_groups``         broker addr  warning  one address in two BrokerData (W22)
============================== ============ ======== ==============================================

``queue_skew`` details carry each group's write queues and suggested moves of write queues from
the busiest group to the least busy one until the cluster is within both thresholds (computed on
the per-cluster totals of the run's last instant, which are small).
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pandas as pd
from pyspark import StorageLevel
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs import lake
from jobs.lake.tables import RowExpansion, read_table, table_exists, write_table
from jobs.lake.findings import finding_columns, write_findings
from jobs.snapshots import (
    agg_broker_data_runs,
    agg_route_pieces,
    explode_pieces,
    position_expansion,
    snapshot_position,
    snapshot_ts_at,
    with_segments,
    with_snapshot_ts,
)
from jobs.spark.frames import CachedFrames, checkpoint_frame, local_frame, release_frame, spread
from common.config import Config
from common.timeutil import DAY_MS, day_start_ms
from schemas.distribution import (
    PARTITION_BY,
    QUEUE_DISTRIBUTION_SCHEMA,
    TOPIC_DISTRIBUTION_SCHEMA,
)
from schemas.routes import (
    BROKER_ADDR_HISTORY_SCHEMA,
    CLUSTER_HISTORY_SCHEMA,
    ROUTE_SNAPSHOTS_SCHEMA,
    TOPIC_ROUTE_HISTORY_SCHEMA,
)

CATEGORY = "distribution"

SEVERITY = {
    "no_writable_queue": "critical",
    "read_write_mismatch": "warning",
    "single_broker_topic": "info",
    "write_perm_wiped": "warning",
    "queue_skew": "warning",
    "no_master": "warning",
    "queue_data_without_broker": "warning",
    "broker_in_two_clusters": "warning",
    "addr_in_two_groups": "warning",
}

# a piece (jobs.snapshots.agg_route_pieces): a route_snapshots row over positions first_pos .. last_pos
PIECE_COLUMNS = ("ns", "topic", "cluster", "broker_name", "broker_addrs", "read_queue_nums", "write_queue_nums", "perm",
                 "topic_sys_flag")
PERM_WRITE, PERM_READ = 2, 4  # PermName bits (semantics spec §1.3)
MASTER_ID = 0
WIPED_TOPICS_LISTED = 20  # a write_perm_wiped detail names at most this many topics

MOVE_TYPE = T.StructType(
    [
        T.StructField("from_broker_name", T.StringType(), False),
        T.StructField("to_broker_name", T.StringType(), False),
        T.StructField("write_queues", T.LongType(), False),
    ]
)
SKEW_PLAN_TYPE = T.StructType(
    [
        T.StructField("suggested_moves", T.ArrayType(MOVE_TYPE, False), False),
        T.StructField("cv_after", T.DoubleType(), True),
        T.StructField("max_over_mean_after", T.DoubleType(), True),
        T.StructField("within_threshold_after", T.BooleanType(), False),
    ]
)


@dataclass(frozen=True)
class DistributionParams:
    """What the transforms need of the configuration.

    Attributes:
        snapshot_interval_ms: spacing of the snapshot instants (must be the one ``route_snapshots``
            was made with, so that instants ``k`` and ``k + 1`` are consecutive).
        queue_skew_cv: a cluster is skewed above this coefficient of variation...
        queue_skew_max_over_mean: ...or above this ratio of its busiest group to the mean.
    """

    snapshot_interval_ms: int = 300_000
    queue_skew_cv: float = 0.5
    queue_skew_max_over_mean: float = 2.0

    @classmethod
    def from_config(cls, config: Config) -> DistributionParams:
        """Take the audit settings of a loaded configuration."""
        audit = config.audit
        return cls(audit.snapshot_interval_ms, audit.queue_skew_cv, audit.queue_skew_max_over_mean)


@dataclass(frozen=True)
class DistributionResult:
    """What a day's distribution stage wrote.

    The report's end-of-day write-queue frame is :func:`end_of_day_distribution`.

    Attributes:
        day: the UTC day.
        snapshots: snapshot instants with at least one broker group or route on some server.
        servers: name servers with at least one broker group or route in a snapshot.
        queue_distribution_rows: rows written to ``queue_distribution``.
        topic_distribution_rows: rows written to ``topic_distribution``.
        findings_by_kind: findings written, per kind (kinds with none are absent).
        notes: remarks for the report.
    """

    day: dt.date
    snapshots: int
    servers: int
    queue_distribution_rows: int
    topic_distribution_rows: int
    findings_by_kind: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """The integer figures, for the audit's stage log line."""
        return {
            "snapshots": self.snapshots, "servers": self.servers,
            "queue_distribution_rows": self.queue_distribution_rows,
            "topic_distribution_rows": self.topic_distribution_rows,
            "findings": sum(self.findings_by_kind.values()),
        }


# ---------------------------------------------------------------------------- per QueueData


def with_queue_flags(snapshots_df: DataFrame) -> DataFrame:
    """Add what a client makes of each ``route_snapshots`` row (semantics spec §3).

    Adds ``writable`` (``perm & 2``), ``readable`` (``perm & 4``), ``has_master`` (the group's
    ``broker_addrs`` has id 0; false without BrokerData), ``publish_queues``, ``subscribe_queues``
    and ``unread_write_queues`` (longs, see :mod:`schemas.distribution`).

    Example:
        perm 6, read 4, write 8, broker_addrs {1: slave}: writable, readable, no master, so
        publish 0, subscribe 4, unread 4. broker_addrs null (no BrokerData): no master either.
    """
    perm, read, write = F.col("perm"), F.col("read_queue_nums"), F.col("write_queue_nums")
    writable = F.coalesce(perm.bitwiseAND(PERM_WRITE) == PERM_WRITE, F.lit(False))
    readable = F.coalesce(perm.bitwiseAND(PERM_READ) == PERM_READ, F.lit(False))
    has_master = F.coalesce(F.map_contains_key("broker_addrs", F.lit(MASTER_ID).cast("long")), F.lit(False))
    zero = F.lit(0).cast("long")
    return (
        snapshots_df.withColumn("writable", writable)
        .withColumn("readable", readable)
        .withColumn("has_master", has_master)
        # a negative or zero writeQueueNums contributes no queue (§3)
        .withColumn(
            "publish_queues",
            F.when(F.col("writable") & F.col("has_master"), F.greatest(write.cast("long"), zero)).otherwise(zero),
        )
        .withColumn("subscribe_queues", F.when(F.col("readable"), F.greatest(read.cast("long"), zero)).otherwise(zero))
        .withColumn(
            "unread_write_queues",
            F.when(F.col("readable") & F.col("writable") & (read < write),
                   (write - F.greatest(read, F.lit(0))).cast("long")).otherwise(zero),
        )
    )


def _sum_long(name: str) -> Column:
    return F.coalesce(F.sum(F.col(name).cast("long")), F.lit(0).cast("long"))


def _count_if(condition: Column) -> Column:
    return F.count(F.when(condition, 1)).cast("int")


# ---------------------------------------------------------------------------- per topic


def pieces_from_snapshots(snapshots_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """``route_snapshots`` rows as pieces of one instant each (see :func:`jobs.snapshots.agg_route_pieces`)."""
    pos = snapshot_position(F.col("snapshot_ts"), day, snapshot_interval_ms)
    return snapshots_df.select(*PIECE_COLUMNS, pos.alias("first_pos"), pos.alias("last_pos"))


def _segment_positions() -> tuple[Column, Column]:
    """A segment's positions (:func:`with_segments`) under the names :func:`explode_pieces` and
    the write's expansion read."""
    return F.col("seg_first").alias("first_pos"), F.col("seg_last").alias("last_pos")


def agg_topic_segments(flagged_df: DataFrame) -> DataFrame:
    """Per (ns, topic) and run of instant positions (``first_pos`` to ``last_pos``) over which the
    topic's QueueData stay the same on that server: ``TOPIC_DISTRIBUTION_SCHEMA`` columns but
    ``date`` and ``snapshot_ts``, which hold at each of those instants.

    Aggregated per segment of the topic's pieces (:func:`with_segments`): only counts and sums,
    so Spark aggregates in a hash table; which broker names a finding is about is looked up
    afterwards, for the findings only (:func:`agg_last_queue_datas`). :func:`agg_topic_stats`
    makes the instant rows.

    Args:
        flagged_df: :func:`with_queue_flags` pieces.
    """
    keys = ["ns", "topic"]
    segments_df = with_segments(flagged_df, keys).groupBy(*keys, *_segment_positions()).agg(
        F.count(F.lit(1)).cast("int").alias("brokers"),
        _count_if(F.col("has_master")).alias("brokers_with_master"),
        _count_if(F.col("writable")).alias("writable_brokers"),
        _count_if(F.col("readable")).alias("readable_brokers"),
        _count_if(F.col("publish_queues") > 0).alias("publishing_brokers"),
        _sum_long("read_queue_nums").alias("read_queues"),
        _sum_long("write_queue_nums").alias("write_queues"),
        _sum_long("publish_queues").alias("publish_queues"),
        _sum_long("subscribe_queues").alias("subscribe_queues"),
        _sum_long("unread_write_queues").alias("unread_write_queues"),
    )
    # the segments are few, but their instant rows are a row per topic and server at each
    # instant (1.7 M on the reference day): spread the segments, so that as many tasks make them
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
    :func:`agg_topic_segments` rows in the write tasks (1.7 M rows on the reference day, never
    converted from the JVM's rows one by one; see :class:`jobs.lake.tables.RowExpansion`)."""
    return position_expansion(day, snapshot_interval_ms, TOPIC_DISTRIBUTION_SCHEMA.names)


# ---------------------------------------------------------------------------- per broker group


def agg_group_totals(flagged_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """Per (snapshot_ts, ns, broker_name) with QueueData: the group's topic and queue totals, its
    ``cluster`` and, from the snapshot's BrokerData, ``queue_broker_addrs`` (number of entries,
    0 without BrokerData) and ``queue_has_master``.

    Aggregated per segment of the group's pieces (:func:`with_segments`), then exploded to the
    segment's instants.
    """
    # cluster is the BrokerData's, one per group at an instant: as a key it splits nothing, and
    # it keeps every aggregate numeric (hash aggregation, no sort)
    keys = ["ns", "broker_name", "cluster"]
    segments_df = with_segments(flagged_df, keys).groupBy(*keys, *_segment_positions()).agg(
        F.max(F.coalesce(F.size("broker_addrs"), F.lit(0))).alias("queue_broker_addrs"),
        F.max("has_master").alias("queue_has_master"),
        F.count(F.lit(1)).cast("int").alias("topics"),
        _count_if(F.col("writable")).alias("writable_topics"),
        _count_if(F.col("readable")).alias("readable_topics"),
        _sum_long("read_queue_nums").alias("read_queues"),
        _sum_long("write_queue_nums").alias("write_queues"),
        _sum_long("publish_queues").alias("publish_queues"),
        _sum_long("subscribe_queues").alias("subscribe_queues"),
        _sum_long("unread_write_queues").alias("unread_write_queues"),
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
            "ns", "broker_name", F.col("cluster").alias("broker_cluster"),
            F.size("broker_addrs").alias("broker_addrs"),
            F.map_contains_key("broker_addrs", F.lit(MASTER_ID).cast("long")).alias("has_master"),
            "first_pos", "last_pos",
        ),
        day, snapshot_interval_ms,
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
        .withColumn("cluster_write_queues_cv",
                    F.when(known & (mean > 0), F.try_divide(spread, total.cast("double"))))
        .withColumn("cluster_write_queues_max_over_mean",
                    F.when(known & (mean > 0), F.try_divide(F.max("write_queues").over(w).cast("double"), mean)))
        .withColumn("write_queue_share",
                    F.when(known & (total > 0), F.try_divide(queues, total.cast("double"))))
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
    return (
        joined.select(
            F.lit(day).alias("date"), "snapshot_ts", "ns",
            F.coalesce(F.col("broker_cluster"), F.col("cluster")).alias("cluster"),
            "broker_name",
            F.coalesce(F.col("bg.broker_addrs"), F.col("queue_broker_addrs"), zero_int).alias("broker_addrs"),
            F.coalesce(F.col("bg.has_master"), F.col("queue_has_master"), F.lit(False)).alias("has_master"),
            *[F.coalesce(F.col(c), zero_int).alias(c) for c in ("topics", "writable_topics", "readable_topics")],
            *[F.coalesce(F.col(c), zero_long).alias(c) for c in (
                "read_queues", "write_queues", "publish_queues", "subscribe_queues", "unread_write_queues")],
        )
        .transform(with_cluster_stats)
    )


def agg_queue_distribution(group_rows_df: DataFrame) -> DataFrame:
    """``queue_distribution`` rows from :func:`agg_group_rows`."""
    return group_rows_df.select(*QUEUE_DISTRIBUTION_SCHEMA.names)


# ---------------------------------------------------------------------------- runs of instants


def agg_runs(condition_df: DataFrame, day: dt.date, snapshot_interval_ms: int,
             keys: Sequence[str] = ("ns", "subject"), details: Sequence[str] = ("detail",)) -> DataFrame:
    """Merge per-instant rows of one kind into runs of consecutive instants.

    Args:
        condition_df: one row per (``keys``, snapshot_ts) where the condition holds, with struct
            columns ``details``.
        day: the UTC day of the snapshots.
        snapshot_interval_ms: their spacing.
        keys: what a run is of (:func:`agg_kind_runs` adds ``kind``).
        details: the columns whose value at the run's last instant the run keeps.

    Returns:
        One row per run: ``keys``, ``start_ts``, ``end_ts`` (first and last instant),
        ``snapshots`` (instants in the run) and ``details`` (those of the last instant).

    Example:
        Held at 00:05, 00:10 and 00:20 (not 00:15): two runs, 00:05-00:10 and 00:20-00:20.
    """
    w = Window.partitionBy(*keys).orderBy("_pos")
    return (
        condition_df.withColumn("_pos", snapshot_position(F.col("snapshot_ts"), day, snapshot_interval_ms))
        # gaps-and-islands: within a run, position minus rank is constant
        .withColumn("_run", F.col("_pos") - F.row_number().over(w))
        .groupBy(*keys, "_run")
        .agg(
            F.min("snapshot_ts").alias("start_ts"),
            F.max("snapshot_ts").alias("end_ts"),
            F.count(F.lit(1)).alias("snapshots"),
            *[F.max_by(c, "_pos").alias(c) for c in details],
        )
        .select(*keys, "start_ts", "end_ts", "snapshots", *details)
    )


def agg_kind_runs(conditions: Mapping[str, DataFrame], day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """:func:`agg_runs` of every kind's condition rows at once: one window and one aggregate for
    all kinds, where a window per kind made the plan nine times as large.

    Each kind's ``detail`` struct keeps its own type in a column of its own (``_detail_<kind>``,
    null on the other kinds' rows); :func:`select_kind_runs` takes one kind's runs back out.

    Args:
        conditions: kind -> its per-instant rows (``ns``, ``subject``, ``snapshot_ts``, ``detail``).
        day: the UTC day of the snapshots.
        snapshot_interval_ms: their spacing.

    Returns:
        ``kind``, ``ns``, ``subject``, ``start_ts``, ``end_ts``, ``snapshots`` and a
        ``_detail_<kind>`` column per kind.
    """
    types = {kind: df.schema["detail"].dataType for kind, df in conditions.items()}
    merged_df = None
    for kind, condition_df in conditions.items():
        rows_df = condition_df.select(
            F.lit(kind).alias("kind"), "ns", "subject", "snapshot_ts",
            *[(F.col("detail") if other == kind else F.lit(None).cast(types[other])).alias(_detail_column(other))
              for other in conditions],
        )
        merged_df = rows_df if merged_df is None else merged_df.unionByName(rows_df)
    return agg_runs(merged_df, day, snapshot_interval_ms, keys=("kind", "ns", "subject"),
                    details=[_detail_column(kind) for kind in conditions])


def select_kind_runs(kind_runs_df: DataFrame, kind: str) -> DataFrame:
    """The :func:`agg_runs` rows of one ``kind`` of :func:`agg_kind_runs`."""
    return kind_runs_df.where(F.col("kind") == kind).select(
        "ns", "subject", "start_ts", "end_ts", "snapshots", F.col(_detail_column(kind)).alias("detail"))


def _detail_column(kind: str) -> str:
    return f"_detail_{kind}"


def select_findings(runs_df: DataFrame, kind: str) -> DataFrame:
    """Finding rows (``jobs.lake.findings`` columns) of ``kind`` from :func:`agg_runs` rows; the JSON
    detail is ``snapshots`` followed by the fields of ``detail``."""
    return runs_df.select(
        *finding_columns(
            kind=kind, severity=SEVERITY[kind], subject=F.col("subject"), ns=F.col("ns"),
            start_ts=F.col("start_ts"), end_ts=F.col("end_ts"),
            detail=F.struct(F.col("snapshots"), F.col("detail.*")),
        )
    )


# ---------------------------------------------------------------------------- per-instant conditions


def filter_no_writable_queue(topic_stats_df: DataFrame) -> DataFrame:
    """``no_writable_queue`` instants: a route whose publish queue set is empty (§3)."""
    return topic_stats_df.where(F.col("publish_queues") == 0).select(
        "ns", F.col("topic").alias("subject"), "snapshot_ts",
        F.struct("brokers", "brokers_with_master", "writable_brokers", "write_queues").alias("detail"),
    )


def filter_single_broker_topic(topic_stats_df: DataFrame) -> DataFrame:
    """``single_broker_topic`` instants: every QueueData of the topic is on one broker group."""
    return topic_stats_df.where(F.col("brokers") == 1).select(
        "ns", F.col("topic").alias("subject"), "snapshot_ts",
        F.struct("read_queues", "write_queues", "publish_queues").alias("detail"),
    )


def agg_last_queue_datas(topic_runs_df: DataFrame, flagged_df: DataFrame, day: dt.date,
                         snapshot_interval_ms: int) -> DataFrame:
    """The QueueData of each topic run's last instant: ``ns``, ``subject``, ``end_ts``,
    ``queue_datas`` (``broker_name``, ``cluster``, ``perm``, queue numbers, ``has_master``;
    sorted by broker name).

    Args:
        topic_runs_df: :func:`agg_runs` rows whose subject is a topic (any number of kinds).
        flagged_df: :func:`with_queue_flags` pieces of the day.
        day: the UTC day.
        snapshot_interval_ms: spacing of the instants.
    """
    # one row per finding: few enough to broadcast, and matched to the pieces that cover its instant
    keys_df = F.broadcast(
        topic_runs_df.select("ns", F.col("subject").alias("_topic"), "end_ts").distinct()
        .withColumn("_pos", snapshot_position(F.col("end_ts"), day, snapshot_interval_ms))
        .withColumnRenamed("ns", "_ns")
    )
    covers = (F.col("ns") == F.col("_ns")) & (F.col("topic") == F.col("_topic")) & (
        F.col("_pos").between(F.col("first_pos"), F.col("last_pos")))
    return (
        flagged_df.join(keys_df, covers)
        .groupBy("ns", "topic", "end_ts")
        .agg(F.array_sort(F.collect_list(F.struct(
            "broker_name", "cluster", "perm", "read_queue_nums", "write_queue_nums", "has_master",
        ))).alias("queue_datas"))
        .select("ns", F.col("topic").alias("subject"), "end_ts", "queue_datas")
    )


def with_queue_datas(runs_df: DataFrame, queue_datas_df: DataFrame) -> DataFrame:
    """Add :func:`agg_last_queue_datas`'s ``queue_datas`` to the ``detail`` of topic runs."""
    return (
        runs_df.join(queue_datas_df, ["ns", "subject", "end_ts"], "left")
        .withColumn("detail", F.struct("detail.*", "queue_datas"))
        .drop("queue_datas")
    )


def filter_read_write_mismatch(flagged_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """``read_write_mismatch`` instants: per topic, the readable and writable QueueData with fewer
    read than write queues (queues ``read .. write - 1`` are written and never consumed).

    Args:
        flagged_df: :func:`with_queue_flags` pieces of the day (only the mismatched are exploded).
        day: the UTC day.
        snapshot_interval_ms: spacing of the instants.
    """
    return (
        explode_pieces(flagged_df.where(F.col("unread_write_queues") > 0), day, snapshot_interval_ms)
        .groupBy("ns", "topic", "snapshot_ts")
        .agg(
            F.array_sort(F.collect_list(F.struct("broker_name", "read_queue_nums", "write_queue_nums")))
            .alias("queue_datas"),
            F.sum("unread_write_queues").alias("unread_write_queues"),
        )
        .select("ns", F.col("topic").alias("subject"), "snapshot_ts",
                F.struct("unread_write_queues", "queue_datas").alias("detail"))
    )


def filter_write_perm_wiped(flagged_df: DataFrame, previous_end_df: DataFrame, day: dt.date,
                            snapshot_interval_ms: int) -> DataFrame:
    """``write_perm_wiped`` instants, per (ns, broker name).

    A QueueData without ``perm & 2`` counts when the same (topic, broker name) is writable on
    another server at that instant, or was writable on this server at an earlier instant of the
    day or at the end of the day before (WIPE_WRITE_PERM_OF_BROKER, 205, changes one server only;
    a topic that is read-only everywhere and always is a choice, not a wipe).

    Args:
        flagged_df: :func:`with_queue_flags` pieces of the day.
        previous_end_df: the same for the previous day's last instant (may be empty), at
            position -1 (before every instant of the day).
        day: the UTC day.
        snapshot_interval_ms: spacing of the instants.
    """
    keys = ["ns", "topic", "broker_name"]
    instant_keys = ["_pos", "topic", "broker_name"]

    def instants(pieces_df: DataFrame) -> DataFrame:
        return pieces_df.select(*keys, "cluster", F.explode(F.sequence("first_pos", "last_pos")).alias("_pos"))

    candidates_pieces_df = flagged_df.where(~F.col("writable"))
    candidates_df = instants(candidates_pieces_df)
    # Only (topic, group) cells that lack the write bit somewhere need their writable rows looked
    # at. There are at most as many as QueueData in the fleet, so the set is broadcast and the
    # writable pieces are filtered before they are exploded.
    suspects_df = F.broadcast(candidates_pieces_df.select("topic", "broker_name").distinct())
    writable_df = instants(
        flagged_df.unionByName(previous_end_df).where("writable").join(suspects_df, ["topic", "broker_name"], "left_semi")
    )
    first_writable_df = writable_df.groupBy(*keys).agg(F.min("_pos").alias("first_writable_pos"))
    writable_elsewhere_df = writable_df.groupBy(*instant_keys).agg(
        F.array_sort(F.collect_set("ns")).alias("writable_on")
    )
    wiped = F.col("earlier") | F.col("elsewhere")
    return (
        candidates_df.join(first_writable_df, keys, "left")
        .join(writable_elsewhere_df, instant_keys, "left")
        .withColumn("earlier", F.coalesce(F.col("first_writable_pos") < F.col("_pos"), F.lit(False)))
        .withColumn("elsewhere", F.coalesce(F.size("writable_on") > 0, F.lit(False)))
        .where(wiped)
        .groupBy("ns", "broker_name", "_pos")
        .agg(
            F.min("cluster").alias("cluster"),
            F.count(F.lit(1)).alias("topics"),
            _count_if(F.col("elsewhere")).alias("writable_on_other_servers"),
            _count_if(F.col("earlier")).alias("writable_earlier"),
            F.slice(F.array_sort(F.collect_list("topic")), 1, WIPED_TOPICS_LISTED).alias("topics_listed"),
            F.array_sort(F.array_distinct(F.flatten(F.collect_list(F.coalesce("writable_on", F.array())))))
            .alias("writable_on"),
        )
        .select("ns", F.col("broker_name").alias("subject"),
                snapshot_ts_at(F.col("_pos"), day, snapshot_interval_ms).alias("snapshot_ts"),
                F.struct("cluster", "topics", "writable_on_other_servers", "writable_earlier", "writable_on",
                         "topics_listed").alias("detail"))
    )


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
            F.map_from_entries(F.array_sort(F.collect_list(F.struct("broker_name", "write_queues"))))
            .alias("write_queues_by_broker"),
        )
        .select("ns", F.col("cluster").alias("subject"), "snapshot_ts",
                F.struct("groups", "write_queues", "mean", "cv", "max_over_mean",
                         F.lit(params.queue_skew_cv).alias("cv_threshold"),
                         F.lit(params.queue_skew_max_over_mean).alias("max_over_mean_threshold"),
                         "write_queues_by_broker").alias("detail"))
    )


def with_skew_plan(runs_df: DataFrame, params: DistributionParams) -> DataFrame:
    """Add :func:`suggest_moves` of each ``queue_skew`` run's last instant to its ``detail``."""
    cv_max, ratio_max = params.queue_skew_cv, params.queue_skew_max_over_mean

    @F.udf(SKEW_PLAN_TYPE)
    def plan(by_broker: dict[str, int]) -> dict:
        return suggest_moves(by_broker or {}, cv_max, ratio_max)

    return runs_df.withColumn("_plan", plan(F.col("detail.write_queues_by_broker"))).withColumn(
        "detail", F.struct("detail.*", "_plan.*")
    ).drop("_plan")


def filter_no_master(group_rows_df: DataFrame) -> DataFrame:
    """``no_master`` instants: a BrokerData without id 0. Its QueueData give producers nothing
    (§3) however writable they are; consumers may still read from the slaves."""
    return group_rows_df.where((F.col("broker_addrs") > 0) & ~F.col("has_master")).select(
        "ns", F.col("broker_name").alias("subject"), "snapshot_ts",
        F.struct("cluster", "topics", "writable_topics", "write_queues").alias("detail"),
    )


def with_last_addrs(runs_df: DataFrame, broker_addr_df: DataFrame) -> DataFrame:
    """Add to the ``detail`` of broker-name runs the group's ``addrs`` (id -> address) at the run's
    last instant, from ``broker_addr_history`` (null when it has none)."""
    h, r = broker_addr_df.alias("h"), runs_df.select("ns", "subject", "end_ts").distinct().alias("r")
    valid = (F.col("h.valid_from_ts") <= F.col("r.end_ts")) & (
        F.col("h.valid_to_ts").isNull() | (F.col("r.end_ts") < F.col("h.valid_to_ts"))
    )
    addrs_df = (
        h.join(r, (F.col("h.ns") == F.col("r.ns")) & (F.col("h.broker_name") == F.col("r.subject")) & valid)
        .groupBy("r.ns", "r.subject", "r.end_ts")
        .agg(F.map_from_entries(F.array_sort(F.collect_list(F.struct("h.broker_id", "h.broker_addr")))).alias("addrs"))
    )
    return (
        runs_df.join(addrs_df, ["ns", "subject", "end_ts"], "left")
        .withColumn("detail", F.struct("detail.*", "addrs"))
        .drop("addrs")
    )


def filter_queue_data_without_broker(group_rows_df: DataFrame) -> DataFrame:
    """``queue_data_without_broker`` instants: QueueData of a broker name with no BrokerData."""
    return group_rows_df.where((F.col("broker_addrs") == 0) & (F.col("topics") > 0)).select(
        "ns", F.col("broker_name").alias("subject"), "snapshot_ts",
        F.struct("topics", "read_queues", "write_queues", "subscribe_queues").alias("detail"),
    )


def _with_several(history_df: DataFrame, key: str, value: str) -> DataFrame:
    """The history rows of the (ns, ``key``) that had more than one ``value`` during the day: the
    only ones that can break "one value at a time", so only they are exploded to instants."""
    keys_df = history_df.groupBy("ns", key).agg(F.countDistinct(value).alias("_values")).where(F.col("_values") > 1)
    return history_df.join(F.broadcast(keys_df.drop("_values")), ["ns", key], "left_semi")


def filter_broker_in_two_clusters(
    cluster_df: DataFrame, broker_groups_df: DataFrame, day: dt.date, snapshot_interval_ms: int
) -> DataFrame:
    """``broker_in_two_clusters`` instants: a broker name in more than one cluster set.

    Args:
        cluster_df: the day's ``cluster_history``.
        broker_groups_df: :func:`agg_broker_groups`, for the BrokerData's own cluster (null when
            the name has none: a dangling name, W21).
        day: the UTC day.
        snapshot_interval_ms: spacing of the instants.
    """
    return (
        with_snapshot_ts(_with_several(cluster_df, "broker_name", "cluster"), day, snapshot_interval_ms)
        .groupBy("ns", "broker_name", "snapshot_ts")
        .agg(F.array_sort(F.collect_set("cluster")).alias("clusters"))
        .where(F.size("clusters") > 1)
        .join(broker_groups_df.select("ns", "broker_name", "snapshot_ts",
                                      F.col("broker_cluster").alias("broker_data_cluster")),
              ["ns", "broker_name", "snapshot_ts"], "left")
        .select("ns", F.col("broker_name").alias("subject"), "snapshot_ts",
                F.struct("clusters", "broker_data_cluster").alias("detail"))
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
        .select("ns", F.col("broker_addr").alias("subject"), "snapshot_ts",
                F.struct("broker_names", "entries").alias("detail"))
    )


# ---------------------------------------------------------------------------- suggested moves


def suggest_moves(write_queues_by_broker: Mapping[str, int], max_cv: float, max_over_mean: float) -> dict:
    """Greedy moves of write queues, busiest group to least busy, until within both thresholds.

    Each step moves ``k`` queues from the busiest group (ties: lowest name) to the least busy one,
    ``k`` = the smaller of their distances to the mean (rounded down; at least 1 while they differ
    by 2 or more), so neither crosses the mean and the sum of squares strictly falls: the loop
    ends. Integer queues cannot always get there (3 queues over 4 groups stay at max/mean 1.33);
    ``within_threshold_after`` then says false.

    Args:
        write_queues_by_broker: broker name -> write queues, one cluster at one instant.
        max_cv: ``queue_skew_cv``.
        max_over_mean: ``queue_skew_max_over_mean``.

    Returns:
        ``suggested_moves`` (``from_broker_name``, ``to_broker_name``, ``write_queues``) in order,
        and ``cv_after``, ``max_over_mean_after`` (null without queues), ``within_threshold_after``.

    Example:
        >>> suggest_moves({"a": 9, "b": 1, "c": 2}, 0.5, 2.0)["suggested_moves"]
        [{'from_broker_name': 'a', 'to_broker_name': 'b', 'write_queues': 3}]
    """
    loads = {name: int(n) for name, n in write_queues_by_broker.items()}
    moves: list[dict] = []

    def stats() -> tuple[float | None, float | None]:
        if not loads:
            return None, None
        mean = sum(loads.values()) / len(loads)
        if mean <= 0:
            return None, None
        var = sum((x - mean) ** 2 for x in loads.values()) / len(loads)
        return math.sqrt(var) / mean, max(loads.values()) / mean

    cv, ratio = stats()
    while cv is not None and (cv > max_cv or ratio > max_over_mean):
        mean = sum(loads.values()) / len(loads)
        hi = min(loads, key=lambda name: (-loads[name], name))
        lo = min(loads, key=lambda name: (loads[name], name))
        k = math.floor(min(loads[hi] - mean, mean - loads[lo]))
        if k < 1:
            k = (loads[hi] - loads[lo]) // 2
        if k < 1:
            break  # within one queue of each other: integer moves cannot do better
        loads[hi] -= k
        loads[lo] += k
        moves.append({"from_broker_name": hi, "to_broker_name": lo, "write_queues": k})
        cv, ratio = stats()
    within = cv is None or (cv <= max_cv and ratio <= max_over_mean)
    return {"suggested_moves": moves, "cv_after": cv, "max_over_mean_after": ratio, "within_threshold_after": within}


# ---------------------------------------------------------------------------- composition


@dataclass(frozen=True)
class DistributionFrames(CachedFrames):
    """The stage's outputs for one day, as DataFrames (lazy but for the small intermediates that
    :func:`build_distribution` computes at once: topic stats, group rows, findings' runs).

    Attributes:
        topic_segments_df: :func:`agg_topic_segments` rows (checkpointed).
        topic_stats_df: :func:`agg_topic_stats` rows (made from the segments when read).
        group_rows_df: :func:`agg_group_rows` rows (checkpointed).
        findings_df: finding rows (``jobs.lake.findings`` columns), category ``distribution``.
        cached: the checkpointed intermediates (:meth:`release` frees them after the last read).
    """

    topic_segments_df: DataFrame
    topic_stats_df: DataFrame
    group_rows_df: DataFrame
    findings_df: DataFrame


def build_distribution(
    pieces_df: DataFrame,
    previous_end_df: DataFrame,
    broker_addr_df: DataFrame,
    cluster_df: DataFrame,
    day: dt.date,
    params: DistributionParams,
    broker_data_runs_df: DataFrame | None = None,
) -> DistributionFrames:
    """Compose the transforms for one day; computes the findings' runs of instants (small) at once.

    Args:
        pieces_df: the day's routes as pieces (:func:`jobs.snapshots.agg_route_pieces`, or
            :func:`pieces_from_snapshots` of ``route_snapshots`` rows).
        previous_end_df: ``route_snapshots`` rows of the day before's last instant (may be empty).
        broker_addr_df: the day's ``broker_addr_history``.
        cluster_df: the day's ``cluster_history``.
        day: the UTC day.
        params: snapshot spacing and skew thresholds.
        broker_data_runs_df: :func:`jobs.snapshots.agg_broker_data_runs` of ``broker_addr_df``
            when the caller has it.
    """
    interval = params.snapshot_interval_ms
    if broker_data_runs_df is None:
        broker_data_runs_df = agg_broker_data_runs(broker_addr_df, day, interval)
    flagged_df = pieces_df.transform(with_queue_flags)
    previous_flagged_df = previous_end_df.select(
        *PIECE_COLUMNS, F.lit(-1).cast("long").alias("first_pos"), F.lit(-1).cast("long").alias("last_pos")
    ).transform(with_queue_flags)
    broker_groups_df = agg_broker_groups(broker_data_runs_df, day, interval)
    # each is read by its table and by several findings: computed once, and cut from its plan
    # the topics' instant rows are many and cheap to make again: the segments are kept instead
    topic_segments_df = checkpoint_frame(agg_topic_segments(flagged_df))
    topic_stats_df = agg_topic_stats(topic_segments_df, day, interval)
    group_rows_df = checkpoint_frame(
        agg_group_rows(agg_group_totals(flagged_df, day, interval), broker_groups_df, day)
    )

    conditions = {
        "no_writable_queue": filter_no_writable_queue(topic_stats_df),
        "read_write_mismatch": filter_read_write_mismatch(flagged_df, day, interval),
        "single_broker_topic": filter_single_broker_topic(topic_stats_df),
        "write_perm_wiped": filter_write_perm_wiped(flagged_df, previous_flagged_df, day, interval),
        "queue_skew": filter_queue_skew(group_rows_df, params),
        "no_master": filter_no_master(group_rows_df),
        "queue_data_without_broker": filter_queue_data_without_broker(group_rows_df),
        "broker_in_two_clusters": filter_broker_in_two_clusters(cluster_df, broker_groups_df, day, interval),
        "addr_in_two_groups": filter_addr_in_two_groups(broker_addr_df, day, interval),
    }
    # small (a row per run), read once per kind: computed here, once, and cut from its plan, so
    # that the nine reads neither repeat nor re-plan it
    kind_runs_df = checkpoint_frame(agg_kind_runs(conditions, day, interval))

    def runs(kind: str) -> DataFrame:
        return select_kind_runs(kind_runs_df, kind)

    no_writable_df, single_broker_df = runs("no_writable_queue"), runs("single_broker_topic")
    ends = ["ns", "subject", "end_ts"]
    queue_datas_df = agg_last_queue_datas(no_writable_df.select(*ends).unionByName(single_broker_df.select(*ends)),
                                          flagged_df, day, interval)
    enriched = {
        "no_writable_queue": with_queue_datas(no_writable_df, queue_datas_df),
        "single_broker_topic": with_queue_datas(single_broker_df, queue_datas_df),
        "queue_skew": with_skew_plan(runs("queue_skew"), params),
        "no_master": with_last_addrs(runs("no_master"), broker_addr_df),
    }
    findings = [select_findings(enriched[kind] if kind in enriched else runs(kind), kind) for kind in conditions]
    findings_df = findings[0]
    for more_df in findings[1:]:
        findings_df = findings_df.unionByName(more_df)
    return DistributionFrames(topic_segments_df, topic_stats_df, group_rows_df, findings_df,
                              cached=(topic_segments_df, group_rows_df, kind_runs_df))


def agg_end_of_day_distribution(snapshots_df: DataFrame, day: dt.date) -> DataFrame:
    """The report's frame: ``cluster``, ``broker_name``, ``topic``, ``write_queue_nums`` at the end
    of the day, the largest any server had (servers normally agree; one row per cell)."""
    last = F.timestamp_millis(F.lit(day_start_ms(day) + DAY_MS - 1))
    return (
        snapshots_df.where(F.col("snapshot_ts") == last)
        .groupBy("cluster", "broker_name", "topic")
        .agg(F.max("write_queue_nums").alias("write_queue_nums"))
        .select("cluster", "broker_name", "topic", "write_queue_nums")
    )


def end_of_day_distribution(spark: SparkSession, lake_dir: str, day: dt.date) -> pd.DataFrame:
    """:func:`agg_end_of_day_distribution` of a day in the lake, as pandas (fleet-sized: one row
    per topic and broker group), sorted; empty without snapshots."""
    path = lake.table_path(lake_dir, lake.ROUTE_SNAPSHOTS)
    columns = ["cluster", "broker_name", "topic", "write_queue_nums"]
    if not table_exists(path):
        return pd.DataFrame(columns=columns)
    snapshots_df = read_table(spark, path, ROUTE_SNAPSHOTS_SCHEMA, where={"date": day})
    frame = agg_end_of_day_distribution(snapshots_df, day).toPandas()
    return frame.sort_values(["cluster", "broker_name", "topic"], na_position="last").reset_index(drop=True)


def _read_day(spark: SparkSession, lake_dir: str, name: str, schema: T.StructType, day: dt.date) -> DataFrame:
    path = lake.table_path(lake_dir, name)
    if not table_exists(path):
        return local_frame(spark, [], schema)
    return read_table(spark, path, schema, where={"date": day})


def run_distribution(spark: SparkSession, lake_dir: str, day: dt.date, config: Config) -> DistributionResult:
    """Compute and write one day's distribution tables and findings (replacing that day's).

    Reads the day's ``topic_route_history``, ``broker_addr_history`` and ``cluster_history``
    (the routes at the snapshot instants are made from them exactly as ``route_snapshots`` is,
    but aggregated before they are exploded) and the day before's last ``route_snapshots``
    instant when the lake has it; writes ``queue_distribution``, ``topic_distribution`` and the
    day's ``distribution`` findings.

    Raises:
        FileNotFoundError: the lake has no ``topic_route_history`` table (run the rebuild first).
    """
    params = DistributionParams.from_config(config)
    routes_path = lake.table_path(lake_dir, lake.TOPIC_ROUTE_HISTORY)
    if not table_exists(routes_path):
        raise FileNotFoundError(f"{routes_path}: no topic_route_history table; run the rebuild first")
    broker_addr_df = _read_day(spark, lake_dir, lake.BROKER_ADDR_HISTORY, BROKER_ADDR_HISTORY_SCHEMA, day)
    # small (a row per change of a group's BrokerData), read by the pieces and the group rows;
    # checkpointed like build_distribution's intermediates (see there)
    runs_df = checkpoint_frame(agg_broker_data_runs(broker_addr_df, day, params.snapshot_interval_ms))
    # interval-sized, read by every per-topic and per-group aggregate
    pieces_df = checkpoint_frame(agg_route_pieces(
        _read_day(spark, lake_dir, lake.TOPIC_ROUTE_HISTORY, TOPIC_ROUTE_HISTORY_SCHEMA, day),
        runs_df, day, params.snapshot_interval_ms,
    ))
    snapshots_path = lake.table_path(lake_dir, lake.ROUTE_SNAPSHOTS)
    if table_exists(snapshots_path):
        previous_end_df = read_table(spark, snapshots_path, ROUTE_SNAPSHOTS_SCHEMA,
                                     where={"date": day - dt.timedelta(days=1)}).where(
            F.col("snapshot_ts") == F.timestamp_millis(F.lit(day_start_ms(day) - 1)))
    else:
        previous_end_df = local_frame(spark, [], ROUTE_SNAPSHOTS_SCHEMA)
    frames = build_distribution(
        pieces_df, previous_end_df, broker_addr_df,
        _read_day(spark, lake_dir, lake.CLUSTER_HISTORY, CLUSTER_HISTORY_SCHEMA, day),
        day, params, runs_df,
    )
    topic_segments_df, group_rows_df = frames.topic_segments_df, frames.group_rows_df
    try:
        where = {"date": day}
        # the write tasks make the instant rows of the segments
        write_table(topic_segments_df, lake.table_path(lake_dir, lake.TOPIC_DISTRIBUTION),
                    mode="overwrite", partition_by=PARTITION_BY, replace_where=where, schema=TOPIC_DISTRIBUTION_SCHEMA,
                    expansion=topic_distribution_expansion(day, params.snapshot_interval_ms))
        write_table(agg_queue_distribution(group_rows_df), lake.table_path(lake_dir, lake.QUEUE_DISTRIBUTION),
                    mode="overwrite", partition_by=PARTITION_BY, replace_where=where, schema=QUEUE_DISTRIBUTION_SCHEMA)
        findings_df = frames.findings_df.persist(StorageLevel.MEMORY_AND_DISK)
        try:
            write_findings(findings_df, lake_dir, day, CATEGORY)
            by_kind = {r["kind"]: r["count"] for r in findings_df.groupBy("kind").count().collect()}
        finally:
            findings_df.unpersist()
        # small: one row per instant / server; the report's counts, not data
        counts = group_rows_df.agg(
            F.count(F.lit(1)).alias("rows"), F.countDistinct("snapshot_ts").alias("snapshots"),
            F.countDistinct("ns").alias("servers"),
        ).first()
        topic_rows = topic_segments_df.agg(
            F.coalesce(F.sum(F.col("last_pos") - F.col("first_pos") + 1), F.lit(0))).first()[0]
    finally:
        frames.release()
        for df in (pieces_df, runs_df):
            release_frame(df)
    notes = [] if counts["rows"] else [
        f"distribution: no route or broker group on any server at the snapshot instants of {day.isoformat()}"]
    return DistributionResult(
        day=day, snapshots=counts["snapshots"], servers=counts["servers"], queue_distribution_rows=counts["rows"],
        topic_distribution_rows=topic_rows, findings_by_kind=dict(sorted(by_kind.items())), notes=notes,
    )
