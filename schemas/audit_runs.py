"""Schema of ``audit_runs`` (docs/interfaces.md, "The lake"): one row per audited day."""

from __future__ import annotations

from pyspark.sql.types import DateType, DoubleType, StringType, StructField, StructType, TimestampType

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
