"""Finding one day's event-log segments and reading their lines.

Listing runs on the driver and touches only directory entries (or an object store's listing of a
prefix). Reading runs in Spark tasks through ``mapInArrow``, a large file alone in its task and
small ones together (:func:`group_tasks`): each task reads its files (gunzipping a ``.gz``), cuts
each into lines with numpy and hands Spark Arrow batches whose strings point into the file's
bytes, so no line is copied in Python. A shared filesystem (local disk, NFS) or the bucket is all
an executor needs: this module is shipped to executors by value and imports only numpy and
pyarrow there.

A bucket holds only what was uploaded on purpose: closed segments (docs/deploy.md, "Object
storage"). A ``.open`` segment there is a copy of a file still being written, its last line
maybe cut and its closed copy on the way; it is skipped, and so is any other object that is not a
segment (an upload tool's temporary file), and the listing says so.

What a reader owes the writer (docs/event-log.md) starts here: every line of every file becomes
a row, numbered from 1; a last line without ``\\n`` is kept and marked ``truncated_line``; a line
that is not UTF-8 is kept (bad bytes shown as ``\\xNN``) and marked ``invalid_utf8``.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import re
import sys
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from common.errors import UserError
from jobs.spark import pyworker
from jobs.spark.frames import local_frame
from jobs.spark.pyworker import keep_archive_listings
from jobs.storage import locations, settings, stores
from jobs.storage.problems import StorageError, describe
from jobs.storage.stores import ObjectStore, read_bytes
from schemas.ingest import CORRUPT_GZIP, INVALID_UTF8, TRUNCATED_LINE

# The writer's names are events-<20 digits>.jsonl[.gz|.open]; any events-*.jsonl name is read, so
# a segment copied under another name is seen (and deduplicated) rather than silently ignored.
_SEGMENT_NAME = re.compile(r"^events-.*\.jsonl(\.gz|\.open)?$")

log = logging.getLogger(__name__)

# Lines per Arrow batch handed to Spark: big enough to amortise the per-batch cost, small enough
# that a batch of long lines stays a few MiB.
BATCH_LINES = 16_384

# A task costs a Python worker's set-up and, in the scan, a data file per server: small segments
# share one. A task takes files until it holds TASK_TARGET_BYTES (a larger file has a task of its
# own, as every file had once) or TASK_MAX_FILES, and the day is cut into at least as many tasks
# as Spark runs at once while its files allow.
TASK_TARGET_BYTES = 64 * 1024 * 1024
TASK_MIN_BYTES = 1024 * 1024
TASK_MAX_FILES = 4096

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


class IngestInputError(UserError):
    """The events directory is missing, or holds no segment for the day asked for."""


@dataclass(frozen=True)
class SegmentFile:
    """One segment file of the day.

    Attributes:
        file: ``<ns>/<YYYY-MM-DD>/<name>``, relative to the events directory (the lake's name).
        path: absolute path or ``s3a://`` URI, as executors open it.
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


def list_day_segments(events_dir: str | os.PathLike[str], day: dt.date) -> list[SegmentFile]:
    """Every segment of ``day``: ``<events>/<ns>/<YYYY-MM-DD>/events-*.jsonl[.gz|.open]``.

    Folders and files whose names start with ``_`` or ``.`` are skipped (scratch space, editor
    and copy leftovers). Plain and ``.gz`` copies of one segment are both listed: ingest
    deduplicates their events and counts the copy's lines as duplicates. In an ``s3a://``
    events folder only closed segments are listed; what else the day's folders hold is skipped
    with a warning naming it (see the module's doc).

    Returns:
        The files ordered by ``file``.

    Raises:
        IngestInputError: ``events_dir`` is not a directory, or no name server has a segment for
            ``day``. An empty day is an error rather than an empty ingest because the run would
            otherwise replace that day's tables with nothing.
        StorageError: the bucket cannot be listed.
    """
    found, skipped = find_day_segments(events_dir, day)
    if skipped:
        shown = ", ".join(f"{name} ({why})" for name, why in skipped[:5])
        more = f" and {len(skipped) - 5} more" if len(skipped) > 5 else ""
        log.warning(
            "events %s, %s: skipped %d objects that are not closed segments: %s%s; upload closed "
            "segments only (docs/deploy.md, Object storage)",
            events_dir,
            day,
            len(skipped),
            shown,
            more,
        )
    return found


def find_day_segments(
    events_dir: str | os.PathLike[str], day: dt.date
) -> tuple[list[SegmentFile], list[tuple[str, str]]]:
    """:func:`list_day_segments`' files, and the ``(file, reason)`` of each object of an
    ``s3a://`` day folder that is skipped; logs nothing.

    Raises:
        IngestInputError, StorageError: as :func:`list_day_segments`.
    """
    root = locations.normalize(events_dir)
    if locations.is_remote(root):
        found, skipped = _list_remote(root, day)
    else:
        found, skipped = _list_local(events_dir, root, day), []
    if not found:
        raise IngestInputError(
            f"no event-log segments for {day.isoformat()} under {events_dir} "
            f"(looked for <ns>/{day.isoformat()}/events-*.jsonl, .jsonl.gz"
            f"{'' if locations.is_remote(root) else ', .jsonl.open'})"
        )
    return sorted(found, key=lambda s: s.file), skipped


def _list_local(events_dir: str | os.PathLike[str], root: str, day: dt.date) -> list[SegmentFile]:
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
            found.append(_segment(ns_entry.name, day, entry.name, entry.path, entry.stat().st_size, match))
    return found


def _list_remote(root: str, day: dt.date) -> tuple[list[SegmentFile], list[tuple[str, str]]]:
    """The day's closed segments under an ``s3a://`` prefix: one listing of the servers' folders,
    one of each server's day folder (never the whole bucket)."""
    import pyarrow.fs as pafs

    date_name = day.isoformat()
    fs = settings.current().store.filesystem()
    base = root.split("://", 1)[1]
    found, skipped = [], []
    try:
        servers = fs.get_file_info(pafs.FileSelector(base, allow_not_found=True))
        for ns_info in sorted(servers, key=lambda i: i.base_name):
            if _skipped(ns_info.base_name) or ns_info.type != pafs.FileType.Directory:
                continue
            day_files = fs.get_file_info(pafs.FileSelector(f"{ns_info.path}/{date_name}", allow_not_found=True))
            for info in day_files:
                file = f"{ns_info.base_name}/{date_name}/{info.base_name}"
                match = _SEGMENT_NAME.match(info.base_name)
                if info.type != pafs.FileType.File:
                    continue
                if _skipped(info.base_name) or match is None:
                    skipped.append((file, "not a segment"))
                elif match[1] == ".open":
                    skipped.append((file, "still open when it was copied"))
                else:
                    found.append(
                        _segment(ns_info.base_name, day, info.base_name, f"s3a://{info.path}", info.size, match)
                    )
    except OSError as exc:
        raise StorageError(describe(exc, root)) from None
    return found, skipped


def _segment(ns: str, day: dt.date, name: str, path: str, size: int, match: re.Match[str]) -> SegmentFile:
    return SegmentFile(
        file=f"{ns}/{day.isoformat()}/{name}",
        path=path,
        ns=ns,
        date=day,
        bytes=size,
        compressed=match[1] == ".gz",
        open_segment=match[1] == ".open",
    )


def _skipped(name: str) -> bool:
    return name.startswith(("_", "."))


def group_tasks(files: Sequence[SegmentFile], parallelism: int) -> list[list[SegmentFile]]:
    """``files`` cut into the groups a task reads each, the largest group first.

    Files are taken in ``file`` order (a server's segments in seq order, together) into groups of
    about ``total / (2 * parallelism)`` bytes (at least :data:`TASK_MIN_BYTES`, at most
    :data:`TASK_TARGET_BYTES`) and :data:`TASK_MAX_FILES` files; a file as large as that is a group
    of its own. Largest first: the long tasks start first, so no task waits for two.

    Example:
        >>> [len(g) for g in group_tasks(ten_small_files + [one_huge_file], parallelism=2)]
        [1, 10]
    """
    total = sum(f.bytes for f in files)
    target = min(TASK_TARGET_BYTES, max(TASK_MIN_BYTES, total // max(1, 2 * parallelism)))
    groups: list[list[SegmentFile]] = []
    current: list[SegmentFile] = []
    size = 0
    for f in sorted(files, key=lambda s: s.file):
        if f.bytes >= target:
            groups.append([f])
            continue
        if current and (size + f.bytes > target or len(current) >= TASK_MAX_FILES):
            groups.append(current)
            current, size = [], 0
        current.append(f)
        size += f.bytes
    if current:
        groups.append(current)
    return sorted(groups, key=lambda g: -sum(f.bytes for f in g))


def read_lines(spark: SparkSession, files: Sequence[SegmentFile]) -> DataFrame:
    """Every line of ``files`` as ``LINES_SCHEMA`` rows, read in parallel, a task per group of
    files (:func:`group_tasks`).

    Example:
        >>> lines_df = read_lines(spark, list_day_segments("events", dt.date(2026, 11, 21)))
        >>> lines_df.where("read_problem IS NOT NULL").select("file", "line", "read_problem").first()
        Row(file='ns-a/2026-11-21/events-00000000000000000013.jsonl.open', line=812, read_problem='truncated_line')
    """
    # Executors may not have this project installed (a standalone cluster); ship the reader.
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(pyworker)
    cloudpickle.register_pickle_by_value(stores)
    task = partial(read_segment_batches, store=settings.current().store)
    return files_frame(spark, files).mapInArrow(task, LINES_SCHEMA)


def files_frame(spark: SparkSession, files: Sequence[SegmentFile]) -> DataFrame:
    """``SEGMENT_FILES_SCHEMA`` rows of ``files``, a partition per :func:`group_tasks` group,
    largest first, each group's files in ``file`` order.

    Built in the JVM alone: the listing, handed over as an Arrow table (a local relation), is
    broadcast onto ``spark.range`` (one number per partition). A DataFrame made from Python rows
    (``parallelize``, or ``createDataFrame`` of a list) runs a Python function to convert them: a
    second Python worker beside every task, paying its per-task set-up
    (``jobs.spark.pyworker``) once more per task.
    """
    groups = group_tasks(files, spark.sparkContext.defaultParallelism)
    task = "_task"
    listing_df = local_frame(
        spark,
        [(i, s.date, s.ns, s.file, s.path, s.compressed) for i, group in enumerate(groups) for s in group],
        T.StructType([T.StructField(task, T.LongType(), False), *SEGMENT_FILES_SCHEMA.fields]),
    )
    tasks_df = spark.range(0, len(groups), 1, max(1, len(groups))).withColumnRenamed("id", task)
    # Always a broadcast, small day or not: a shuffle join would lose the range's task per group.
    return tasks_df.join(F.broadcast(listing_df), task).select(*SEGMENT_FILES_SCHEMA.fieldNames())


def read_segment_batches(
    batches: Iterator[pa.RecordBatch], store: ObjectStore | None = None
) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: segment-file rows in, ``LINES_SCHEMA`` batches out (``store``
    reaches ``s3a://`` files)."""
    keep_archive_listings()
    for batch in batches:
        for seg in batch.to_pylist():
            data = read_bytes(seg["path"], store)
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
    for lo in range(0, last, BATCH_LINES):
        hi = min(last, lo + BATCH_LINES)
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
