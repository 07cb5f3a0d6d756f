"""Schemas of the distribution stage's tables: where the queues are, per snapshot instant.

Both are partitioned by ``date`` and replaced per day by ``jobs.analytics.distribution.stage``; a
snapshot instant is one of ``route_snapshots``. How the queue counts and the cluster figures are
computed: docs/audit.md, "Distribution".
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
"""``queue_distribution``: one row per (date, snapshot_ts, ns, cluster, broker_name), for every
broker group with a BrokerData or a QueueData on that server at that instant; the ``cluster_*``
columns describe the group's cluster there and then (``queue_skew`` compares them with
``[audit] queue_skew_cv`` / ``queue_skew_max_over_mean``).
"""

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
"""``topic_distribution``: one row per (date, snapshot_ts, ns, topic), for every topic with a
route (at least one QueueData) on that server at that instant.
"""

PARTITION_BY = ["date"]
