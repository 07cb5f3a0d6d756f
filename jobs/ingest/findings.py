"""Ingest's ``telemetry`` findings: lost events (``seq_gap``), a server clock that went back
(``clock_step_back``), and per file, quarantined lines and duplicate events.
"""

from __future__ import annotations

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.ingest.sequence import STATUS_DUPLICATE
from jobs.lake.findings import finding_columns

CATEGORY = "telemetry"


def select_seq_gap_findings(pairs_df: DataFrame) -> DataFrame:
    """``seq_gap`` (warning): consecutive kept events of a server whose seqs are not adjacent.

    ``pairs_df``: :func:`jobs.ingest.sequence.select_kept_pairs` rows. Subject is the server;
    the span runs from the event before the gap to the one after it; ``files`` names both
    events' files.
    """
    return pairs_df.where(F.col("seq") > F.col("prev_seq") + 1).select(
        *finding_columns(
            kind="seq_gap",
            severity="warning",
            subject=F.col("ns"),
            ns=F.col("ns"),
            # a gap may coincide with a clock step back; the span stays start <= end
            start_ts=F.timestamp_millis(F.least("prev_ts_ms", "ts_ms")),
            end_ts=F.timestamp_millis(F.greatest("prev_ts_ms", "ts_ms")),
            detail={
                "after_seq": F.col("prev_seq"),
                "next_seq": F.col("seq"),
                "missing": F.col("seq") - F.col("prev_seq") - 1,
                "files": F.array_distinct(F.array("prev_file", "file")),
            },
        )
    )


def select_clock_step_back_findings(pairs_df: DataFrame) -> DataFrame:
    """``clock_step_back`` (warning): a kept event whose ``ts`` is before the previous one's.

    The span runs from the event's ``ts`` to the previous ``ts`` (the stretch of time the
    server's clock went through twice).
    """
    return pairs_df.where(F.col("ts_ms") < F.col("prev_ts_ms")).select(
        *finding_columns(
            kind="clock_step_back",
            severity="warning",
            subject=F.col("ns"),
            ns=F.col("ns"),
            start_ts=F.timestamp_millis("ts_ms"),
            end_ts=F.timestamp_millis("prev_ts_ms"),
            detail={
                "seq": F.col("seq"),
                "ts": F.timestamp_millis("ts_ms"),
                "previous_seq": F.col("prev_seq"),
                "previous_ts": F.timestamp_millis("prev_ts_ms"),
                "step_ms": F.col("prev_ts_ms") - F.col("ts_ms"),
                "file": F.col("file"),
                "line": F.col("line"),
            },
        )
    )


def agg_quarantined_lines_findings(quarantine_df: DataFrame) -> DataFrame:
    """``quarantined_lines`` (warning): one per file with quarantined lines.

    ``detail``: ``file``, ``count``, ``reasons`` (reason code -> lines), ``first_line``.
    """
    code = F.trim(F.substring_index("reason", ":", 1))
    per_reason_df = quarantine_df.groupBy("ns", "file", code.alias("code")).agg(
        F.count(F.lit(1)).alias("n"), F.min("line").alias("first_line")
    )
    per_file_df = per_reason_df.groupBy("ns", "file").agg(
        F.sum("n").alias("count"),
        F.map_from_entries(F.array_sort(F.collect_list(F.struct("code", "n")))).alias("reasons"),
        F.min("first_line").alias("first_line"),
    )
    return per_file_df.select(
        *finding_columns(
            kind="quarantined_lines",
            severity="warning",
            subject=F.col("ns"),
            ns=F.col("ns"),
            detail={
                "file": F.col("file"),
                "count": F.col("count"),
                "reasons": F.col("reasons"),
                "first_line": F.col("first_line"),
            },
        )
    )


def agg_duplicate_events_findings(status_df: DataFrame) -> DataFrame:
    """``duplicate_events`` (info): one per file with lines repeating an event already kept.

    ``detail``: ``file``, ``count``, ``first_seq``, ``last_seq``, ``duplicate_of`` (the files
    holding the kept copies, sorted).
    """
    per_file_df = (
        status_df.where(F.col("status") == STATUS_DUPLICATE)
        .groupBy("ns", "file")
        .agg(
            F.count(F.lit(1)).alias("count"),
            F.min("seq").alias("first_seq"),
            F.max("seq").alias("last_seq"),
            F.array_sort(F.collect_set("kept_file")).alias("duplicate_of"),
        )
    )
    return per_file_df.select(
        *finding_columns(
            kind="duplicate_events",
            severity="info",
            subject=F.col("ns"),
            ns=F.col("ns"),
            detail={
                "file": F.col("file"),
                "count": F.col("count"),
                "first_seq": F.col("first_seq"),
                "last_seq": F.col("last_seq"),
                "duplicate_of": F.col("duplicate_of"),
            },
        )
    )
