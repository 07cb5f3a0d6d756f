"""Schemas of the audit tables (interfaces spec, "The lake"): liveness windows and divergences.

Times are UTC ``TimestampType`` columns named ``*_ts``; durations are ``*_ms`` longs. Each table
is partitioned by ``date`` (the audited UTC day) and replaced per day by its stage.
"""

from pyspark.sql.types import (
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

END_REASONS = ("unregister", "expire", "channel_close", "ns_stop", "ns_restart", "open")

LIVENESS_WINDOWS_SCHEMA = StructType(
    [
        StructField("date", DateType(), False),
        StructField("ns", StringType(), False),
        # identity of the latest registration in the window
        StructField("cluster", StringType(), True),
        StructField("broker_name", StringType(), True),
        StructField("broker_id", LongType(), True),
        StructField("broker_addr", StringType(), False),
        StructField("start_ts", TimestampType(), False),
        StructField("end_ts", TimestampType(), True),  # null while open
        StructField("end_reason", StringType(), False),  # one of END_REASONS
        StructField("carried_in", StringType(), True),  # "previous_day" when open at 00:00
        StructField("heartbeats", LongType(), False),  # refreshes in the window, registration included
        StructField("max_gap_ms", LongType(), True),
        StructField("p50_gap_ms", LongType(), True),
        StructField("p99_gap_ms", LongType(), True),
        StructField("late_heartbeats", LongType(), False),  # gaps over period + tolerance
        StructField("last_update_ts", TimestampType(), True),  # last refresh seen in the window
        StructField("duration_ms", LongType(), True),
    ]
)

NS_DIVERGENCES_SCHEMA = StructType(
    [
        StructField("date", DateType(), False),
        StructField("kind", StringType(), False),  # route_missing | broker_missing | queue_data_mismatch | broker_addrs_mismatch
        StructField("topic", StringType(), True),
        StructField("broker_name", StringType(), True),
        StructField("broker_addr", StringType(), True),
        StructField("start_ts", TimestampType(), False),
        StructField("end_ts", TimestampType(), True),
        StructField("duration_ms", LongType(), True),
        StructField("ns_views", MapType(StringType(), StringType(), True), False),  # ns -> value or "absent"
        StructField("servers_wrong", IntegerType(), True),
        StructField("servers_up", IntegerType(), True),
        StructField("exposure", DoubleType(), True),  # share of servers in the minority view x duration (ms)
    ]
)

# one row per audited day, written last (jobs.lake.audit_runs)
AUDIT_RUNS_SCHEMA = StructType(
    [
        StructField("date", DateType(), False),
        StructField("status", StringType(), False),  # ok
        StructField("finished_ts", TimestampType(), False),
        StructField("seconds", DoubleType(), False),
        StructField("stages", StringType(), False),  # JSON list: stage, seconds, counts
        StructField("findings", StringType(), False),  # JSON object: severity -> count
    ]
)
