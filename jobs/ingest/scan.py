"""Ingest's fast path: whole batches of lines parsed and checked with pyarrow inside the task that
reads the file, and the accepted events written to Parquet there, without a trip through the JVM.

Almost every line of a day is a well-formed event (heartbeats are the bulk). For those, one
Spark task per segment file:

1. cuts the file into numbered lines (:func:`jobs.ingest.lines.line_batches`);
2. parses each batch of lines with ``pyarrow.json`` against the event schema (every key
   nullable, unknown keys ignored): pyarrow refuses a batch with any line that is not one JSON
   object of the right types, a repeated key or lax JSON (single quotes, NaN, comments,
   trailing commas), so a refused batch is halved until the lines it refuses are found;
3. checks every parsed line with Arrow compute against the rules ``jobs.ingest.lines.with_reason``
   applies in the JVM (format version, required keys, event type, ``seq >= 1``, the server
   folder, each type's keys, NOT NULL values inside objects and arrays);
4. writes the lines that pass as ``events`` rows to a Parquet data file of the table, not yet
   committed (:class:`jobs.lake.delta.files.DataFile`), and yields one key row per line to Spark.

A line the fast path does not accept is not judged here: its text goes to Spark, where
``with_event``/``with_reason`` accept it or give its quarantine reason, exactly as for every line
before the fast path existed. The fast path is therefore only ever a *shortcut for lines the JVM
would accept with the same values*; ``tests/jobs/test_ingest_fast.py`` holds it to that on
generated good and bad lines.

Like ``jobs.ingest.lines``, this module is shipped to executors by value and must import only
numpy, pyarrow and modules that are shipped the same way; everything it needs from the schemas
is computed on the driver into a :class:`FastPlan`.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.json as pj
import pyarrow.parquet as pq
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from jobs.lake import delta

from jobs.ingest import lines as ingest_read
from jobs.lake.delta.files import DataFile
from jobs.lake.delta.write import conform_batch
from jobs.ingest.lines import (
    MAX_TIMESTAMP_MILLIS,
    SegmentFile,
    gunzip,
    line_batches,
)
from jobs.spark.pyworker import keep_archive_listings

# One row per line the fast path did not accept (``line`` >= 1, ``text`` as read with its "\n",
# for Spark to judge), and one ``line`` 0 row per file whose ``summary`` is the JSON of its
# :class:`FileSummary` (line counts, the data file written, seq order and steps).
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

# Below this many lines a refused range is parsed line by line rather than halved again.
_BISECT_LINES = 8


@dataclass(frozen=True)
class FastPlan:
    """What the tasks need, as plain data (the schema modules stay on the driver).

    Attributes:
        table_path: the ``events`` table root; data files go into its partition folders.
        partition_by: the table's partition columns (``date``, ``ns``).
        parse_schema: the event schema with every field nullable, for ``pyarrow.json``.
        file_schema: the table's columns without the partition columns, as written to Parquet.
        version: the only accepted ``v``.
        event_types: the accepted ``type`` values.
        required: keys every event must have, non-null.
        type_rules: type -> (keys it must have non-null, keys it must have, null allowed).
        nested: ``(path, kind)`` of every NOT NULL place below the top level (see
            :func:`_nested_rules`).
        millis_to_ts: table column -> the event key (epoch ms) it is the timestamp of.
        write_events: false sends every line to the JVM (where delta-spark writes the table).
        write_id: the prefix of every data file the scan and the rewrite write (their names
            find them when the run fails before its commit:
            :func:`jobs.lake.delta.write.delete_failed_write`).
    """

    table_path: str
    partition_by: tuple[str, ...]
    parse_schema: pa.Schema
    file_schema: pa.Schema
    version: int
    event_types: tuple[str, ...]
    required: tuple[str, ...]
    type_rules: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
    nested: tuple
    millis_to_ts: dict[str, str]
    write_events: bool = True
    write_id: str = ""


def build_plan(
    table_path: str, partition_by: tuple[str, ...], file_schema: pa.Schema, write_events: bool = True
) -> FastPlan:
    """The plan for writing ``events`` data files under ``table_path`` (driver side), with a
    new ``write_id``."""
    from schemas.events import (
        EVENT_SCHEMA,
        EVENT_TYPES,
        FORMAT_VERSION,
        REQUIRED_KEYS,
        TYPE_RULES,
    )

    return FastPlan(
        table_path=table_path,
        partition_by=tuple(partition_by),
        parse_schema=to_arrow_schema(_all_nullable(EVENT_SCHEMA)),
        file_schema=file_schema,
        version=FORMAT_VERSION,
        event_types=tuple(EVENT_TYPES),
        required=tuple(REQUIRED_KEYS),
        type_rules={t: (tuple(r.required), tuple(r.present)) for t, r in TYPE_RULES.items()},
        nested=_nested_rules(EVENT_SCHEMA),
        millis_to_ts={"ts": "ts", "last_update_ts": "last_update_ts"},
        write_events=write_events,
        write_id=uuid.uuid4().hex,
    )


def _all_nullable(dtype: T.DataType) -> T.DataType:
    if isinstance(dtype, T.StructType):
        return T.StructType([T.StructField(f.name, _all_nullable(f.dataType), True) for f in dtype.fields])
    if isinstance(dtype, T.ArrayType):
        return T.ArrayType(_all_nullable(dtype.elementType), True)
    return dtype


def _nested_rules(dtype: T.DataType, top: bool = True) -> tuple:
    """A plain-data tree of the NOT NULL places of ``dtype`` below the top level.

    ``("struct", ((name, not_null, subtree), ...))``, ``("array", not_null_elements, subtree)``
    or ``None`` for scalars. Top-level keys are checked per event type, so ``not_null`` is false
    there, as in ``jobs.ingest.lines._nested_null_checks``.
    """
    if isinstance(dtype, T.StructType):
        return (
            "struct",
            tuple((f.name, (not top) and not f.nullable, _nested_rules(f.dataType, False)) for f in dtype.fields),
        )
    if isinstance(dtype, T.ArrayType):
        return ("array", not dtype.containsNull, _nested_rules(dtype.elementType, False))
    return None


# ---------------------------------------------------------------------------------- driver


def scan_lines(spark: SparkSession, files: Sequence[SegmentFile], plan: FastPlan) -> DataFrame:
    """Scan ``files``, one task per file: the accepted events are written to an uncommitted
    data file of the table per file; the rows are the other lines and each file's summary.

    The caller commits the data files (``write_table(extra_files=...)``) or deletes them.
    """
    _ship_by_value()
    files_df = ingest_read.files_frame(spark, files)
    return files_df.mapInArrow(partial(scan_segment_batches, plan=plan), SCANNED_SCHEMA)


REWRITE_SCHEMA = T.StructType(
    [
        T.StructField("source_file", T.StringType(), False),
        T.StructField("data_file", T.StringType(), True),
    ]
)


def rewrite_without_lines(spark: SparkSession, to_rewrite_df: DataFrame, plan: FastPlan) -> DataFrame:
    """Rewrite data files without some of their lines, in tasks.

    Args:
        to_rewrite_df: ``source_file``, ``data_file`` (the ``DataFile.close()`` JSON) and
            ``ranges`` (JSON array of ``{"first_line", "last_line"}`` objects) to drop.

    Returns:
        ``REWRITE_SCHEMA`` rows: the new data file of each source file, null when no line is
        left. The old files are deleted.
    """
    _ship_by_value()
    rows_df = to_rewrite_df.select("source_file", "data_file", "ranges")
    return rows_df.mapInArrow(partial(_rewrite_batches, plan=plan), REWRITE_SCHEMA)


def _ship_by_value() -> None:
    # Executors may not have this project installed (a standalone cluster); ship the modules.
    delta.ship_by_value()  # the data files' writer, and jobs.spark.pyworker
    for module in (sys.modules[__name__], ingest_read):
        cloudpickle.register_pickle_by_value(module)


def _rewrite_batches(batches: Iterator[pa.RecordBatch], plan: FastPlan) -> Iterator[pa.RecordBatch]:
    keep_archive_listings()
    fs = pafs.LocalFileSystem()
    for batch in batches:
        for row in batch.to_pylist():
            info = json.loads(row["data_file"])
            old_path = f"{plan.table_path}/{info['path']}"
            table = pq.read_table(old_path, schema=plan.file_schema)
            lines = table.column("line").to_numpy()
            drop = np.zeros(len(lines), dtype=bool)
            for r in json.loads(row["ranges"]):
                drop |= (lines >= r["first_line"]) & (lines <= r["last_line"])
            new_info = None
            if not drop.all():
                key = tuple(info["partition_values"][c] for c in plan.partition_by)
                data_file = DataFile.create(fs, plan.table_path, plan.partition_by, key, plan.file_schema,
                                            prefix=plan.write_id)
                try:
                    for part in table.filter(pa.array(~drop)).to_batches():
                        data_file.write(part)
                    new_info = data_file.close()
                except BaseException:
                    data_file.discard()
                    raise
                new_info["source_file"] = row["source_file"]
            fs.delete_file(old_path)
            yield pa.RecordBatch.from_pylist(
                [{"source_file": row["source_file"], "data_file": json.dumps(new_info) if new_info else None}],
                schema=to_arrow_schema(REWRITE_SCHEMA),
            )


# ------------------------------------------------------------------------------------ task


def scan_segment_batches(batches: Iterator[pa.RecordBatch], plan: FastPlan) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: segment-file rows in (``jobs.ingest.lines.SEGMENT_FILES_SCHEMA``),
    ``SCANNED_SCHEMA`` batches out; accepted events are written to one data file per segment."""
    keep_archive_listings()
    fs = pafs.LocalFileSystem()
    for batch in batches:
        for seg in batch.to_pylist():
            with open(seg["path"], "rb") as f:
                data = f.read()
            tail_problem = None
            if seg["compressed"]:
                data, tail_problem = gunzip(data)
            yield from _scan_segment(fs, plan, data, seg["date"], seg["ns"], seg["file"], tail_problem)


def _scan_segment(fs, plan: FastPlan, data: bytes, date, ns: str, file: str, tail_problem) -> Iterator[pa.RecordBatch]:
    data_file = None
    summary = FileSummary()
    try:
        for lines in line_batches(data, date, ns, file, tail_problem):
            text, numbers, problems = lines.column(4), lines.column(3), lines.column(5)
            if plan.write_events:
                fast, parsed = classify_lines(text, problems, ns, plan)
            else:
                fast, parsed = np.zeros(len(text), dtype=bool), None
            summary.lines += len(text)
            if parsed is not None and parsed.num_rows:
                if data_file is None:
                    key = (date.isoformat(), ns)
                    data_file = DataFile.create(fs, plan.table_path, plan.partition_by, key, plan.file_schema,
                                                prefix=plan.write_id)
                fast_numbers = numbers.filter(pa.array(fast))
                data_file.write(event_batch(parsed, fast_numbers, file, plan))
                summary.add(parsed.column("seq").to_numpy(), parsed.column("ts").to_numpy(), fast_numbers.to_numpy())
            if not fast.all():
                yield _slow_lines_batch(lines.filter(pa.array(~fast)))
        if data_file is not None:
            summary.data_file = {**data_file.close(), "source_file": file}
            data_file = None  # closed: from here on it belongs to the commit (or its clean-up)
        yield _summary_batch(date, ns, file, summary)
    except BaseException:
        if data_file is not None:
            data_file.discard()
        raise


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
        self.data_file: dict | None = None

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
            self.steps.extend(
                [int(seq[i]), int(ts[i]), int(seq[i + 1]), int(ts[i + 1]), int(line[i + 1])] for i in odd
            )
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


def _summary_batch(date, ns: str, file: str, summary: FileSummary) -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist(
        [{"date": date, "ns": ns, "file": file, "line": 0, "text": None, "read_problem": None,
          "summary": summary.to_json()}],
        schema=_ARROW_SCANNED,
    )


# -------------------------------------------------------------------------------- classify


def classify_lines(
    text: pa.StringArray, problems: pa.Array, folder_ns: str, plan: FastPlan
) -> tuple[np.ndarray, pa.Table | None]:
    """Which lines the fast path accepts, and their parsed events (in line order).

    Args:
        text: the lines, each with its ``"\\n"`` (the last may lack it and then has a problem).
        problems: the read problem of each line, null when none.
        folder_ns: the server folder the file is in.

    Returns:
        ``(fast, parsed)``: a boolean per line, and the parsed rows of the true ones (None when
        there are none).
    """
    n = len(text)
    candidate = np.asarray(pc.is_null(problems).to_numpy(zero_copy_only=False), dtype=bool)
    # Only lines that look like one object are parsed here. A blank line parses to no row at all,
    # which would shift every later row; and pyarrow 21 crashes (SIGSEGV) on a block that starts
    # with a bare `null`. Anything else is Spark's to judge.
    trimmed = pc.utf8_trim_whitespace(text)
    candidate &= _np(pc.starts_with(trimmed, "{")) & _np(pc.ends_with(trimmed, "}"))
    ok = np.zeros(n, dtype=bool)
    pieces: list[tuple[np.ndarray, pa.Table]] = []
    index = np.flatnonzero(candidate)
    if len(index):
        for rows, table in _parse(text, index, plan.parse_schema):
            pieces.append((rows, table))
    if not pieces:
        return ok, None
    rows = np.concatenate([r for r, _ in pieces])
    parsed = pa.concat_tables([t for _, t in pieces]) if len(pieces) > 1 else pieces[0][1]
    if len(pieces) > 1:  # bisecting yields ranges in line order already; keep it explicit
        order = np.argsort(rows, kind="stable")
        rows, parsed = rows[order], parsed.take(pa.array(order))
    passed = check_events(parsed, text.take(pa.array(rows)), folder_ns, plan)
    ok[rows[passed]] = True
    return ok, parsed.filter(pa.array(passed)) if not passed.all() else parsed


def _parse(text: pa.StringArray, index: np.ndarray, schema: pa.Schema) -> Iterator[tuple[np.ndarray, pa.Table]]:
    """Parse the lines at ``index``; yield ``(rows, table)`` for every range pyarrow accepts.

    A range is refused as a whole when any of its lines is not a well-typed JSON object; it is
    then halved, so a batch with one bad line costs about ``log2(lines)`` extra parses.
    """
    table = _parse_range(text, index, schema)
    if table is not None:
        yield index, table
        return
    if len(index) <= _BISECT_LINES:
        for i in index:
            one = np.array([i])
            table = _parse_range(text, one, schema)
            if table is not None:
                yield one, table
        return
    half = len(index) // 2
    yield from _parse(text, index[:half], schema)
    yield from _parse(text, index[half:], schema)


def _parse_range(text: pa.StringArray, index: np.ndarray, schema: pa.Schema) -> pa.Table | None:
    """The lines at ``index`` parsed as one NDJSON block, or None if pyarrow refuses any."""
    contiguous = index[-1] - index[0] + 1 == len(index)
    chosen = text.slice(int(index[0]), len(index)) if contiguous else text.take(pa.array(index))
    offsets = np.frombuffer(chosen.buffers()[1], dtype=np.int32)[chosen.offset : chosen.offset + len(chosen) + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    body = chosen.buffers()[2].slice(start, end - start)
    if np.frombuffer(body, dtype=np.uint8)[-1] != 0x0A:
        return None  # only a line with a read problem lacks its "\n", and those are not parsed
    try:
        table = pj.read_json(
            pa.BufferReader(body),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(body) + 1)),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="ignore"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    # Blank lines were left out, so a block that gave more rows than lines has a line holding
    # two objects: not an event. Refuse the block and let halving find that line.
    if table.num_rows != len(index):
        return None
    return table.combine_chunks()


def check_events(parsed: pa.Table, text: pa.StringArray, folder_ns: str, plan: FastPlan) -> np.ndarray:
    """A boolean per parsed line: it passes every check ``with_reason`` makes in the JVM."""
    n = parsed.num_rows

    def col(name: str) -> pa.Array:
        return parsed.column(name).combine_chunks() if isinstance(parsed.column(name), pa.ChunkedArray) else parsed.column(name)

    def present(name: str) -> np.ndarray:
        return np.asarray(pc.is_valid(col(name)).to_numpy(zero_copy_only=False), dtype=bool)

    ok = np.ones(n, dtype=bool)
    for key in plan.required:
        ok &= present(key)
    ok &= _np(pc.equal(col("v"), plan.version))
    ok &= _np(pc.is_in(col("type"), value_set=pa.array(plan.event_types)))
    ok &= _np(pc.greater_equal(col("seq"), 1))
    ok &= _np(pc.equal(col("ns"), folder_ns))
    for key in plan.millis_to_ts.values():
        # a time the lake's microsecond timestamps cannot hold is out_of_range (the JVM says so)
        values = col(key)
        in_range = pc.and_kleene(pc.greater_equal(values, -MAX_TIMESTAMP_MILLIS), pc.less_equal(values, MAX_TIMESTAMP_MILLIS))
        ok &= _np(in_range) | ~present(key)
    types = col("type")
    for event_type, (required, may_be_null) in plan.type_rules.items():
        of_type = _np(pc.equal(types, event_type))
        if not of_type.any():
            continue
        for key in required:
            ok &= ~of_type | present(key)
        for key in may_be_null:
            missing = of_type & ~present(key)
            if missing.any():
                # null or absent: only the text tells, as in the JVM check
                rows = np.flatnonzero(missing)
                has_key = _np(pc.match_substring_regex(text.take(pa.array(rows)), f'"{key}"\\s*:'))
                ok[rows[~has_key]] = False
    ok &= ~_nested_bad(parsed, plan.nested)
    return ok


def _np(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean array as numpy, null counting as false."""
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def _nested_bad(parsed: pa.Table, rules: tuple) -> np.ndarray:
    bad = np.zeros(parsed.num_rows, dtype=bool)
    for name, _, subtree in rules[1]:
        if subtree is not None:
            column = parsed.column(name)
            arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            bad |= _bad_values(arr, subtree)
    return bad


def _bad_values(arr: pa.Array, rule: tuple) -> np.ndarray:
    """Per element of ``arr``: a NOT NULL place under it holds a null."""
    bad = np.zeros(len(arr), dtype=bool)
    if rule[0] == "struct":
        valid = np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), dtype=bool)
        for child, (name, not_null, subtree) in zip(arr.flatten(), rule[1]):
            if not_null:
                bad |= valid & np.asarray(pc.is_null(child).to_numpy(zero_copy_only=False), dtype=bool)
            if subtree is not None:
                bad |= _bad_values(child, subtree)
    else:  # array
        _, not_null_elements, subtree = rule
        values = arr.flatten()
        if len(values):
            element_bad = np.zeros(len(values), dtype=bool)
            if not_null_elements:
                element_bad |= np.asarray(pc.is_null(values).to_numpy(zero_copy_only=False), dtype=bool)
            if subtree is not None:
                element_bad |= _bad_values(values, subtree)
            if element_bad.any():
                parents = pc.list_parent_indices(arr).to_numpy()
                bad[parents[element_bad]] = True
    return bad


# ----------------------------------------------------------------------------------- write


def event_batch(parsed: pa.Table, lines: pa.Array, file: str, plan: FastPlan) -> pa.RecordBatch:
    """The ``events`` data columns (``plan.file_schema``) of accepted parsed lines."""
    n = parsed.num_rows
    arrays = []
    for field in plan.file_schema:
        name = field.name
        if name in plan.millis_to_ts:
            millis = parsed.column(plan.millis_to_ts[name]).combine_chunks()
            arrays.append(pc.multiply(millis.cast(pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC")).cast(field.type))
        elif name == "ts_ms":
            arrays.append(parsed.column("ts").combine_chunks())
        elif name == "file":
            arrays.append(pa.array([file] * n, pa.string()) if n else pa.array([], pa.string()))
        elif name == "line":
            arrays.append(lines)
        else:
            arrays.append(parsed.column(name).combine_chunks())
    raw = pa.RecordBatch.from_arrays(arrays, names=plan.file_schema.names)
    return conform_batch(raw, plan.file_schema)
