"""A window's identity (``cluster``, ``broker_name``, ``broker_id``), looked up for its few rows
after the stream sort of :mod:`jobs.analytics.liveness.windows`, which carries numbers only."""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.spark.profile import broadcast
from nameserver.codec import RequestCode

IDENTITY_COLUMNS = ("cluster", "broker_name", "broker_id")


def with_window_identity(windows_df: DataFrame, named_df: DataFrame) -> DataFrame:
    """Add ``cluster``, ``broker_name`` and ``broker_id``: those of the window's ``id_seq`` event.

    That is the window's latest 103, ``expire`` or ``channel_close``, else its ``_carry`` row
    (seq 0); without one the identity is null. Several rows with one seq (not in a well-formed
    log) give the greatest identity, as a max over (seq, identity) would.

    Args:
        windows_df: :func:`jobs.analytics.liveness.windows.agg_windows` rows (few: the lookup keys are broadcast).
        named_df: ``ns``, ``broker_addr``, ``seq`` and ``IDENTITY_COLUMNS`` of the events that can
            name a window, and of the ``_carry`` rows with seq 0.
    """
    keys_df = windows_df.select("ns", "broker_addr", F.col("id_seq").alias("seq")).where(F.col("seq").isNotNull())
    ids_df = (
        named_df.join(broadcast(keys_df.distinct()), ["ns", "broker_addr", "seq"], "left_semi")
        .groupBy("ns", "broker_addr", "seq")
        .agg(F.max(F.struct(*IDENTITY_COLUMNS)).alias("_id"))
        .select(
            "ns", "broker_addr", F.col("seq").alias("id_seq"), *[F.col("_id")[c].alias(c) for c in IDENTITY_COLUMNS]
        )
    )
    return windows_df.join(ids_df, ["ns", "broker_addr", "id_seq"], "left")


def select_named_rows(events_df: DataFrame, carry_df: DataFrame) -> DataFrame:
    """The rows that can name a window, for :func:`with_window_identity`: the address events that
    prove a live entry (a 103, ``expire``, ``channel_close``) and the ``_carry`` rows (seq 0).

    Returns:
        ``ns``, ``broker_addr``, ``seq`` and ``IDENTITY_COLUMNS``.
    """
    proving = (
        F.col("type").isin("register", "heartbeat") & (F.col("request_code") == int(RequestCode.REGISTER_BROKER))
    ) | F.col("type").isin("expire", "channel_close")
    events_df = events_df.where(F.col("broker_addr").isNotNull() & proving)
    return events_df.select("ns", "broker_addr", "seq", *IDENTITY_COLUMNS).unionByName(
        carry_df.select("ns", "broker_addr", F.lit(0).cast(T.LongType()).alias("seq"), *IDENTITY_COLUMNS)
    )
