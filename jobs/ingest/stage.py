"""Ingest: one UTC day of name-server event logs into the lake's ``events``, ``quarantine``,
``ingest_files`` and ``telemetry`` findings (event-log spec, interfaces spec "The lake").

Every line read ends up in exactly one place: ``events`` (a valid event, the first line of its
``(ns, seq)``), ``quarantine`` (with a reason, ``schemas.ingest``), or counted as a duplicate of
an event already kept. ``ingest_files`` has the sums per file, so ``accepted + quarantined ==
lines_read`` is checkable by anyone.

Shape of the job (:func:`run_ingest`):

1. ``jobs.ingest.lines`` lists ``<events>/<ns>/<day>/events-*``; ``jobs.ingest.scan`` reads every
   file in its own task, parses and checks its lines in batches with pyarrow and writes the good
   ones straight to a data file of ``events`` (committed at the end, with the rest, as one Delta
   transaction). Only the lines it does not accept are parsed again in the JVM
   (``jobs.ingest.lines.with_reason``), which accepts them or names their first problem.
2. ``jobs.ingest.sequence`` orders each server's accepted lines by ``(seq, file, line)``: the
   first line of a seq is kept, a later equal event is a duplicate, a later different one a
   conflict (quarantined); the same pass notes each kept event's predecessor.
3. Findings: ``seq_gap`` and ``clock_step_back`` between consecutive kept events, and from the
   previous day's last event in the lake; ``quarantined_lines`` and ``duplicate_events`` per file.

Every table is replaced for the day (``replace_where``), so re-running a day gives the same rows.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from jobs import lake
from jobs.lake.delta.arrow import local_table_path
from jobs.lake.delta.write import delete_failed_write, job_ids
from jobs.lake.tables import data_file_schema, read_table, table_exists, write_table
from jobs.lake.findings import finding_columns, write_findings
from jobs.ingest.scan import (
    build_plan,
    scan_lines,
)
from jobs.ingest.lines import (
    list_day_segments,
    read_lines,
    select_checked,
    with_event,
    with_reason,
)
from jobs.ingest.sequence import (
    STATUS_CONFLICT,
    STATUS_DUPLICATE,
    STATUS_KEEP,
    STATUS_SCHEMA,
    agg_dropped_line_ranges,
    agg_last_events,
    in_seq_order,
    pair_rows,
    select_kept_pairs,
    select_keys,
    sequence_generally,
    summaries_frame,
    with_seq_status,
)
from jobs.spark.session import is_native_delta_available
from jobs.spark.frames import local_frame
from common.config import Config
from schemas.events import EVENTS_TABLE_SCHEMA, QUARANTINE_SCHEMA
from schemas.ingest import (
    DUPLICATE_SEQ_CONFLICT,
    EVENTS_PARTITION_BY,
    INGEST_FILES_PARTITION_BY,
    INGEST_FILES_SCHEMA,
    QUARANTINE_PARTITION_BY,
)

log = logging.getLogger(__name__)

# The sequencing lives in jobs.ingest.sequence; these names stay importable from here.
__all__ = [
    "STATUS_CONFLICT",
    "STATUS_DUPLICATE",
    "STATUS_KEEP",
    "IngestResult",
    "agg_dropped_line_ranges",
    "agg_duplicate_events_findings",
    "agg_ingest_files",
    "agg_last_events",
    "agg_quarantined_lines_findings",
    "agg_seq_counts",
    "join_ingest_files",
    "run_ingest",
    "select_clock_step_back_findings",
    "select_conflicts",
    "select_events",
    "select_kept_pairs",
    "select_keys",
    "select_quarantine",
    "select_seq_gap_findings",
    "with_seq_status",
]

CATEGORY = "telemetry"

# The listing's columns of ingest_files, as the job turns the driver's file list into rows.
_LISTING_SCHEMA = T.StructType(
    [INGEST_FILES_SCHEMA[c] for c in ("date", "ns", "file", "bytes", "compressed", "open_segment")]
)
# What a pair of consecutive kept events of one server looks like to the findings.

@dataclass(frozen=True)
class IngestResult:
    """What one ingest run did, for the job's log and the audit summary.

    Attributes:
        day: the UTC day ingested.
        files: segment files read.
        lines_read: lines in them, cut-short last lines included.
        accepted: valid events, duplicates included.
        duplicates: accepted lines whose event was already kept.
        quarantined: lines written to ``quarantine``.
        events_written: rows written to ``events`` (``accepted - duplicates``).
        findings: telemetry findings written, per kind (kinds with none are absent).
    """

    day: dt.date
    files: int
    lines_read: int
    accepted: int
    duplicates: int
    quarantined: int
    events_written: int
    findings: dict[str, int] = field(default_factory=dict)


# ------------------------------------------------------------------------------------ tables


def select_events(checked_df: DataFrame, dropped_ranges_df: DataFrame) -> DataFrame:
    """The ``events`` rows: accepted lines not in ``dropped_ranges_df``, in the table's columns."""
    ranges_df = dropped_ranges_df.select(
        F.col("file").alias("_r_file"), F.col("first_line").alias("_r_first"), F.col("last_line").alias("_r_last")
    )
    in_range = (
        (F.col("file") == F.col("_r_file")) & (F.col("line") >= F.col("_r_first")) & (F.col("line") <= F.col("_r_last"))
    )
    kept_df = checked_df.where(F.col("reason").isNull()).join(F.broadcast(ranges_df), in_range, "left_anti")
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
    return lines_df.join(F.broadcast(conflicts_df), ["file", "line"]).select(
        "file", "line", F.regexp_replace("text", "\n$", "").alias("raw"), "reason", "ns", "date"
    )


def agg_ingest_files(listing_df: DataFrame, checked_df: DataFrame, status_df: DataFrame) -> DataFrame:
    """One ``ingest_files`` row per listed file (an empty file too), counts from both stages.

    ``listing_df``: the listing (``date``, ``ns``, ``file``, ``bytes``, ``compressed``,
    ``open_segment``); ``checked_df``: a row per line read with its ``reason``; ``status_df``:
    :func:`with_seq_status` rows. A conflict moves a line from accepted to quarantined, so the
    sum holds.
    """
    read_df = checked_df.groupBy("file").agg(
        F.count(F.lit(1)).alias("lines_read"), F.count("reason").alias("failed")
    )
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
            (F.coalesce(F.col("failed").cast(T.LongType()), zero) + F.coalesce(F.col("conflicts").cast(T.LongType()), zero)).alias("quarantined"),
            F.coalesce(F.col("duplicates").cast(T.LongType()), zero).alias("duplicates"),
            F.col("first_seq").cast(T.LongType()).alias("first_seq"),
            F.col("last_seq").cast(T.LongType()).alias("last_seq"),
        )
    )


# ---------------------------------------------------------------------------------- findings


def select_seq_gap_findings(pairs_df: DataFrame) -> DataFrame:
    """``seq_gap`` (warning): consecutive kept events of a server whose seqs are not adjacent.

    ``pairs_df``: :func:`select_kept_pairs` rows. Subject is the server; the span runs from the
    event before the gap to the one after it; ``files`` names both events' files.
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
            detail={"file": F.col("file"), "count": F.col("count"), "reasons": F.col("reasons"),
                    "first_line": F.col("first_line")},
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
            detail={"file": F.col("file"), "count": F.col("count"), "first_seq": F.col("first_seq"),
                    "last_seq": F.col("last_seq"), "duplicate_of": F.col("duplicate_of")},
        )
    )


# ------------------------------------------------------------------------------------------ job


def run_ingest(
    spark: SparkSession,
    events_dir: str | os.PathLike,
    lake_dir: str | os.PathLike,
    day: dt.date,
    config: Config | None = None,
) -> IngestResult:
    """Ingest one UTC day: replace its ``events``, ``quarantine``, ``ingest_files`` and
    ``telemetry`` findings in the lake.

    Args:
        spark: the session.
        events_dir: the event-log root (``--events``).
        lake_dir: the lake root (``--lake``).
        day: the UTC day; its segments are the files under ``<events>/<ns>/<day>/``.
        config: the run's configuration; ingest has no settings of its own and takes it so
            every stage is called the same way.

    Returns:
        The counts of the run.

    Raises:
        IngestInputError: no events directory, or no segment for the day (nothing is written).
    """
    files = list_day_segments(events_dir, day)
    listing_df = local_frame(
        spark, [(f.date, f.ns, f.file, f.bytes, f.compressed, f.open_segment) for f in files], _LISTING_SCHEMA
    )
    events_path = lake.table_path(lake_dir, lake.EVENTS)
    file_struct = data_file_schema(events_path, EVENTS_TABLE_SCHEMA, EVENTS_PARTITION_BY)
    plan = build_plan(
        local_table_path(events_path), EVENTS_PARTITION_BY, to_arrow_schema(file_struct),
        # delta-spark commits only the files it wrote itself: every line takes the JVM path
        write_events=not is_native_delta_available(spark),
    )
    cached: list[DataFrame] = []
    staged: list[dict] = []  # data files written by the scan, not committed yet
    committed = False
    jobs_before = job_ids(spark)
    where = {"date": day}

    def cache(df: DataFrame) -> DataFrame:
        cached.append(df.persist(StorageLevel.MEMORY_AND_DISK))
        return cached[-1]

    try:
        # Each file is read once: its good lines are parsed and written by the fast path, the
        # rest are judged in the JVM (jobs.ingest.scan). Every table below is cut from these.
        scanned_df = cache(scan_lines(spark, files, plan))
        with _timed("read, check and write events"):
            summaries = [
                (r["ns"], r["file"], json.loads(r["summary"]))
                for r in scanned_df.where("line = 0").select("ns", "file", "summary").collect()
            ]
        staged = [summary["data_file"] for _, _, summary in summaries if summary["data_file"]]
        slow_lines_df = scanned_df.where("line > 0").select("date", "ns", "file", "line", "text", "read_problem")
        if all_lines_fast(summaries):
            # The JVM has no line to judge. Over an empty local relation Spark folds every query
            # below away, rather than plan and compile the checks for each (seconds apiece).
            slow_lines_df = local_frame(spark, [], slow_lines_df.schema)
        slow_df = cache(slow_lines_df.transform(with_event).transform(with_reason).transform(select_checked))
        read_df = summaries_frame(spark, summaries).select("file", "lines_read").join(
            slow_df.groupBy("file").agg(F.count("reason").alias("failed")), "file", "left"
        )
        with _timed("sequence"):
            in_order = slow_df.where(F.col("reason").isNull()).isEmpty() and in_seq_order(summaries)
            status_df = dropped_df = None
            if in_order:
                # Every event was accepted by the fast path and each server's files hold disjoint,
                # rising seq ranges: nothing repeats, and the consecutive pairs are known already.
                pairs_status_df = local_frame(spark, pair_rows(summaries), STATUS_SCHEMA)
                seq_df = summaries_frame(spark, summaries).select(
                    "file", "accepted", "duplicates", "conflicts", "first_seq", "last_seq"
                )
            else:
                status_df, dropped_df, staged = sequence_generally(spark, files, plan, staged, slow_df, cache)
                pairs_status_df = status_df
                seq_df = agg_seq_counts(status_df)
        quarantine_df = select_quarantine(slow_df)
        if status_df is not None:
            conflicts_df = status_df.where(F.col("status") == STATUS_CONFLICT)
            conflict_files = {r["file"] for r in conflicts_df.select("file").distinct().collect()}
            if conflict_files:
                # Accepted lines keep no raw text; the few files with conflicts are read again.
                lines_text_df = read_lines(spark, [f for f in files if f.file in conflict_files])
                quarantine_df = quarantine_df.unionByName(select_conflicts(status_df, lines_text_df))
        # The small tables are written by one task each: a write task costs a Python worker.
        quarantine_df = cache(quarantine_df.coalesce(1))
        pairs_df = select_kept_pairs(pairs_status_df, _previous_day_last_events(spark, lake_dir, day))
        findings_df = (
            select_seq_gap_findings(pairs_df)
            .unionByName(select_clock_step_back_findings(pairs_df))
            .unionByName(agg_quarantined_lines_findings(quarantine_df))
        )
        if status_df is not None:
            findings_df = findings_df.unionByName(agg_duplicate_events_findings(status_df))
        findings_df = cache(findings_df.coalesce(1))
        ingest_files_df = cache(join_ingest_files(listing_df, read_df, seq_df).coalesce(1))

        with _timed("events"):
            # the JVM-judged events, committed with the fast path's files as one transaction
            no_drops_df = local_frame(spark, [], T.StructType(
                [T.StructField("file", T.StringType())]
                + [T.StructField(c, T.LongType()) for c in ("first_line", "last_line")]))
            slow_events_df = select_events(slow_df, dropped_df if dropped_df is not None else no_drops_df)
            if plan.write_events:
                slow_events_df = slow_events_df.coalesce(1)  # the few lines the fast path left
            write_table(slow_events_df, events_path, mode="overwrite",
                        partition_by=list(EVENTS_PARTITION_BY), replace_where=where, schema=EVENTS_TABLE_SCHEMA,
                        extra_files=staged)
            committed = True
        with _timed("quarantine"):
            write_table(quarantine_df, lake.table_path(lake_dir, lake.QUARANTINE), mode="overwrite",
                        partition_by=list(QUARANTINE_PARTITION_BY), replace_where=where, schema=QUARANTINE_SCHEMA)
        with _timed("ingest_files"):
            write_table(ingest_files_df, lake.table_path(lake_dir, lake.INGEST_FILES), mode="overwrite",
                        partition_by=list(INGEST_FILES_PARTITION_BY), replace_where=where,
                        schema=INGEST_FILES_SCHEMA)
        with _timed("findings"):
            write_findings(findings_df, lake_dir, day, CATEGORY)
        result = _result(day, ingest_files_df, findings_df)
    except BaseException:
        if not committed:
            # by the run's id, not from ``staged``: a failed scan's finished tasks wrote files too
            delete_failed_write(spark, jobs_before, plan.table_path, plan.partition_by, where, plan.write_id)
        raise
    finally:
        for df in cached:
            df.unpersist()
    log.info(
        "ingest %s: %d files, %d lines read, %d accepted (%d duplicates), %d quarantined, %d events; findings %s",
        day, result.files, result.lines_read, result.accepted, result.duplicates, result.quarantined,
        result.events_written, result.findings or "none",
    )
    return result


def all_lines_fast(summaries: list[tuple[str, str, dict]]) -> bool:
    """Whether the fast path accepted every line of every file (``(ns, file, summary)`` of the
    scan), so that no line is left for the JVM."""
    return all(summary["fast"] == summary["lines"] for _, _, summary in summaries)


@contextmanager
def _timed(step: str) -> Iterator[None]:
    start = time.perf_counter()
    yield
    log.info("ingest: %s took %.1f s", step, time.perf_counter() - start)


def _previous_day_last_events(spark: SparkSession, lake_dir: str | os.PathLike, day: dt.date) -> DataFrame:
    """The last event of each server on the day before, from the lake (empty if none)."""
    path = lake.table_path(lake_dir, lake.EVENTS)
    columns = ("ns", "seq", "ts_ms", "file")
    if not table_exists(path):
        return local_frame(spark, [], T.StructType([EVENTS_TABLE_SCHEMA[c] for c in columns]))
    previous_df = read_table(spark, path, EVENTS_TABLE_SCHEMA, where={"date": day - dt.timedelta(days=1)})
    return agg_last_events(previous_df.select(*columns))


def _result(day: dt.date, ingest_files_df: DataFrame, findings_df: DataFrame) -> IngestResult:
    totals = ingest_files_df.agg(
        F.count(F.lit(1)).alias("files"),
        *[F.sum(c).alias(c) for c in ("lines_read", "accepted", "duplicates", "quarantined")],
    ).first()
    by_kind = {r["kind"]: r["n"] for r in findings_df.groupBy("kind").agg(F.count(F.lit(1)).alias("n")).collect()}
    accepted, duplicates = totals["accepted"] or 0, totals["duplicates"] or 0
    return IngestResult(
        day=day,
        files=totals["files"],
        lines_read=totals["lines_read"] or 0,
        accepted=accepted,
        duplicates=duplicates,
        quarantined=totals["quarantined"] or 0,
        events_written=accepted - duplicates,
        findings=dict(sorted(by_kind.items())),
    )
