"""Schemas of the liveness stage's tables (docs/interfaces.md, "The lake").

``liveness_windows``: one row per (server, address) window of liveness. ``broker_availability``:
one row per (date, broker address). Availability is live time over the UTC day's length, with
every liveness window clipped to the day; a window still open at the end of the day counts until
24:00. "Servers" are the name servers that have events on that day or a window carried into it.
Times are UTC ``*_ts`` timestamps, durations ``*_ms`` longs; both tables are partitioned by
``date`` and replaced per day.
"""

from __future__ import annotations

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

# "unknown": the address registered again with no removal logged before it (lost lines)
END_REASONS = ("unregister", "expire", "channel_close", "ns_stop", "ns_restart", "open", "unknown")

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

BROKER_AVAILABILITY_SCHEMA = StructType(
    [
        StructField("date", DateType(), False),
        StructField("broker_addr", StringType(), False),
        # identity of the address's latest window on any server that day
        StructField("cluster", StringType(), True),
        StructField("broker_name", StringType(), True),
        StructField("broker_id", LongType(), True),
        StructField("servers", IntegerType(), False),  # name servers audited that day
        StructField("windows", LongType(), False),  # liveness windows of the address, all servers
        # every audited server is a key; 0 where the address was never live on it
        StructField("live_ms_by_ns", MapType(StringType(), LongType(), False), False),
        StructField("availability_by_ns", MapType(StringType(), DoubleType(), False), False),
        StructField("live_any_ms", LongType(), False),  # live on at least one server
        StructField("live_all_ms", LongType(), False),  # live on every audited server at once
        StructField("availability_any", DoubleType(), False),
        StructField("availability_all", DoubleType(), False),
    ]
)
