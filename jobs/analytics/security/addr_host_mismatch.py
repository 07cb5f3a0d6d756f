"""``addr_host_mismatch`` (warning, subject the broker address): registrations whose advertised
``broker_addr`` host is not the connection's peer host (``remote``). Brokers behind NAT do this
legitimately; a rogue advertising someone else's address does too."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.analytics.security.columns import to_ts, with_hosts
from jobs.lake.findings import finding_columns


def agg_addr_host_mismatch(pairs_df: DataFrame) -> DataFrame:
    """``addr_host_mismatch`` findings: one per (ns, broker address, peer host) over the day.

    Rows without a peer or an address host are skipped: there is nothing to compare. The hosts
    are a function of the two address texts, so they are parsed on the pair rows, not on every
    heartbeat. The identity reported is that of the first mismatching registration: the pair row
    with the least ``first_seq`` (``seq`` is unique per server).

    Args:
        pairs_df: :func:`jobs.analytics.security.columns.agg_registration_pairs` rows of the day
            (``carried`` false).
    """
    differ = (
        F.col("remote_host").isNotNull() & F.col("addr_host").isNotNull() & (F.col("remote_host") != F.col("addr_host"))
    )
    return (
        with_hosts(pairs_df)
        # One condition that also names an aggregate (always true): Spark would otherwise push a
        # condition on the grouping keys below the aggregate and parse every registration's hosts.
        .where(F.when(F.col("registrations") > 0, differ).otherwise(F.lit(False)))
        .groupBy("ns", "broker_addr", "remote_host")
        .agg(
            F.min("start_ms").alias("start_ms"),
            F.max("end_ms").alias("end_ms"),
            F.sum("registrations").alias("registrations"),
            F.first("addr_host").alias("addr_host"),  # one broker_addr: one host
            F.min(F.struct("first_seq", "cluster", "broker_name", "broker_id")).alias("first"),
        )
        .select(
            *finding_columns(
                kind="addr_host_mismatch",
                severity="warning",
                subject=F.col("broker_addr"),
                ns=F.col("ns"),
                start_ts=to_ts(F.col("start_ms")),
                end_ts=to_ts(F.col("end_ms")),
                detail={
                    "broker_addr": F.col("broker_addr"),
                    "addr_host": F.col("addr_host"),
                    "remote_host": F.col("remote_host"),
                    "cluster": F.col("first.cluster"),
                    "broker_name": F.col("first.broker_name"),
                    "broker_id": F.col("first.broker_id"),
                    "registrations": F.col("registrations"),
                },
            )
        )
    )
