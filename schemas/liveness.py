"""Schemas of the liveness stage's own tables, beside ``schemas.audit.LIVENESS_WINDOWS_SCHEMA``.

``broker_availability``: one row per (date, broker address), partitioned by ``date`` and
replaced per day. Availability is live time over the UTC day's length (86 400 000 ms), with every
liveness window clipped to the day; a window still open at the end of the day counts until 24:00.
"Servers" are the name servers that have events on that day or a window carried into it.
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
