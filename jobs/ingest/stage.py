"""Ingest: one UTC day of name-server event logs into the lake's ``events``, ``quarantine``,
``ingest_files`` and ``telemetry`` findings (docs/event-log.md, docs/interfaces.md "The lake").

Every line read ends up in exactly one place: ``events`` (a valid event, the first line of its
``(ns, seq)``), ``quarantine`` (with a reason, ``schemas.ingest``), or counted as a duplicate of
an event already kept. :func:`run_ingest` reads (the fast path's scan, the JVM checks of the
lines it left), sequences, cuts the tables and findings, and replaces the day's rows of each.
"""

from __future__ import annotations

import datetime as dt
import json
import logging
import os
from dataclasses import dataclass, field
from typing import Any

from pyspark import StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from common.config import Config
from jobs import lake
from jobs.ingest.checks import checked_schema, select_checked, with_event, with_reason
from jobs.ingest.datafiles import read_fast_keys, rewrite_staged
from jobs.ingest.findings import (
    CATEGORY,
    agg_duplicate_events_findings,
    agg_quarantined_lines_findings,
    select_clock_step_back_findings,
    select_seq_gap_findings,
)
from jobs.ingest.plan import FastPlan, build_plan
from jobs.ingest.scan import scan_lines
from jobs.ingest.segments import SegmentFile, list_day_segments, read_lines
from jobs.ingest.sequence import (
    STATUS_CONFLICT,
    STATUS_KEEP,
    STATUS_SCHEMA,
    agg_dropped_line_ranges,
    agg_last_events,
    in_seq_order,
    pair_rows,
    select_kept_pairs,
    select_keys,
    select_repeated_fast_lines,
    summaries_frame,
    with_fast_event_hashes,
    with_seq_status,
)
from jobs.ingest.tables import (
    LISTING_SCHEMA,
    NO_DROPS_SCHEMA,
    agg_seq_counts,
    join_ingest_files,
    select_conflicts,
    select_events,
    select_quarantine,
)
from jobs.lake.days import read_day_arrow, replace_day
from jobs.lake.findings import DayFindings
from jobs.lake.tables import data_file_schema, delete_failed_write, job_ids, read_table, table_exists, table_root
from jobs.spark.frames import local_frame
from jobs.spark.session import lake_writer
from jobs.timing import timed
from schemas.events import EVENTS_TABLE_SCHEMA, QUARANTINE_SCHEMA
from schemas.ingest import EVENTS_PARTITION_BY, INGEST_FILES_PARTITION_BY, INGEST_FILES_SCHEMA, QUARANTINE_PARTITION_BY

log = logging.getLogger(__name__)


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
        findings: telemetry findings written, per kind (kinds with none are absent); empty in
            the nightly audit, which writes every stage's findings at its end.
    """

    day: dt.date
    files: int
    lines_read: int
    accepted: int
    duplicates: int
    quarantined: int
    events_written: int
    findings: dict[str, int] = field(default_factory=dict)


class _Persisted:
    """The frames a run persisted, freed when it ends."""

    def __init__(self) -> None:
        self.frames: list[DataFrame] = []

    def __call__(self, df: DataFrame) -> DataFrame:
        self.frames.append(df.persist(StorageLevel.MEMORY_AND_DISK))
        return self.frames[-1]

    def release(self) -> None:
        for df in self.frames:
            df.unpersist()


@dataclass(frozen=True)
class _Scanned:
    """The day as read: each file's summary, the fast path's data files (not committed yet), the
    JVM-checked lines the fast path left (``select_checked`` rows), and per-file read counts."""

    summaries: list[tuple[str, str, dict[str, Any]]]
    staged: list[dict[str, Any]]
    slow_df: DataFrame
    read_df: DataFrame


@dataclass(frozen=True)
class _Sequenced:
    """The sequencing: statuses (None when the day was in order), dropped line ranges (None when
    nothing was dropped), the rows kept pairs are cut from, per-file counts, the data files."""

    status_df: DataFrame | None
    dropped_df: DataFrame | None
    pairs_status_df: DataFrame
    seq_df: DataFrame
    staged: list[dict[str, Any]]


@dataclass(frozen=True)
class _Outputs:
    quarantine_df: DataFrame
    findings_df: DataFrame
    ingest_files_df: DataFrame


def run_ingest(
    spark: SparkSession,
    events_dir: str | os.PathLike[str],
    lake_dir: str | os.PathLike[str],
    day: dt.date,
    config: Config | None = None,
    findings: DayFindings | None = None,
    files: list[SegmentFile] | None = None,
) -> IngestResult:
    """Ingest one UTC day: replace its ``events``, ``quarantine``, ``ingest_files`` and
    ``telemetry`` findings in the lake.

    Args:
        spark: the session.
        events_dir: the event-log root (``--events``).
        lake_dir: the lake root (``--lake``).
        day: the UTC day; its segments are the files under ``<events>/<ns>/<day>/``.
        config: the run's configuration (ingest has no settings of its own: every stage takes it).
        findings: the audit's findings of the day, which the ``telemetry`` findings join (written
            by the incidents stage); None: they are written now.
        files: the day's segments, when the caller has listed them
            (:func:`jobs.ingest.segments.list_day_segments`).

    Returns:
        The counts of the run.

    Raises:
        IngestInputError: no events directory, or no segment for the day (nothing is written).
    """
    files = files if files is not None else list_day_segments(events_dir, day)
    listing_df = local_frame(
        spark, [(f.date, f.ns, f.file, f.bytes, f.compressed, f.open_segment) for f in files], LISTING_SCHEMA
    )
    plan = _events_plan(spark, lake_dir)
    cache = _Persisted()
    own = findings is None
    findings = findings if findings is not None else DayFindings(day)
    kept = committed = False
    jobs_before = job_ids(spark)
    try:
        scanned = _scan(spark, files, plan, cache)
        sequenced = _sequence(spark, files, plan, scanned, cache)
        outputs = _outputs(spark, lake_dir, day, files, listing_df, scanned, sequenced, cache)
        _write_events(lake_dir, day, plan, scanned, sequenced)
        committed = True
        _write_outputs(lake_dir, day, outputs)
        # the findings read the persisted frames: they stay until the findings are written
        findings.add(CATEGORY, outputs.findings_df, keep=cache)
        kept = True
        by_kind = findings.write_category(lake_dir, CATEGORY) if own else {}
        result = _result(lake_dir, day, by_kind)
    except BaseException:
        if not committed:
            _delete_failed_events(spark, jobs_before, plan, day)
        raise
    finally:
        if own or not kept:
            cache.release()
    return _logged(result)


def _delete_failed_events(spark: SparkSession, jobs_before: set[int], plan: FastPlan, day: dt.date) -> None:
    """Delete the data files an uncommitted ``events`` write of ``day`` left behind."""
    # by the run's id, not from ``staged``: a failed scan's finished tasks wrote files too
    delete_failed_write(
        spark, jobs_before, plan.table_path, plan.partition_by, {"date": day}, plan.write_id, plan.store
    )


def _logged(result: IngestResult) -> IngestResult:
    """``result``, once its counts are in the log."""
    log.info(
        "ingest %s: %d files, %d lines read, %d accepted (%d duplicates), %d quarantined, %d events; findings %s",
        result.day,
        result.files,
        result.lines_read,
        result.accepted,
        result.duplicates,
        result.quarantined,
        result.events_written,
        result.findings or "none",
    )
    return result


def _events_plan(spark: SparkSession, lake_dir: str | os.PathLike[str]) -> FastPlan:
    """The fast path's plan for the lake's ``events`` table."""
    events_path = lake.table_path(lake_dir, lake.EVENTS)
    file_struct = data_file_schema(events_path, EVENTS_TABLE_SCHEMA, EVENTS_PARTITION_BY)
    return build_plan(
        table_root(events_path),
        EVENTS_PARTITION_BY,
        to_arrow_schema(file_struct),
        # delta-spark commits only the files it wrote itself: every line takes the JVM path
        write_events=lake_writer(spark) != "native",
    )


def _scan(spark: SparkSession, files: list[SegmentFile], plan: FastPlan, cache: _Persisted) -> _Scanned:
    """Read each file once: its good lines are parsed and written by the fast path, the rest are
    judged in the JVM. Every table of the day is cut from what this returns."""
    scanned_df = cache(scan_lines(spark, files, plan))
    with timed(log, "ingest", "read, check and write events"):
        summaries = [
            (r["ns"], r["file"], json.loads(r["summary"]))
            for r in scanned_df.where("line = 0").select("ns", "file", "summary").collect()
        ]
    staged = [summary["data_file"] for _, _, summary in summaries if summary["data_file"]]
    slow_lines_df = scanned_df.where("line > 0").select("date", "ns", "file", "line", "text", "read_problem")
    if all_lines_fast(summaries):
        # The JVM has no line to judge: the checked lines are an empty local relation, over which
        # Spark folds every query below away. The checks are not even built (planning them costs
        # seconds of the driver's time).
        slow_df = local_frame(spark, [], checked_schema(slow_lines_df.schema))
    else:
        slow_df = cache(slow_lines_df.transform(with_event).transform(with_reason).transform(select_checked))
    read_df = (
        summaries_frame(spark, summaries)
        .select("file", "lines_read")
        .join(slow_df.groupBy("file").agg(F.count("reason").alias("failed")), "file", "left")
    )
    return _Scanned(summaries, staged, slow_df, read_df)


def all_lines_fast(summaries: list[tuple[str, str, dict[str, Any]]]) -> bool:
    """Whether the fast path accepted every line of every file (``(ns, file, summary)`` of the
    scan), so that no line is left for the JVM."""
    return all(summary["fast"] == summary["lines"] for _, _, summary in summaries)


def _sequence(
    spark: SparkSession, files: list[SegmentFile], plan: FastPlan, scanned: _Scanned, cache: _Persisted
) -> _Sequenced:
    """Sequence the day's accepted lines, in order when the scan's summaries allow it."""
    summaries = scanned.summaries
    with timed(log, "ingest", "sequence"):
        in_order = scanned.slow_df.where(F.col("reason").isNull()).isEmpty() and in_seq_order(summaries)
        if in_order:
            # Every event was accepted by the fast path and each server's files hold disjoint,
            # rising seq ranges: nothing repeats, and the consecutive pairs are known already.
            pairs_status_df = local_frame(spark, pair_rows(summaries), STATUS_SCHEMA)
            seq_df = summaries_frame(spark, summaries).select(
                "file", "accepted", "duplicates", "conflicts", "first_seq", "last_seq"
            )
            return _Sequenced(None, None, pairs_status_df, seq_df, scanned.staged)
        status_df, dropped_df, staged = _sequence_generally(spark, files, plan, scanned, cache)
        return _Sequenced(status_df, dropped_df, status_df, agg_seq_counts(status_df), staged)


def _sequence_generally(
    spark: SparkSession, files: list[SegmentFile], plan: FastPlan, scanned: _Scanned, cache: _Persisted
) -> tuple[DataFrame, DataFrame | None, list[dict[str, Any]]]:
    """:func:`with_seq_status` over every accepted line: the statuses, the dropped line ranges
    and the data files, rewritten without the dropped lines."""
    keys_df = read_fast_keys(spark, plan, scanned.staged).unionByName(select_keys(scanned.slow_df))
    status_df = cache(keys_df.transform(with_seq_status))
    if status_df.where(F.col("status") != STATUS_KEEP).isEmpty():
        return status_df, None, scanned.staged
    # A seq seen twice: the fast lines among its copies need the JVM's event hash to tell a
    # duplicate from a conflict. Rare (a copied segment), so those files are read again.
    involved_df = select_repeated_fast_lines(keys_df, status_df)
    involved_files = {r["file"] for r in involved_df.select("file").distinct().collect()}
    if involved_files:
        lines_df = read_lines(spark, [f for f in files if f.file in involved_files])
        keys_df = with_fast_event_hashes(keys_df, involved_df, lines_df)
    status_df = cache(keys_df.transform(with_seq_status))
    dropped_df = cache(agg_dropped_line_ranges(status_df))
    return status_df, dropped_df, rewrite_staged(spark, plan, scanned.staged, dropped_df)


def _outputs(
    spark: SparkSession,
    lake_dir: str | os.PathLike[str],
    day: dt.date,
    files: list[SegmentFile],
    listing_df: DataFrame,
    scanned: _Scanned,
    sequenced: _Sequenced,
    cache: _Persisted,
) -> _Outputs:
    """The day's ``quarantine``, ``telemetry`` findings and ``ingest_files`` rows."""
    status_df = sequenced.status_df
    quarantine_df = select_quarantine(scanned.slow_df)
    if status_df is not None:
        conflicts_df = status_df.where(F.col("status") == STATUS_CONFLICT)
        conflict_files = {r["file"] for r in conflicts_df.select("file").distinct().collect()}
        if conflict_files:
            # Accepted lines keep no raw text; the few files with conflicts are read again.
            lines_text_df = read_lines(spark, [f for f in files if f.file in conflict_files])
            quarantine_df = quarantine_df.unionByName(select_conflicts(status_df, lines_text_df))
    # The small tables are written by one task each: a write task costs a Python worker.
    quarantine_df = cache(quarantine_df.coalesce(1))
    pairs_df = select_kept_pairs(sequenced.pairs_status_df, _previous_day_last_events(spark, lake_dir, day))
    findings_df = (
        select_seq_gap_findings(pairs_df)
        .unionByName(select_clock_step_back_findings(pairs_df))
        .unionByName(agg_quarantined_lines_findings(quarantine_df))
    )
    if status_df is not None:
        findings_df = findings_df.unionByName(agg_duplicate_events_findings(status_df))
    findings_df = cache(findings_df.coalesce(1))
    ingest_files_df = cache(join_ingest_files(listing_df, scanned.read_df, sequenced.seq_df).coalesce(1))
    return _Outputs(quarantine_df, findings_df, ingest_files_df)


def _write_events(
    lake_dir: str | os.PathLike[str], day: dt.date, plan: FastPlan, scanned: _Scanned, sequenced: _Sequenced
) -> None:
    """Commit the JVM-judged events with the fast path's data files, as one transaction."""
    with timed(log, "ingest", "events"):
        dropped_df = sequenced.dropped_df
        if dropped_df is None:
            dropped_df = local_frame(scanned.slow_df.sparkSession, [], NO_DROPS_SCHEMA)
        slow_events_df = select_events(scanned.slow_df, dropped_df)
        if plan.write_events:
            slow_events_df = slow_events_df.coalesce(1)  # the few lines the fast path left
        replace_day(
            slow_events_df,
            lake_dir,
            lake.EVENTS,
            day,
            EVENTS_TABLE_SCHEMA,
            partition_by=EVENTS_PARTITION_BY,
            extra_files=sequenced.staged,
        )


def _write_outputs(lake_dir: str | os.PathLike[str], day: dt.date, outputs: _Outputs) -> None:
    with timed(log, "ingest", "quarantine"):
        replace_day(
            outputs.quarantine_df,
            lake_dir,
            lake.QUARANTINE,
            day,
            QUARANTINE_SCHEMA,
            partition_by=QUARANTINE_PARTITION_BY,
        )
    with timed(log, "ingest", "ingest_files"):
        replace_day(
            outputs.ingest_files_df,
            lake_dir,
            lake.INGEST_FILES,
            day,
            INGEST_FILES_SCHEMA,
            partition_by=INGEST_FILES_PARTITION_BY,
        )


def _previous_day_last_events(spark: SparkSession, lake_dir: str | os.PathLike[str], day: dt.date) -> DataFrame:
    """The last event of each server on the day before, from the lake (empty if none)."""
    path = lake.table_path(lake_dir, lake.EVENTS)
    columns = ("ns", "seq", "ts_ms", "file")
    if not table_exists(path):
        return local_frame(spark, [], T.StructType([EVENTS_TABLE_SCHEMA[c] for c in columns]))
    previous_df = read_table(spark, path, EVENTS_TABLE_SCHEMA, where={"date": day - dt.timedelta(days=1)})
    return agg_last_events(previous_df.select(*columns))


def _result(lake_dir: str | os.PathLike[str], day: dt.date, findings: dict[str, int]) -> IngestResult:
    """The run's counts, read back from the ``ingest_files`` rows it wrote (a row per file)."""
    rows = read_day_arrow(
        str(lake_dir), lake.INGEST_FILES, day, ["lines_read", "accepted", "duplicates", "quarantined"]
    )
    totals = {name: sum(v or 0 for v in rows.column(name).to_pylist()) for name in rows.column_names}
    return IngestResult(
        day=day,
        files=rows.num_rows,
        lines_read=totals["lines_read"],
        accepted=totals["accepted"],
        duplicates=totals["duplicates"],
        quarantined=totals["quarantined"],
        events_written=totals["accepted"] - totals["duplicates"],
        findings=findings,
    )
