"""Ingest's sequencing: which accepted line of a seq is kept, and each kept event's predecessor.

Two ways, same tables (``tests/jobs/ingest/test_scan.py`` holds them equal): **in order** (the
normal day: nothing repeats, and the scan's summaries already name every consecutive pair a
finding can come from, :func:`in_seq_order`, :func:`pair_rows`), or **generally**, one window
per server over every accepted line (:func:`with_seq_status`). The stage reads what these need
and passes it in.
"""

from __future__ import annotations

import itertools
from typing import Any

from pyspark.sql import DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.ingest.checks import with_event
from jobs.spark.frames import local_frame
from jobs.spark.profile import broadcast

STATUS_KEEP, STATUS_DUPLICATE, STATUS_CONFLICT = "keep", "duplicate", "conflict"
_PAIR_COLUMNS = ("ns", "seq", "ts_ms", "file", "line", "prev_seq", "prev_ts_ms", "prev_file")


def select_keys(checked_df: DataFrame) -> DataFrame:
    """The accepted lines' keys for sequencing: ``ns``, ``seq``, ``ts_ms``, ``file``, ``line``,
    ``event_hash``."""
    return checked_df.where(F.col("reason").isNull()).select(
        "ns", F.col("event.seq").alias("seq"), F.col("event.ts").alias("ts_ms"), "file", "line", "event_hash"
    )


def with_seq_status(keys_df: DataFrame) -> DataFrame:
    """Add each accepted line's ``status`` and, for kept lines, the previous kept event.

    Per server, lines are ordered by ``(seq, file, line)``. The first line of a seq is ``keep``;
    a later one is ``duplicate`` when its event equals the kept one (``event_hash``), else
    ``conflict``. ``kept_file``/``kept_line`` name the kept line on the others (null on kept
    rows). ``prev_seq``, ``prev_ts_ms``, ``prev_file`` describe the kept event before a kept one
    (null on the server's first of the day, and on the others).

    Example:
        seq 7 at line 7 of ``a.jsonl`` and of ``a.jsonl.gz``: the ``.gz`` row is a duplicate
        with ``kept_file = a.jsonl``; the ``a.jsonl`` row has ``prev_seq = 6``.
    """
    # One ordering per server serves dedup and the gap/clock checks: a single shuffle and sort.
    by_seq = Window.partitionBy("ns").orderBy("seq", "file", "line")
    so_far = by_seq.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = by_seq.rowsBetween(Window.unboundedPreceding, -1)
    first = F.coalesce(F.lag("seq").over(by_seq) != F.col("seq"), F.lit(True))
    kept_row = F.when(F.col("_first"), F.struct("seq", "ts_ms", "file", "line", "event_hash"))
    is_first = F.col("_first")
    return (
        keys_df.withColumn("_first", first)
        .withColumn("_kept", F.last(kept_row, ignorenulls=True).over(so_far))
        .withColumn("_prev", F.last(kept_row, ignorenulls=True).over(before))
        .select(
            "ns",
            "seq",
            "ts_ms",
            "file",
            "line",
            F.when(is_first, F.lit(STATUS_KEEP))
            .when(F.col("event_hash") == F.col("_kept.event_hash"), F.lit(STATUS_DUPLICATE))
            .otherwise(F.lit(STATUS_CONFLICT))
            .alias("status"),
            F.when(~is_first, F.col("_kept.file")).alias("kept_file"),
            F.when(~is_first, F.col("_kept.line")).alias("kept_line"),
            F.when(is_first, F.col("_prev.seq")).alias("prev_seq"),
            F.when(is_first, F.col("_prev.ts_ms")).alias("prev_ts_ms"),
            F.when(is_first, F.col("_prev.file")).alias("prev_file"),
        )
    )


def select_kept_pairs(status_df: DataFrame, previous_day_df: DataFrame) -> DataFrame:
    """Consecutive kept events of each server (``_PAIR_COLUMNS``), across midnight too.

    Args:
        status_df: :func:`with_seq_status` rows.
        previous_day_df: the previous day's last event per server (:func:`agg_last_events`);
            it becomes the predecessor of the server's first kept event of the day.
    """
    kept_df = status_df.where(F.col("status") == STATUS_KEEP)
    within_day_df = kept_df.where(F.col("prev_seq").isNotNull()).select(*_PAIR_COLUMNS)
    last_df = previous_day_df.select(
        "ns", F.col("seq").alias("prev_seq"), F.col("ts_ms").alias("prev_ts_ms"), F.col("file").alias("prev_file")
    )
    # one row per server on each side: broadcasting keeps the day's rows where they are
    across_df = (
        kept_df.where(F.col("prev_seq").isNull())
        .select("ns", "seq", "ts_ms", "file", "line")
        .join(broadcast(last_df), "ns")
        .select(*_PAIR_COLUMNS)
    )
    return within_day_df.unionByName(across_df)


def agg_last_events(events_df: DataFrame) -> DataFrame:
    """The last event (highest seq) of each server in ``events_df``: ``ns``, ``seq``, ``ts_ms``,
    ``file``."""
    last = F.max_by(F.struct("seq", "ts_ms", "file"), "seq")
    return events_df.groupBy("ns").agg(last.alias("_last")).select("ns", "_last.seq", "_last.ts_ms", "_last.file")


def agg_dropped_line_ranges(status_df: DataFrame) -> DataFrame:
    """``file``, ``first_line``, ``last_line``: runs of accepted lines that are not kept.

    A duplicated file is one run, so the anti-join that drops these lines from ``events`` stays
    small enough to broadcast even when a whole segment was copied.
    """
    by_line = Window.partitionBy("file").orderBy("line")
    return (
        status_df.where(F.col("status") != STATUS_KEEP)
        .withColumn("_run", F.col("line") - F.row_number().over(by_line))
        .groupBy("file", "_run")
        .agg(F.min("line").alias("first_line"), F.max("line").alias("last_line"))
        .select("file", "first_line", "last_line")
    )


STATUS_SCHEMA = T.StructType(
    [
        T.StructField("ns", T.StringType()),
        T.StructField("seq", T.LongType()),
        T.StructField("ts_ms", T.LongType()),
        T.StructField("file", T.StringType()),
        T.StructField("line", T.LongType()),
        T.StructField("status", T.StringType()),
        T.StructField("kept_file", T.StringType()),
        T.StructField("kept_line", T.LongType()),
        T.StructField("prev_seq", T.LongType()),
        T.StructField("prev_ts_ms", T.LongType()),
        T.StructField("prev_file", T.StringType()),
    ]
)


SUMMARIES_SCHEMA = T.StructType(
    [T.StructField("file", T.StringType())]
    + [
        T.StructField(c, T.LongType())
        for c in ("lines_read", "accepted", "duplicates", "conflicts", "first_seq", "last_seq")
    ]
)


def summaries_frame(spark: SparkSession, summaries: list[tuple[str, str, dict[str, Any]]]) -> DataFrame:
    """Per scanned file: ``lines_read`` and, for its fast lines, the sequencing counts."""
    rows = [
        (file, s["lines"], s["fast"], 0, 0, s["first"][0] if s["first"] else None, s["last"][0] if s["last"] else None)
        for _, file, s in summaries
    ]
    return local_frame(spark, rows, SUMMARIES_SCHEMA)


def in_seq_order(summaries: list[tuple[str, str, dict[str, Any]]]) -> bool:
    """Whether every file's fast lines rise in seq and a server's files hold disjoint seq ranges."""
    by_ns: dict[str, list[dict[str, Any]]] = {}
    for ns, _, s in summaries:
        if s["first"] is None:
            continue
        if not s["increasing"]:
            return False
        by_ns.setdefault(ns, []).append(s)
    for ranges in by_ns.values():
        ranges.sort(key=lambda s: s["first"][0])
        if any(b["first"][0] <= a["last"][0] for a, b in itertools.pairwise(ranges)):
            return False
    return True


def pair_rows(summaries: list[tuple[str, str, dict[str, Any]]]) -> list[tuple[Any, ...]]:
    """:func:`with_seq_status`-shaped rows for files in seq order: each server's first event (no
    predecessor) and every consecutive pair that can be a finding (within a file, its steps;
    across files, each boundary)."""
    by_ns: dict[str, list[tuple[str, dict[str, Any]]]] = {}
    for ns, file, s in summaries:
        if s["first"] is not None:
            by_ns.setdefault(ns, []).append((file, s))
    rows = []
    for ns, files in by_ns.items():
        files.sort(key=lambda fs: fs[1]["first"][0])
        first_file, first = files[0]
        rows.append((ns, *first["first"][:2], first_file, first["first"][2], STATUS_KEEP, None, None, None, None, None))
        previous = None
        for file, s in files:
            if previous is not None:
                prev_file, prev = previous
                seq, ts, line = s["first"]
                rows.append(
                    (ns, seq, ts, file, line, STATUS_KEEP, None, None, prev["last"][0], prev["last"][1], prev_file)
                )
            for prev_seq, prev_ts, seq, ts, line in s["steps"]:
                rows.append((ns, seq, ts, file, line, STATUS_KEEP, None, None, prev_seq, prev_ts, file))
            previous = (file, s)
    return rows


def select_repeated_fast_lines(keys_df: DataFrame, status_df: DataFrame) -> DataFrame:
    """``file``, ``line`` of the fast path's lines (no ``event_hash`` yet) whose seq repeats."""
    repeated_df = status_df.where(F.col("status") != STATUS_KEEP).select("ns", "seq").distinct()
    return (
        keys_df.where(F.col("event_hash").isNull()).join(broadcast(repeated_df), ["ns", "seq"]).select("file", "line")
    )


def with_fast_event_hashes(keys_df: DataFrame, involved_df: DataFrame, lines_df: DataFrame) -> DataFrame:
    """``keys_df`` with the event hash of every line of ``involved_df`` (:func:`select_repeated_fast_lines`),
    parsed from ``lines_df`` (their files' lines) and hashed in the JVM, as ``select_checked``
    hashes the others."""
    hashes_df = (
        lines_df.join(involved_df, ["file", "line"])
        .transform(with_event)
        .select("file", "line", F.xxhash64("event").alias("_hash"))
    )
    return keys_df.join(broadcast(hashes_df), ["file", "line"], "left").select(
        "ns", "seq", "ts_ms", "file", "line", F.coalesce("event_hash", "_hash").alias("event_hash")
    )
