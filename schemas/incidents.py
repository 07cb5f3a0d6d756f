"""The lake's ``incidents`` table: the day's findings grouped by root cause (docs/audit.md, "Incidents").

One row per incident; every finding of the day names its incident in ``findings.incident_id``.
"""

from pyspark.sql.types import (
    ArrayType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

INCIDENTS_SCHEMA = StructType(
    [
        StructField("date", DateType(), False),  # the audited UTC day
        StructField("incident_id", StringType(), False),  # "inc-" + 12 hex digits, stable across reruns
        StructField("root_cause", StringType(), False),  # e.g. master_lost, write_perm_wiped, server_restart
        StructField("subject", StringType(), False),  # broker name, topic, server id, cluster, ...
        StructField("servers", ArrayType(StringType(), False), False),  # name servers concerned, sorted
        StructField("start_ts", TimestampType(), False),  # the earliest start of its findings
        StructField("end_ts", TimestampType(), False),  # the latest end of its findings
        StructField("duration_ms", LongType(), False),
        StructField("severity", StringType(), False),  # the worst of its findings
        StructField("findings", IntegerType(), False),  # how many findings it groups
        StructField("kinds", ArrayType(StringType(), False), False),  # their kinds, sorted
        StructField("topics_unwritable", IntegerType(), False),  # topics a producer got no queue for
        StructField("write_queues_unwritable", LongType(), False),  # their write queues
        StructField("topics_unroutable", IntegerType(), False),  # topics missing on some servers
        StructField("client_share", DoubleType(), False),  # servers concerned / servers of the day (k/n)
        StructField("finding_ids", ArrayType(StringType(), False), False),  # its findings, sorted
    ]
)

PARTITION_BY = ("date",)
