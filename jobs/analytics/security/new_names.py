"""``new_cluster`` / ``new_broker_name`` (info): a name registered today that no earlier day in the
lake knows; warning when the lake has earlier days and the name came with a takeover (it is the
takeover's cluster or broker name, or its first registration came from a host that made a
takeover today)."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.analytics.security.columns import host_of, to_ts
from jobs.lake.findings import finding_columns
from jobs.spark.profile import broadcast

NAME_COLUMNS = ("cluster", "broker_name")  # finding kinds new_cluster, new_broker_name
SEEN_NAME_COLUMNS = ("kind", "name")


def with_names(df: DataFrame, *keep: str) -> DataFrame:
    """Two rows per input row, ``kind`` = ``cluster`` / ``broker_name`` and ``name`` its value
    (null names dropped), plus the ``keep`` columns."""
    names = F.array(*[F.struct(F.lit(kind).alias("kind"), F.col(kind).alias("name")) for kind in NAME_COLUMNS])
    return (
        df.select(F.explode(names).alias("_n"), *keep)
        .select("_n.kind", "_n.name", *keep)
        .where(F.col("name").isNotNull())
    )


def select_seen_names(registrations_df: DataFrame) -> DataFrame:
    """``kind`` (``cluster`` / ``broker_name``) and ``name`` of every registration, distinct."""
    return with_names(registrations_df).distinct()


def agg_new_names(
    pairs_df: DataFrame, known_df: DataFrame, has_history_df: DataFrame, takeover_rows_df: DataFrame
) -> DataFrame:
    """``new_cluster`` / ``new_broker_name`` findings: today's names absent from ``known_df``.

    Args:
        pairs_df: :func:`jobs.analytics.security.columns.agg_registration_pairs` rows of the day
            (``carried`` false).
        known_df: ``kind``, ``name`` seen on earlier days.
        has_history_df: one row, ``has_history`` (the lake has events of earlier days).
        takeover_rows_df: today's :func:`jobs.analytics.security.takeover.agg_takeovers` rows.
    """
    # From the pair rows (a few per address): the earliest of each pair's earliest is the
    # earliest registration, and the peer's host is parsed on those rows, not per heartbeat.
    today_df = (
        with_names(pairs_df, "start_ms", "end_ms", "registrations", "ns", "broker_addr", "remote")
        .withColumn("remote_host", host_of(F.col("remote")))
        .groupBy("kind", "name")
        .agg(
            F.min("start_ms").alias("start_ms"),
            F.max("end_ms").alias("end_ms"),
            F.sum("registrations").alias("registrations"),
            # the earliest registration; ties between servers broken by ns, so reruns agree
            F.min(F.struct(F.col("start_ms").alias("ts_ms"), "ns", "broker_addr", "remote_host")).alias("first"),
        )
        .join(known_df.select(*SEEN_NAME_COLUMNS), ["kind", "name"], "left_anti")
    )
    in_takeover_df = select_seen_names(takeover_rows_df).withColumn("in_takeover", F.lit(True))
    takeover_hosts_df = (
        takeover_rows_df.where(F.col("remote_host").isNotNull())
        .select(F.col("remote_host").alias("t_host"))
        .distinct()
        .withColumn("from_takeover_host", F.lit(True))
    )
    flagged_df = (
        today_df.join(in_takeover_df, ["kind", "name"], "left")
        .join(takeover_hosts_df, F.col("first.remote_host") == F.col("t_host"), "left")
        .crossJoin(broadcast(has_history_df))
    )
    together = F.coalesce(F.col("in_takeover"), F.col("from_takeover_host"), F.lit(False))
    return flagged_df.select(
        *finding_columns(
            kind=F.concat(F.lit("new_"), F.col("kind")),
            severity=F.when(F.col("has_history") & together, "warning").otherwise("info"),
            subject=F.col("name"),
            ns=F.col("first.ns"),
            start_ts=to_ts(F.col("start_ms")),
            end_ts=to_ts(F.col("end_ms")),
            detail={
                "first_broker_addr": F.col("first.broker_addr"),
                "first_remote_host": F.col("first.remote_host"),
                "registrations": F.col("registrations"),
                "lake_has_history": F.col("has_history"),
                "with_takeover": together,
            },
        )
    )
