"""Ingest's tables, cut from the checked lines and the sequencing: the ``events`` rows, the
``quarantine`` rows and the per-file sums of ``ingest_files`` (``accepted + quarantined ==
lines_read`` for every file).
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.ingest.sequence import STATUS_CONFLICT, STATUS_DUPLICATE
from jobs.spark.profile import broadcast
from schemas.events import EVENTS_TABLE_SCHEMA, QUARANTINE_SCHEMA
from schemas.ingest import DUPLICATE_SEQ_CONFLICT, INGEST_FILES_SCHEMA

# The listing's columns of ingest_files, as the stage turns the driver's file list into rows.
LISTING_SCHEMA = T.StructType(
    [INGEST_FILES_SCHEMA[c] for c in ("date", "ns", "file", "bytes", "compressed", "open_segment")]
)
# The dropped line ranges of a day where nothing was dropped.
NO_DROPS_SCHEMA = T.StructType(
    [T.StructField("file", T.StringType())] + [T.StructField(c, T.LongType()) for c in ("first_line", "last_line")]
)


def select_events(checked_df: DataFrame, dropped_ranges_df: DataFrame) -> DataFrame:
    """The ``events`` rows: accepted lines not in ``dropped_ranges_df``, in the table's columns."""
    ranges_df = dropped_ranges_df.select(
        F.col("file").alias("_r_file"), F.col("first_line").alias("_r_first"), F.col("last_line").alias("_r_last")
    )
    in_range = (
        (F.col("file") == F.col("_r_file")) & (F.col("line") >= F.col("_r_first")) & (F.col("line") <= F.col("_r_last"))
    )
    kept_df = checked_df.where(F.col("reason").isNull()).join(broadcast(ranges_df), in_range, "left_anti")
    columns = []
    for f in EVENTS_TABLE_SCHEMA.fields:
        if f.name == "ts":
            columns.append(F.timestamp_millis(F.col("event.ts")).alias("ts"))
        elif f.name == "ts_ms":
            columns.append(F.col("event.ts").alias("ts_ms"))
        elif f.name == "last_update_ts":
            columns.append(F.timestamp_millis(F.col("event.last_update_ts")).alias("last_update_ts"))
        elif f.name in ("date", "file", "line"):
            columns.append(F.col(f.name))
        else:
            columns.append(F.col("event")[f.name].alias(f.name))
    return kept_df.select(*columns)


def select_quarantine(checked_df: DataFrame) -> DataFrame:
    """``quarantine`` rows for the lines that failed a check."""
    return checked_df.where(F.col("reason").isNotNull()).select(*QUARANTINE_SCHEMA.names)


def select_conflicts(status_df: DataFrame, lines_df: DataFrame) -> DataFrame:
    """``quarantine`` rows for ``duplicate_seq_conflict`` lines, their raw text from ``lines_df``."""
    conflicts_df = status_df.where(F.col("status") == STATUS_CONFLICT).select(
        "file",
        "line",
        F.concat(
            F.lit(f"{DUPLICATE_SEQ_CONFLICT}: "), F.col("kept_file"), F.lit(":"), F.col("kept_line").cast("string")
        ).alias("reason"),
    )
    return lines_df.join(broadcast(conflicts_df), ["file", "line"]).select(
        "file", "line", F.regexp_replace("text", "\n$", "").alias("raw"), "reason", "ns", "date"
    )


def agg_ingest_files(listing_df: DataFrame, checked_df: DataFrame, status_df: DataFrame) -> DataFrame:
    """One ``ingest_files`` row per listed file (an empty file too), counts from both stages.

    ``listing_df``: the listing (``date``, ``ns``, ``file``, ``bytes``, ``compressed``,
    ``open_segment``); ``checked_df``: a row per line read with its ``reason``; ``status_df``:
    :func:`jobs.ingest.sequence.with_seq_status` rows. A conflict moves a line from accepted to
    quarantined, so the sum holds.
    """
    read_df = checked_df.groupBy("file").agg(F.count(F.lit(1)).alias("lines_read"), F.count("reason").alias("failed"))
    return join_ingest_files(listing_df, read_df, agg_seq_counts(status_df))


def agg_seq_counts(status_df: DataFrame) -> DataFrame:
    """Per file: ``accepted``, ``duplicates``, ``conflicts``, ``first_seq``, ``last_seq``."""
    accepted = F.col("status") != STATUS_CONFLICT
    return status_df.groupBy("file").agg(
        F.count(F.when(accepted, 1)).alias("accepted"),
        F.count(F.when(F.col("status") == STATUS_DUPLICATE, 1)).alias("duplicates"),
        F.count(F.when(~accepted, 1)).alias("conflicts"),
        F.min(F.when(accepted, F.col("seq"))).alias("first_seq"),
        F.max(F.when(accepted, F.col("seq"))).alias("last_seq"),
    )


def join_ingest_files(listing_df: DataFrame, read_df: DataFrame, seq_df: DataFrame) -> DataFrame:
    """``ingest_files`` rows from the listing, the read counts (``file``, ``lines_read``,
    ``failed``) and the sequencing counts (:func:`agg_seq_counts`' columns)."""
    zero = F.lit(0).cast(T.LongType())
    return (
        listing_df.join(read_df, "file", "left")
        .join(seq_df, "file", "left")
        .select(
            "date",
            "ns",
            "file",
            "bytes",
            "compressed",
            "open_segment",
            F.coalesce(F.col("lines_read").cast(T.LongType()), zero).alias("lines_read"),
            F.coalesce(F.col("accepted").cast(T.LongType()), zero).alias("accepted"),
            (
                F.coalesce(F.col("failed").cast(T.LongType()), zero)
                + F.coalesce(F.col("conflicts").cast(T.LongType()), zero)
            ).alias("quarantined"),
            F.coalesce(F.col("duplicates").cast(T.LongType()), zero).alias("duplicates"),
            F.col("first_seq").cast(T.LongType()).alias("first_seq"),
            F.col("last_seq").cast(T.LongType()).alias("last_seq"),
        )
    )
