"""The lake's ``findings`` table, shared by every audit stage (docs/interfaces.md, "The lake").

One row per thing a user should look at. Each stage owns one ``category`` and replaces its own
``(date, category)`` partition on every run (``jobs.lake.findings.write_findings``), so stages never
overwrite each other and a re-run adds nothing twice.
"""

from pyspark.sql.types import DateType, StringType, StructField, StructType, TimestampType

CATEGORIES = ("liveness", "consistency", "distribution", "telemetry", "security")
SEVERITIES = ("info", "warning", "critical")

FINDINGS_SCHEMA = StructType(
    [
        StructField("date", DateType(), False),  # the audited UTC day
        StructField("category", StringType(), False),  # one of CATEGORIES; the stage that wrote it
        StructField("kind", StringType(), False),  # e.g. seq_gap, late_expiry, ns_divergence
        StructField("severity", StringType(), False),  # one of SEVERITIES
        StructField("subject", StringType(), False),  # what it is about: topic, broker, address, ns id
        StructField("ns", StringType(), True),  # the name server concerned; null when about all
        StructField("start_ts", TimestampType(), True),  # UTC; null when the finding has no span
        StructField("end_ts", TimestampType(), True),
        StructField("detail", StringType(), False),  # JSON object text, keys per kind
        # the finding's content hash (jobs.lake.findings.finding_id), set when it is written
        StructField("finding_id", StringType(), True),
        # the incident it belongs to (jobs.analytics.incidents); null until that stage has run
        StructField("incident_id", StringType(), True),
    ]
)

LINK_COLUMNS = ("finding_id", "incident_id")  # what the writers add; stages leave them out

FINDINGS_PARTITION_BY = ("date", "category")
