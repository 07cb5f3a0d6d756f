"""Schema of the divergence stage's table, ``ns_divergences`` (docs/interfaces.md, "The lake"):
one row per episode where the name servers disagreed, partitioned by ``date`` and replaced per day.
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

NS_DIVERGENCES_SCHEMA = StructType(
    [
        StructField("date", DateType(), False),
        StructField(
            "kind", StringType(), False
        ),  # route_missing | broker_missing | queue_data_mismatch | broker_addrs_mismatch
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
