"""Schemas of the distribution stage's tables: where the queues are, per snapshot instant.

Both tables are computed from ``route_snapshots`` (plus ``broker_addr_history`` for broker groups
that carry no topic), partitioned by ``date`` and replaced per day by ``jobs.analytics.distribution.stage``. One
snapshot instant is ``day start + k * snapshot_interval_ms`` or the end of the day
(``23:59:59.999``), as in ``route_snapshots``.

The queue counts follow what a RocketMQ client derives from a route (docs/nameserver-semantics.md §3):

* ``publish_queues``: queues a producer gets: QueueData with ``perm & 2`` whose broker group has
  a BrokerData with id 0 (a master), ``write_queue_nums`` each.
* ``subscribe_queues``: queues a consumer gets: QueueData with ``perm & 4``, ``read_queue_nums``
  each, master or not (consumers may read from slaves).
* ``unread_write_queues``: on a readable and writable QueueData with
  ``read_queue_nums < write_queue_nums``, the ``write - read`` queues that are written but never
  consumed (``read_write_mismatch``).

``read_queues`` / ``write_queues`` are the configured numbers, whatever the perm.

``queue_distribution``: one row per (date, snapshot_ts, ns, cluster, broker_name): every broker
group that has a BrokerData or a QueueData on that server at that instant. ``cluster`` is the
BrokerData's (fixed while it exists, docs/nameserver-semantics.md §1.1); null only for QueueData without a BrokerData
(never, by invariant I4, unless the log breaks it). The ``cluster_*`` columns describe the
group's cluster at that instant on that server, over all its broker groups (topic-less groups
count, with 0 queues): ``cluster_write_queues_cv`` is the population coefficient of variation of
the groups' ``write_queues`` (standard deviation over mean) and
``cluster_write_queues_max_over_mean`` the busiest group over the mean; both are null when the
cluster has no write queue at all, and ``queue_skew`` compares them with
``[audit] queue_skew_cv`` / ``queue_skew_max_over_mean``.

``topic_distribution``: one row per (date, snapshot_ts, ns, topic) for every topic that has a
route on that server at that instant (at least one QueueData, docs/nameserver-semantics.md §2.10).
"""

from __future__ import annotations

from pyspark.sql.types import (
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

QUEUE_DISTRIBUTION_SCHEMA = StructType(
    [
        StructField("date", DateType(), False),
        StructField("snapshot_ts", TimestampType(), False),
        StructField("ns", StringType(), False),
        StructField("cluster", StringType(), True),  # null: QueueData without BrokerData
        StructField("broker_name", StringType(), False),
        StructField("broker_addrs", IntegerType(), False),  # entries of brokerAddrs; 0 without BrokerData
        StructField("has_master", BooleanType(), False),  # brokerAddrs has id 0
        StructField("topics", IntegerType(), False),  # topics with a QueueData of this group
        StructField("writable_topics", IntegerType(), False),  # of those, perm & 2
        StructField("readable_topics", IntegerType(), False),  # of those, perm & 4
        StructField("read_queues", LongType(), False),
        StructField("write_queues", LongType(), False),
        StructField("publish_queues", LongType(), False),
        StructField("subscribe_queues", LongType(), False),
        StructField("unread_write_queues", LongType(), False),
        StructField("cluster_groups", IntegerType(), True),  # broker groups of the cluster; null without cluster
        StructField("cluster_write_queues", LongType(), True),
        StructField("cluster_write_queues_mean", DoubleType(), True),
        StructField("cluster_write_queues_cv", DoubleType(), True),
        StructField("cluster_write_queues_max_over_mean", DoubleType(), True),
        StructField("write_queue_share", DoubleType(), True),  # this group's part of the cluster's write queues
    ]
)

TOPIC_DISTRIBUTION_SCHEMA = StructType(
    [
        StructField("date", DateType(), False),
        StructField("snapshot_ts", TimestampType(), False),
        StructField("ns", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("brokers", IntegerType(), False),  # broker names with a QueueData (queueDatas)
        StructField("brokers_with_master", IntegerType(), False),
        StructField("writable_brokers", IntegerType(), False),  # perm & 2 (master or not)
        StructField("readable_brokers", IntegerType(), False),  # perm & 4
        StructField("publishing_brokers", IntegerType(), False),  # giving producers at least one queue
        StructField("read_queues", LongType(), False),
        StructField("write_queues", LongType(), False),
        StructField("publish_queues", LongType(), False),
        StructField("subscribe_queues", LongType(), False),
        StructField("unread_write_queues", LongType(), False),
    ]
)

PARTITION_BY = ["date"]
