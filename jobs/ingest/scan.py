"""Ingest's fast path: a Spark task per group of segment files (a large file alone, small ones
together: :func:`jobs.ingest.segments.group_tasks`) cuts each file into numbered lines
(:mod:`jobs.ingest.segments`), parses and checks them in batches with pyarrow
(:mod:`jobs.ingest.classifier`; the lines of consecutive small files of a server in one batch)
and writes the accepted ones to an uncommitted data file of ``events``
(:mod:`jobs.ingest.datafiles`), one per task and name server, without a trip through the JVM.
Each file still gets its own summary (its line counts, seq order and steps).

A line the fast path does not accept is not judged here: its text goes to Spark, where
``with_event``/``with_reason`` accept it or give its quarantine reason. The fast path is only
ever a shortcut for lines the JVM would accept with the same values
(``tests/jobs/ingest/test_scan.py`` holds it to that). Like the modules it uses, this one is
shipped to executors by value; what it needs of the schemas is in a :class:`FastPlan`.
"""

from __future__ import annotations

import datetime as dt
import json
import sys
from collections.abc import Iterator, Sequence
from functools import partial
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from jobs.ingest import classifier, datafiles, segments
from jobs.ingest import plan as fast_plan
from jobs.ingest.classifier import classify_lines
from jobs.ingest.datafiles import event_batch
from jobs.ingest.plan import FastPlan
from jobs.ingest.segments import SegmentFile, files_frame, gunzip, line_batches
from jobs.lake.tables import DataFile
from jobs.spark.pyworker import keep_archive_listings
from jobs.storage.stores import filesystem_of, read_bytes

# One row per line the fast path did not accept (``line`` >= 1, ``text`` as read with its "\n",
# for Spark to judge), and one ``line`` 0 row per file whose ``summary`` is the JSON of its
# :class:`FileSummary` (line counts, seq order and steps; and the task's data file of its server
# on the summary of the last file written into it).
SCANNED_SCHEMA = T.StructType(
    [
        T.StructField("date", T.DateType(), False),
        T.StructField("ns", T.StringType(), False),
        T.StructField("file", T.StringType(), False),
        T.StructField("line", T.LongType(), False),
        T.StructField("text", T.StringType(), True),
        T.StructField("read_problem", T.StringType(), True),
        T.StructField("summary", T.StringType(), True),
    ]
)
_ARROW_SCANNED = to_arrow_schema(SCANNED_SCHEMA)
# small files' lines scanned together: at most this many bytes of them pending (besides the lines)
PENDING_BYTES = 16 << 20


def scan_lines(spark: SparkSession, files: Sequence[SegmentFile], plan: FastPlan) -> DataFrame:
    """Scan ``files``, a task per group of files: the accepted events are written to an
    uncommitted data file of the table per task and server (``data_file`` of a summary, with its
    ``source_files``); the rows are the other lines and each file's summary.

    The caller commits the data files (``write_table(extra_files=...)``) or deletes them.
    """
    fast_plan.ship_by_value(sys.modules[__name__], classifier, datafiles, segments)
    files_df = files_frame(spark, files)
    return files_df.mapInArrow(partial(scan_segment_batches, plan=plan), SCANNED_SCHEMA)


def scan_segment_batches(batches: Iterator[pa.RecordBatch], plan: FastPlan) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: segment-file rows in (``jobs.ingest.segments.SEGMENT_FILES_SCHEMA``),
    ``SCANNED_SCHEMA`` batches out; accepted events are written to one data file per server of
    the task, and the summaries come last, once those files are closed."""
    keep_archive_listings()
    fs, root = filesystem_of(plan.table_path, plan.store)
    data_files = TaskDataFiles(fs, root, plan)
    pending = _Pending(data_files, plan)
    summaries: list[tuple[Any, ...]] = []
    try:
        for batch in batches:
            for seg in batch.to_pylist():
                data = read_bytes(seg["path"], plan.store)
                tail_problem = None
                if seg["compressed"]:
                    data, tail_problem = gunzip(data)
                summary = FileSummary()
                for lines in line_batches(data, seg["date"], seg["ns"], seg["file"], tail_problem):
                    yield from pending.add(seg["date"], seg["ns"], seg["file"], lines, summary)
                summaries.append((seg["date"], seg["ns"], seg["file"], summary))
        yield from pending.scan()
        for last_file, info in data_files.close().items():
            next(s for _, _, file, s in summaries if file == last_file).data_file = info
    except BaseException:
        data_files.discard()
        raise
    yield _summary_batch(summaries)


class _Pending:
    """Line batches of consecutive segment files of one date and server, scanned together once
    they are :data:`~jobs.ingest.segments.BATCH_LINES` lines or :data:`PENDING_BYTES` (a day of many
    small files is a few calls to the classifier and the writer, not one per file)."""

    def __init__(self, data_files: TaskDataFiles, plan: FastPlan) -> None:
        self._data_files, self._plan = data_files, plan
        self._key: tuple[dt.date, str] | None = None
        self._batches: list[pa.RecordBatch] = []
        self._files: list[tuple[str, FileSummary]] = []
        self._lines = self._bytes = 0

    def add(
        self, date: dt.date, ns: str, file: str, lines: pa.RecordBatch, summary: FileSummary
    ) -> Iterator[pa.RecordBatch]:
        """Take ``lines`` of ``file``; the slow lines of what was scanned because of it."""
        if self._batches and self._key != (date, ns):
            yield from self.scan()
        self._key = (date, ns)
        self._batches.append(lines)
        self._files.append((file, summary))
        self._lines += lines.num_rows
        self._bytes += lines.nbytes
        if self._lines >= segments.BATCH_LINES or self._bytes >= PENDING_BYTES:
            yield from self.scan()

    def scan(self) -> Iterator[pa.RecordBatch]:
        """Scan what is pending: its accepted events written, each file's summary brought up to
        date; the lines the fast path did not accept, for Spark."""
        if not self._batches:
            return
        assert self._key is not None
        date, ns = self._key
        lines = self._batches[0] if len(self._batches) == 1 else pa.concat_batches(self._batches)
        text, numbers, problems = lines.column(4), lines.column(3), lines.column(5)
        if self._plan.write_events:
            fast, parsed = classify_lines(text, problems, ns, self._plan)
        else:
            fast, parsed = np.zeros(len(text), dtype=bool), None
        # each file's rows, and the fast rows before each row
        bounds = np.cumsum([0, *(b.num_rows for b in self._batches)])
        fast_before = np.concatenate(([0], np.cumsum(fast)))
        seq = ts = line = np.zeros(0, dtype=np.int64)
        if parsed is not None and parsed.num_rows:
            keep = pa.array(fast)
            fast_numbers = numbers.filter(keep)
            sources = [f for i, (f, _) in enumerate(self._files) if fast_before[bounds[i + 1]] > fast_before[bounds[i]]]
            batch = event_batch(parsed, fast_numbers, lines.column(2).filter(keep), self._plan)
            self._data_files.write(date, ns, sources, batch)
            seq, ts = parsed.column("seq").to_numpy(), parsed.column("ts").to_numpy()
            line = fast_numbers.to_numpy()
        for i, (_, summary) in enumerate(self._files):
            lo, hi = fast_before[bounds[i]], fast_before[bounds[i + 1]]
            summary.lines += int(bounds[i + 1] - bounds[i])
            if hi > lo:
                summary.add(seq[lo:hi], ts[lo:hi], line[lo:hi])
        self._batches, self._files, self._lines, self._bytes = [], [], 0, 0
        if not fast.all():
            yield _slow_lines_batch(lines.filter(pa.array(~fast)))


class TaskDataFiles:
    """A task's uncommitted ``events`` data files: one per (date, server), opened on first use.

    A file per segment would make a day of many small segments a commit of as many tiny Parquet
    files, each with its own footer, for every later stage to open.
    """

    def __init__(self, fs: pafs.FileSystem, root: str, plan: FastPlan) -> None:
        self._fs, self._root, self._plan = fs, root, plan
        self._open: dict[tuple[Any, ...], tuple[DataFile, list[str]]] = {}

    def write(self, date: dt.date, ns: str, files: list[str], batch: pa.RecordBatch) -> None:
        """Add accepted events of segment ``files`` (in order) to the data file of their date and
        server."""
        key = (date.isoformat(), ns)
        entry = self._open.get(key)
        if entry is None:
            plan = self._plan
            data_file = DataFile.create(
                self._fs, self._root, plan.partition_by, key, plan.file_schema, prefix=plan.write_id
            )
            entry = self._open[key] = (data_file, [])
        data_file, sources = entry
        data_file.write(batch)
        for file in files:
            if not sources or sources[-1] != file:
                sources.append(file)

    def close(self) -> dict[str, dict[str, Any]]:
        """Close every file: ``{last source file: DataFile.close() info with source_files}``."""
        closed = {}
        while self._open:
            key = next(iter(self._open))
            data_file, sources = self._open[key]
            info = data_file.close()
            del self._open[key]  # closed: from here on it belongs to the commit (or its clean-up)
            closed[sources[-1]] = {**info, "source_files": sources}
        return closed

    def discard(self) -> None:
        """Delete the files not closed yet (a failed task)."""
        for data_file, _ in self._open.values():
            data_file.discard()
        self._open.clear()


class FileSummary:
    """What the driver needs of a file's fast lines, gathered batch by batch in the task.

    ``first``/``last``: ``[seq, ts, line]`` of the first and last fast line. ``increasing``: the
    fast lines' seqs rise strictly line by line, so the file's events are already in seq order.
    ``steps``: ``[prev_seq, prev_ts, seq, ts, line]`` of each consecutive pair (in line order)
    whose seq is not the next one or whose ts went back: the only pairs a telemetry finding can
    come from when the file is in seq order.
    """

    def __init__(self) -> None:
        self.lines = 0
        self.fast = 0
        self.first: list[int] | None = None
        self.last: list[int] | None = None
        self.increasing = True
        self.steps: list[list[int]] = []
        self.data_file: dict[str, Any] | None = None

    def add(self, seq: np.ndarray, ts: np.ndarray, line: np.ndarray) -> None:
        """Take the next fast lines of the file (in line order)."""
        if not len(seq):
            return
        if self.last is not None:
            seq = np.concatenate(([self.last[0]], seq))
            ts = np.concatenate(([self.last[1]], ts))
            line = np.concatenate(([self.last[2]], line))
        else:
            self.first = [int(seq[0]), int(ts[0]), int(line[0])]
        self.fast += len(seq) - (1 if self.last is not None else 0)
        if len(seq) > 1:
            step = np.diff(seq)
            self.increasing = self.increasing and bool((step > 0).all())
            odd = np.flatnonzero((step != 1) | (np.diff(ts) < 0))
            self.steps.extend([int(seq[i]), int(ts[i]), int(seq[i + 1]), int(ts[i + 1]), int(line[i + 1])] for i in odd)
        self.last = [int(seq[-1]), int(ts[-1]), int(line[-1])]

    def to_json(self) -> str:
        return json.dumps(
            {
                "lines": self.lines,
                "fast": self.fast,
                "first": self.first,
                "last": self.last,
                "increasing": self.increasing,
                "steps": self.steps,
                "data_file": self.data_file,
            }
        )


def _slow_lines_batch(lines: pa.RecordBatch) -> pa.RecordBatch:
    n = lines.num_rows
    return pa.RecordBatch.from_arrays(
        [lines.column(i) for i in range(6)] + [pa.nulls(n, pa.string())], schema=_ARROW_SCANNED
    )


def _summary_batch(summaries: list[tuple[Any, ...]]) -> pa.RecordBatch:
    """One ``line`` 0 row per ``(date, ns, file, FileSummary)``."""
    return pa.RecordBatch.from_pylist(
        [
            {
                "date": date,
                "ns": ns,
                "file": file,
                "line": 0,
                "text": None,
                "read_problem": None,
                "summary": summary.to_json(),
            }
            for date, ns, file, summary in summaries
        ],
        schema=_ARROW_SCANNED,
    )
