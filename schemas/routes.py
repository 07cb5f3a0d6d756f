"""Schemas of the rebuilt route tables, ``ns_runs``, ``ns_state`` and ``route_snapshots``
(docs/interfaces.md, "The lake").

Each history table holds validity intervals of one route-table cell of one name server
(docs/nameserver-semantics.md §1.1), partitioned by ``date`` and clipped to that UTC day. How the
rebuild makes them: docs/audit.md, "Rebuild"; ``route_snapshots``: "Snapshots".
"""

from __future__ import annotations

from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

_INTERVAL_FIELDS = [
    StructField("valid_from_ts", TimestampType(), False),
    StructField("valid_to_ts", TimestampType(), True),
    StructField("from_seq", LongType(), True),
    StructField("to_seq", LongType(), True),
    StructField("date", DateType(), False),
]

TOPIC_ROUTE_HISTORY_SCHEMA = StructType(
    [
        StructField("ns", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("broker_name", StringType(), False),
        StructField("read_queue_nums", IntegerType(), False),
        StructField("write_queue_nums", IntegerType(), False),
        StructField("perm", IntegerType(), False),
        StructField("topic_sys_flag", IntegerType(), False),
        *_INTERVAL_FIELDS,
    ]
)
"""``topic_route_history``: ``topicQueueTable[topic][broker_name]`` (a QueueData)."""

BROKER_ADDR_HISTORY_SCHEMA = StructType(
    [
        StructField("ns", StringType(), False),
        StructField("cluster", StringType(), False),
        StructField("broker_name", StringType(), False),
        StructField("broker_id", LongType(), False),
        StructField("broker_addr", StringType(), False),
        *_INTERVAL_FIELDS,
    ]
)
"""``broker_addr_history``: ``brokerAddrTable[broker_name].brokerAddrs[broker_id]``, with the
BrokerData's ``cluster`` (fixed while the BrokerData exists; a recreated BrokerData may differ).
"""

CLUSTER_HISTORY_SCHEMA = StructType(
    [
        StructField("ns", StringType(), False),
        StructField("cluster", StringType(), False),
        StructField("broker_name", StringType(), False),
        *_INTERVAL_FIELDS,
    ]
)
"""``cluster_history``: membership of ``broker_name`` in ``clusterAddrTable[cluster]``. Needed
apart from the BrokerData because ClusterInfo shows dangling names (docs/nameserver-semantics.md
W21).
"""

FILTER_SERVER_HISTORY_SCHEMA = StructType(
    [
        StructField("ns", StringType(), False),
        StructField("broker_addr", StringType(), False),
        StructField("filter_servers", ArrayType(StringType(), False), False),
        *_INTERVAL_FIELDS,
    ]
)
"""``filter_server_history``: ``filterServerTable[broker_addr]`` (a non-empty list)."""

NS_RUNS_SCHEMA = StructType(
    [
        StructField("ns", StringType(), False),
        StructField("start_ts", TimestampType(), False),
        StructField("stop_ts", TimestampType(), True),
        StructField("start_seq", LongType(), True),
        StructField("stop_seq", LongType(), True),
        StructField("stop_reason", StringType(), False),  # ns_stop | restart | open | observe_*
        # observed servers: the poll interval, the tables' resolution (null: own server, or unknown)
        StructField("resolution_ms", LongType(), True),
        StructField("date", DateType(), False),
    ]
)
"""``ns_runs``: the intervals in which the server was up, between ``ns_start`` and ``ns_stop``
(``stop_reason`` and ``start_seq``: docs/audit.md, "Rebuild"); for an observed server the periods in
which its state is known, from a snapshot to the next ``observe_error``, ``observe_stop`` or
``observe_start`` (docs/audit.md, "Observed servers").
"""

NS_STATE_SCHEMA = StructType(
    [
        StructField("date", DateType(), False),
        StructField("ns", StringType(), False),
        StructField("up", BooleanType(), False),  # at the end of the day
        StructField("up_at_start", BooleanType(), False),  # at 00:00 (previous state; true without one)
        StructField("last_seq", LongType(), True),  # null: no event of this server is in the lake yet
        StructField("last_ts", TimestampType(), True),
        StructField("events", LongType(), False),  # events of this server on this day
        StructField("interesting_events", LongType(), False),  # of those, walked one by one
        StructField("started_without_state", BooleanType(), False),
        StructField("unresolved_topics", LongType(), False),  # 103s whose topic list was never logged
        StructField("state_json", StringType(), False),
        StructField("observed", BooleanType(), True),  # an observed server (nsaudit collect); null in older rows
        StructField("resolution_ms", LongType(), True),  # observed servers: the poll interval; else null
    ]
)
"""``ns_state``: one row per (date, ns), the end-of-day state the next day's rebuild starts from,
and the index of which servers a day covers (``state_json``: docs/audit.md, "Rebuild").
"""

ROUTE_SNAPSHOTS_SCHEMA = StructType(
    [
        StructField("snapshot_ts", TimestampType(), False),
        StructField("ns", StringType(), False),
        StructField("topic", StringType(), False),
        StructField("cluster", StringType(), True),  # null only if the name has no BrokerData (never, I4)
        StructField("broker_name", StringType(), False),
        StructField("broker_addrs", MapType(LongType(), StringType(), False), True),
        StructField("read_queue_nums", IntegerType(), False),
        StructField("write_queue_nums", IntegerType(), False),
        StructField("perm", IntegerType(), False),
        StructField("topic_sys_flag", IntegerType(), False),
        StructField("date", DateType(), False),
    ]
)
"""``route_snapshots``: the routes at ``day start + k * snapshot_interval_ms`` and at the end of
the day (``23:59:59.999``, the state after the day's last event), one row per (ns, topic, broker
name).
"""

# every rebuilt table is partitioned by its UTC day only; readers add ``ns`` as a row filter
PARTITION_BY = ["date"]
