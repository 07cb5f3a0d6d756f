"""``refused_requests`` (warning, subject the source host): ``rejected`` events with reason
``no_permission`` (access control, ``nameserver.acl``), all servers together."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.analytics.security.columns import to_ts
from jobs.analytics.security.params import SecurityParams
from jobs.lake.findings import finding_columns


def agg_refused_requests(events_df: DataFrame, params: SecurityParams) -> DataFrame:
    """``refused_requests`` findings: ``no_permission`` refusals per source host, all servers.

    A refusal without a peer address is grouped under ``unknown``.
    """
    return (
        events_df.where((F.col("type") == "rejected") & (F.col("reason") == "no_permission"))
        .withColumn("source", F.coalesce(F.col("remote_host"), F.lit("unknown")))
        .groupBy("source")
        .agg(
            F.count(F.lit(1)).alias("refused"),
            F.min("ts_ms").alias("start_ms"),
            F.max("ts_ms").alias("end_ms"),
            F.array_sort(F.collect_set("ns")).alias("ns_ids"),
            F.array_sort(F.collect_set("request_code")).alias("request_codes"),
            F.array_sort(F.collect_set("detail")).alias("details"),
            F.array_sort(F.collect_set("access_key")).alias("access_keys"),
        )
        .where(F.col("refused") >= params.refused_requests_min)
        .select(
            *finding_columns(
                kind="refused_requests",
                severity="warning",
                subject=F.col("source"),
                ns=None,
                start_ts=to_ts(F.col("start_ms")),
                end_ts=to_ts(F.col("end_ms")),
                detail={
                    "refused": F.col("refused"),
                    "ns_ids": F.col("ns_ids"),
                    "request_codes": F.col("request_codes"),
                    "details": F.col("details"),
                    "access_keys": F.col("access_keys"),
                },
            )
        )
    )
