"""Finding one day's event-log segments, reading their lines and checking each line.

Listing runs on the driver and touches only directory entries. Reading runs in Spark tasks, one
file per task, through ``mapInArrow``: each task reads its file (gunzipping a ``.gz``), cuts it
into lines with numpy and hands Spark Arrow batches whose strings point into the file's bytes, so
no line is copied in Python. A shared filesystem (local disk, NFS) is all an executor needs:
this module is shipped to executors by value and imports only numpy and pyarrow there.

Checking is column expressions in the JVM: each line is parsed once with the explicit
``EVENT_SCHEMA`` (:func:`with_event`) and given the first reason it cannot be an event, or none
(:func:`with_reason`).

What a reader owes the writer (event-log spec) starts here: every line of every file becomes a
row, numbered from 1; a last line without ``\\n`` is kept and marked ``truncated_line``; a line
that is not UTF-8 is kept (bad bytes shown as ``\\xNN``) and marked ``invalid_utf8``; every
other problem gets a reason from ``schemas.ingest``.
"""

from __future__ import annotations

import datetime as dt
import os
import re
import sys
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.spark import pyworker
from jobs.spark.pyworker import keep_archive_listings
from jobs.spark.frames import local_frame
from common.errors import UserError
from schemas.events import EVENT_SCHEMA, EVENT_TYPES, FORMAT_VERSION, TYPE_RULES
from schemas.ingest import (
    BAD_VERSION,
    CORRUPT_GZIP,
    EMPTY_LINE,
    INVALID_UTF8,
    MISSING_KEY,
    NOT_JSON,
    NOT_OBJECT,
    NS_MISMATCH,
    OUT_OF_RANGE,
    TRUNCATED_LINE,
    UNKNOWN_TYPE,
    WRONG_TYPE,
)

# The writer's names are events-<20 digits>.jsonl[.gz|.open]; any events-*.jsonl name is read, so
# a segment copied under another name is seen (and deduplicated) rather than silently ignored.
_SEGMENT_NAME = re.compile(r"^events-.*\.jsonl(\.gz|\.open)?$")

# Lines per Arrow batch handed to Spark: big enough to amortise the per-batch cost, small enough
# that a batch of long lines stays a few MiB.
_BATCH_LINES = 16_384

SEGMENT_FILES_SCHEMA = T.StructType(
    [
        T.StructField("date", T.DateType(), False),
        T.StructField("ns", T.StringType(), False),
        T.StructField("file", T.StringType(), False),
        T.StructField("path", T.StringType(), False),
        T.StructField("compressed", T.BooleanType(), False),
    ]
)

# One row per line. ``text`` is the line as read *with* its "\n" (so Spark gets the file's bytes
# without a copy); ``read_problem`` is a quarantine reason found while reading, else null.
LINES_SCHEMA = T.StructType(
    [
        T.StructField("date", T.DateType(), False),
        T.StructField("ns", T.StringType(), False),
        T.StructField("file", T.StringType(), False),
        T.StructField("line", T.LongType(), False),
        T.StructField("text", T.StringType(), False),
        T.StructField("read_problem", T.StringType(), True),
    ]
)

_ARROW_LINES = pa.schema(
    [
        ("date", pa.date32()),
        ("ns", pa.string()),
        ("file", pa.string()),
        ("line", pa.int64()),
        ("text", pa.string()),
        ("read_problem", pa.string()),
    ]
)


# Spark's JSON reader is lenient by default; a line must be strict JSON to count as an event.
_JSON_OPTIONS = {"allowSingleQuotes": "false", "allowNonNumericNumbers": "false"}
_CORRUPT = "_corrupt"
# The line is parsed as the value of a wrapper object, so anything after the event object (a
# second object, stray text) is a syntax error of the wrapper and not silently ignored, and a
# value of the wrong type anywhere sets the wrapper's corrupt-record column.
_WRAPPED_EVENT = T.StructType([T.StructField("e", EVENT_SCHEMA), T.StructField(_CORRUPT, T.StringType())])
_KEY_TEXTS = T.MapType(T.StringType(), T.StringType())
_SCALAR_CHECKED = (T.IntegerType, T.LongType, T.BooleanType)
# Epoch milliseconds whose microseconds fit in a Spark (and Parquet) timestamp.
MAX_TIMESTAMP_MILLIS = (2**63 - 1) // 1000


class IngestInputError(UserError):
    """The events directory is missing, or holds no segment for the day asked for."""


@dataclass(frozen=True)
class SegmentFile:
    """One segment file of the day.

    Attributes:
        file: ``<ns>/<YYYY-MM-DD>/<name>``, relative to the events directory (the lake's name).
        path: absolute path, as executors open it.
        ns: the name-server folder.
        date: the day folder.
        bytes: size on disk.
        compressed: a ``.jsonl.gz`` segment.
        open_segment: a ``.jsonl.open`` segment.
    """

    file: str
    path: str
    ns: str
    date: dt.date
    bytes: int
    compressed: bool
    open_segment: bool


def list_day_segments(events_dir: str | os.PathLike, day: dt.date) -> list[SegmentFile]:
    """Every segment of ``day``: ``<events>/<ns>/<YYYY-MM-DD>/events-*.jsonl[.gz|.open]``.

    Folders and files whose names start with ``_`` or ``.`` are skipped (scratch space, editor
    and copy leftovers). Plain and ``.gz`` copies of one segment are both listed: ingest
    deduplicates their events and counts the copy's lines as duplicates.

    Returns:
        The files ordered by ``file``.

    Raises:
        IngestInputError: ``events_dir`` is not a directory, or no name server has a segment for
            ``day``. An empty day is an error rather than an empty ingest because the run would
            otherwise replace that day's tables with nothing.
    """
    root = os.path.abspath(os.fspath(events_dir))
    if not os.path.isdir(root):
        raise IngestInputError(f"events directory {events_dir} does not exist or is not a directory")
    date_name = day.isoformat()
    found = []
    for ns_entry in sorted(os.scandir(root), key=lambda e: e.name):
        if _skipped(ns_entry.name) or not ns_entry.is_dir():
            continue
        day_dir = os.path.join(ns_entry.path, date_name)
        if not os.path.isdir(day_dir):
            continue
        for entry in os.scandir(day_dir):
            match = _SEGMENT_NAME.match(entry.name)
            if _skipped(entry.name) or match is None or not entry.is_file():
                continue
            found.append(
                SegmentFile(
                    file=f"{ns_entry.name}/{date_name}/{entry.name}",
                    path=entry.path,
                    ns=ns_entry.name,
                    date=day,
                    bytes=entry.stat().st_size,
                    compressed=match[1] == ".gz",
                    open_segment=match[1] == ".open",
                )
            )
    if not found:
        raise IngestInputError(
            f"no event-log segments for {date_name} under {events_dir} "
            f"(looked for <ns>/{date_name}/events-*.jsonl, .jsonl.gz, .jsonl.open)"
        )
    return sorted(found, key=lambda s: s.file)


def _skipped(name: str) -> bool:
    return name.startswith(("_", "."))


def read_lines(spark: SparkSession, files: Sequence[SegmentFile]) -> DataFrame:
    """Every line of ``files`` as ``LINES_SCHEMA`` rows, read in parallel, one task per file.

    Example:
        >>> lines_df = read_lines(spark, list_day_segments("events", dt.date(2026, 11, 21)))
        >>> lines_df.where("read_problem IS NOT NULL").select("file", "line", "read_problem").first()
        Row(file='ns-a/2026-11-21/events-00000000000000000013.jsonl.open', line=812, read_problem='truncated_line')
    """
    # Executors may not have this project installed (a standalone cluster); ship the reader.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(pyworker)
    return files_frame(spark, files).mapInArrow(read_segment_batches, LINES_SCHEMA)


def files_frame(spark: SparkSession, files: Sequence[SegmentFile]) -> DataFrame:
    """``SEGMENT_FILES_SCHEMA`` rows of ``files``, one per partition, largest first: a task per
    file, the long ones started first, so no task waits for two.

    Built in the JVM alone: the listing, handed over as an Arrow table (a local relation), is
    broadcast onto ``spark.range`` (one number per partition). A DataFrame made from Python rows
    (``parallelize``, or ``createDataFrame`` of a list) runs a Python function to convert them: a
    second Python worker beside every file's task, paying its per-task set-up
    (``jobs.spark.pyworker``), about 0.2 s of CPU per file.
    """
    ordered = sorted(files, key=lambda s: -s.bytes)
    task = "_task"
    listing_df = local_frame(
        spark,
        [(i, s.date, s.ns, s.file, s.path, s.compressed) for i, s in enumerate(ordered)],
        T.StructType([T.StructField(task, T.LongType(), False), *SEGMENT_FILES_SCHEMA.fields]),
    )
    tasks_df = spark.range(0, len(ordered), 1, max(1, len(ordered))).withColumnRenamed("id", task)
    return tasks_df.join(F.broadcast(listing_df), task).select(*SEGMENT_FILES_SCHEMA.fieldNames())


def read_segment_batches(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: segment-file rows in, ``LINES_SCHEMA`` batches out."""
    keep_archive_listings()
    for batch in batches:
        for seg in batch.to_pylist():
            with open(seg["path"], "rb") as f:
                data = f.read()
            tail_problem = None
            if seg["compressed"]:
                data, tail_problem = gunzip(data)
            yield from line_batches(data, seg["date"], seg["ns"], seg["file"], tail_problem)


def gunzip(data: bytes) -> tuple[bytes, str | None]:
    """Decompress a (possibly multi-member) gzip file as far as it goes.

    Returns:
        The bytes that came out and, when the stream was corrupt, the ``corrupt_gzip`` reason for
        what follows the last complete line. A stream that merely ends early needs no reason: its
        unfinished last line is cut short like a crashed plain segment's.
    """
    out = []
    rest = data
    while rest:
        inflater = zlib.decompressobj(wbits=31)
        try:
            out.append(inflater.decompress(rest))
            out.append(inflater.flush())
        except zlib.error as exc:
            return b"".join(out), f"{CORRUPT_GZIP}: {exc}"
        if not inflater.eof:
            break
        rest = inflater.unused_data
    return b"".join(out), None


def line_batches(
    data: bytes, date: dt.date, ns: str, file: str, tail_problem: str | None = None
) -> Iterator[pa.RecordBatch]:
    """Cut a segment's bytes into numbered lines, as Arrow batches of ``LINES_SCHEMA``.

    Each ``text`` keeps its ``"\\n"`` and points into ``data`` (offsets only, no copy). A last line
    without ``"\\n"`` is ``truncated_line``, or ``tail_problem`` when given, which also yields an
    empty last line when ``data`` ends with ``"\\n"`` (so a corrupt gzip is never silent).

    Example:
        >>> [b.to_pydict()["text"] for b in line_batches(b'{"a":1}\\n{"a"', day, "ns-a", "f")]
        [['{"a":1}\\n', '{"a"']]
    """
    ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 0x0A) + 1
    cut = len(data) > (int(ends[-1]) if len(ends) else 0)
    if cut or tail_problem is not None:
        ends = np.append(ends, len(data))
    starts = np.concatenate(([0], ends[:-1])) if len(ends) else ends
    buffer = pa.py_buffer(data)
    last = len(ends)
    for lo in range(0, last, _BATCH_LINES):
        hi = min(last, lo + _BATCH_LINES)
        base = int(starts[lo])
        offsets = (np.concatenate(([base], ends[lo:hi])) - base).astype(np.int32)
        text = pa.StringArray.from_buffers(
            hi - lo, pa.py_buffer(offsets.tobytes()), buffer.slice(base, int(ends[hi - 1]) - base)
        )
        problems: list[str | None] = [None] * (hi - lo)
        if hi == last and (cut or tail_problem is not None):
            problems[-1] = tail_problem or TRUNCATED_LINE
        text = _with_valid_utf8(text, problems)
        n = hi - lo
        yield pa.RecordBatch.from_arrays(
            [
                pa.array([date] * n, pa.date32()),
                pa.array([ns] * n, pa.string()),
                pa.array([file] * n, pa.string()),
                pa.array(np.arange(lo + 1, hi + 1, dtype=np.int64)),
                text,
                pa.array(problems, pa.string()),
            ],
            schema=_ARROW_LINES,
        )


def _with_valid_utf8(text: pa.StringArray, problems: list[str | None]) -> pa.StringArray:
    """``text`` when every line is UTF-8; otherwise bad lines are escaped and marked (slow path)."""
    try:
        text.validate(full=True)
        return text
    except pa.ArrowInvalid:
        pass
    raws = pa.Array.from_buffers(pa.binary(), len(text), text.buffers()).to_pylist()
    fixed = []
    for i, raw in enumerate(raws):
        try:
            fixed.append(raw.decode("utf-8"))
        except UnicodeDecodeError:
            fixed.append(raw.decode("utf-8", "backslashreplace"))
            problems[i] = problems[i] or INVALID_UTF8
    return pa.array(fixed, pa.string())


# --------------------------------------------------------------------------------- checking


def with_event(lines_df: DataFrame) -> DataFrame:
    """Add ``event`` (the line parsed with ``EVENT_SCHEMA``) and ``corrupt``.

    ``corrupt`` is true when the line is not one strict JSON value or a value has the wrong type;
    ``event`` then holds what did parse (null when the line is not an object at all).

    Example:
        ``{"v":1,"seq":"12"}`` gives ``event.v = 1``, ``event.seq = null``, ``corrupt = true``.
    """
    wrapped = F.concat(F.lit('{"e":'), F.col("text"), F.lit("}"))
    parsed = F.from_json(wrapped, _WRAPPED_EVENT, {**_JSON_OPTIONS, "columnNameOfCorruptRecord": _CORRUPT})
    return (
        lines_df.withColumn("_parsed", parsed)
        .withColumn("event", F.col("_parsed.e"))
        .withColumn("corrupt", F.col(f"_parsed.{_CORRUPT}").isNotNull())
        .drop("_parsed")
    )


def with_reason(parsed_df: DataFrame) -> DataFrame:
    """Add ``reason``: the first problem of the line (``schemas.ingest`` codes), null if accepted.

    Needs ``with_event``'s columns plus ``ns`` (the file's folder) and ``read_problem``.

    Example:
        ``{"v":1,"ns":"ns-b",...}`` in a file under ``ns-a/`` gives
        ``ns_mismatch: ns-b in a file of ns-a``.
    """
    event = F.col("event")
    # The key -> value-text map costs a second parse, so only corrupt lines get one.
    keyed_df = parsed_df.withColumn("_keys", F.when(F.col("corrupt"), F.from_json("text", _KEY_TEXTS, _JSON_OPTIONS)))
    version = event["v"]
    reason = F.coalesce(
        F.col("read_problem"),
        F.when(version.isNotNull() & (version != FORMAT_VERSION),
               F.concat(F.lit(f"{BAD_VERSION}: "), version.cast("string"))),
        F.when(F.col("corrupt"), _corrupt_reason(F.col("text"), event, F.col("_keys"))),
        F.when(event.isNull(), F.lit(NOT_OBJECT)),
        # The wrapper cannot see `, "key": value` after the object (the wrapper takes it as its
        # own key); a line must end with the object's brace. Checked cheaply for the usual "}\n".
        F.when(~(F.col("text").endswith("}\n") | F.col("text").rlike(r"\}\s*$")), F.lit(NOT_JSON)),
        *[F.when(event[k].isNull(), F.lit(f"{MISSING_KEY}: {k}")) for k in ("v", "ns", "seq", "ts", "type")],
        F.when(~event["type"].isin(*EVENT_TYPES), F.concat(F.lit(f"{UNKNOWN_TYPE}: "), event["type"])),
        F.when(event["seq"] < 1, F.concat(F.lit(f"{OUT_OF_RANGE}: seq "), event["seq"].cast("string"), F.lit(" < 1"))),
        # the lake keeps these as microsecond timestamps; a value that overflows them is refused
        # here rather than failing the whole day's ingest
        *[
            F.when(~event[k].between(-MAX_TIMESTAMP_MILLIS, MAX_TIMESTAMP_MILLIS),
                   F.concat(F.lit(f"{OUT_OF_RANGE}: {k} "), event[k].cast("string")))
            for k in ("ts", "last_update_ts")
        ],
        F.when(event["ns"] != F.col("ns"),
               F.concat(F.lit(f"{NS_MISMATCH}: "), event["ns"], F.lit(" in a file of "), F.col("ns"))),
        _type_rule_reason(F.col("text"), event),
        *_nested_null_reasons(event),
    )
    return keyed_df.withColumn("reason", reason).drop("_keys")


def _corrupt_reason(text: Column, event: Column, keys: Column) -> Column:
    """Why a corrupt line is corrupt; evaluated only for corrupt lines."""
    wrong_keys = []
    for f in EVENT_SCHEMA.fields:
        if isinstance(f.dataType, _SCALAR_CHECKED):
            # A value Spark could not convert reads as null although the key has a non-null text.
            wrong = keys[f.name].isNotNull() & event[f.name].isNull()
        elif isinstance(f.dataType, (T.StructType, T.ArrayType)):
            wrong = keys[f.name].isNotNull() & _is_corrupt_as(keys[f.name], f.dataType)
        else:
            continue  # Spark reads any JSON value into a string key as its text: never corrupt
        wrong_keys.append(F.when(wrong, F.lit(f"{WRONG_TYPE}: {f.name}")))
    one_value = ~_is_corrupt_as(text, T.StringType())
    return F.coalesce(
        F.when(text.rlike(r"^\s*$"), F.lit(EMPTY_LINE)),
        F.when(event.isNull() & ~text.rlike(r"^\s*\{") & one_value, F.lit(NOT_OBJECT)),
        F.when(event.isNull() | keys.isNull(), F.lit(NOT_JSON)),
        *wrong_keys,
        F.lit(WRONG_TYPE),  # e.g. a repeated key whose later value has the wrong type
    )


def _is_corrupt_as(value_text: Column, dtype: T.DataType) -> Column:
    """Whether a JSON value's text fails to parse as ``dtype`` (a string type takes any value)."""
    schema = T.StructType([T.StructField("x", dtype), T.StructField(_CORRUPT, T.StringType())])
    options = {**_JSON_OPTIONS, "columnNameOfCorruptRecord": _CORRUPT}
    parsed = F.from_json(F.concat(F.lit('{"x":'), value_text, F.lit("}")), schema, options)
    return parsed[_CORRUPT].isNotNull()


def _type_rule_reason(text: Column, event: Column) -> Column:
    """``missing_key`` for a key the event's type must carry (``schemas.events.TYPE_RULES``)."""
    by_type = None
    for event_type, rule in TYPE_RULES.items():
        checks = [F.when(event[k].isNull(), _missing(k, event_type)) for k in rule.required] + [
            # "present" keys may be null; only their absence is a problem, and that is rare
            # enough to test with a pattern rather than a second parse.
            F.when(event[k].isNull() & ~text.rlike(f'"{k}"\\s*:'), _missing(k, event_type))
            for k in rule.present
        ]
        if not checks:
            continue
        check = F.coalesce(*checks) if len(checks) > 1 else checks[0]
        condition = event["type"] == event_type
        by_type = F.when(condition, check) if by_type is None else by_type.when(condition, check)
    return by_type if by_type is not None else F.lit(None).cast("string")


def _missing(key: str, event_type: str) -> Column:
    return F.lit(f"{MISSING_KEY}: {key} (required by {event_type})")


def _nested_null_reasons(event: Column) -> list[Column]:
    """Reasons for nulls where ``EVENT_SCHEMA`` forbids them below the top level.

    The lake's writer refuses such nulls, so they are quarantined here: a topic object without
    ``perm``, a ``data_version`` without ``counter``, a null inside ``filter_servers``.
    """
    return [F.when(condition(event), F.lit(message)) for condition, message in _NESTED_NULL_CHECKS]


def _nested_null_checks(dtype: T.DataType, path: str) -> list[tuple[Callable[[Column], Column], str]]:
    """``(condition on a value of dtype, reason)`` for every forbidden null under ``dtype``."""
    checks: list[tuple[Callable[[Column], Column], str]] = []
    if isinstance(dtype, T.StructType):
        for f in dtype.fields:
            name = f"{path}.{f.name}" if path else f.name
            if path and not f.nullable:  # top-level keys are checked per event type instead
                checks.append((lambda v, n=f.name: v.isNotNull() & v[n].isNull(), f"{MISSING_KEY}: {name}"))
            for condition, message in _nested_null_checks(f.dataType, name):
                checks.append((lambda v, n=f.name, c=condition: c(v[n]), message))
    elif isinstance(dtype, T.ArrayType):
        element = f"{path}[]"
        if not dtype.containsNull:
            checks.append((lambda v: F.exists(v, lambda x: x.isNull()), f"{WRONG_TYPE}: {element} (null)"))
        for condition, message in _nested_null_checks(dtype.elementType, element):
            checks.append((lambda v, c=condition: F.exists(v, lambda x: c(x)), message))
    return checks


_NESTED_NULL_CHECKS = _nested_null_checks(EVENT_SCHEMA, "")


def select_checked(reasoned_df: DataFrame) -> DataFrame:
    """What the rest of ingest needs of each line: its place, reason, and event or raw text.

    An accepted line keeps its parsed ``event`` and an ``event_hash`` (to tell a duplicate from
    a conflict); a quarantined line keeps ``raw`` (the line without its ``\\n``). The other is
    null, which halves what is held for the day.
    """
    accepted = F.col("reason").isNull()
    return reasoned_df.select(
        "date",
        "ns",
        "file",
        "line",
        "reason",
        F.when(~accepted, F.regexp_replace("text", "\n$", "")).alias("raw"),
        F.when(accepted, F.col("event")).alias("event"),
        F.when(accepted, F.xxhash64("event")).alias("event_hash"),
    )
