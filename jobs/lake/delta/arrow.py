"""JVM-free reads of lake tables with ``deltalake`` and pyarrow, for small point queries.

Every Arrow read here passes pyarrow's own filesystem (local, or S3 for an ``s3a://`` table), never a
Python-implemented one (:func:`arrow_dataset` says why: a process could end with exit status 134).
Every ``DeltaTable`` is opened with the process's object-store settings (:func:`open_table`). Code in this project
reads Delta tables through :func:`read_table_arrow` or Spark, never through
``DeltaTable.to_pyarrow_*`` / ``to_pandas`` without ``filesystem=``.
"""

from __future__ import annotations

import os
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from deltalake import DeltaTable

from jobs.lake.delta.health import MissingDataFiles, damaged, open_delta, storage_options
from jobs.storage import locations, settings
from jobs.storage.stores import filesystem_of


def table_root(path: str | os.PathLike[str]) -> str:
    """The root of a table, normalised: an absolute local path (a plain path or ``file://`` URI),
    or ``s3a://bucket/key`` (``jobs.storage.locations``).

    Executors resolve relative paths against their own working directory, so every path is made
    absolute on the driver.

    Raises:
        ValueError: a scheme other than ``file``, ``s3a`` and ``s3``.
    """
    return locations.check(os.fspath(path))


def is_table(root: str) -> bool:
    """Whether a (normalised) root holds a Delta table."""
    return DeltaTable.is_deltatable(root, storage_options(root))


def open_table(root: str, version: int | None = None) -> DeltaTable:
    """``DeltaTable`` of a (normalised) root at ``version`` (the latest when None).

    Raises:
        FileNotFoundError: no table there.
        LakeDamaged: its log cannot be read (:mod:`jobs.lake.delta.health`).
    """
    return open_delta(root, version)


def load_table(path: str, version: int | None = None, timestamp: datetime | str | None = None) -> DeltaTable:
    """Open a table's snapshot: the latest, a version, or the last version committed at or before
    a timestamp (a datetime, naive meaning UTC, or an ISO-8601 string).

    Raises:
        FileNotFoundError: there is no Delta table at ``path``.
        LakeDamaged: the table's log cannot be read (:mod:`jobs.lake.delta.health`).
        ValueError: both ``version`` and ``timestamp`` are given, or no version had been committed
            by ``timestamp``.
    """
    if version is not None and timestamp is not None:
        raise ValueError("give version or timestamp, not both")
    path = table_root(path)
    if timestamp is None:
        return open_table(path, version=version)
    # Resolved from the commit timestamps ourselves: DeltaTable.load_as_version quietly gives
    # version 0 for an instant before the table existed (delta-spark refuses), and history() of
    # a time-travelled DeltaTable numbers its versions wrongly, so it cannot be checked after.
    when = datetime.fromisoformat(timestamp) if isinstance(timestamp, str) else timestamp
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    when_ms = int(when.timestamp() * 1000)
    commits = open_table(path).history()
    committed = [c["version"] for c in commits if c["timestamp"] <= when_ms]
    if not committed:
        first = min(commits, key=lambda c: c["version"])["timestamp"]
        raise ValueError(
            f"{path}: no version committed at or before {when.isoformat()}; "
            f"the first is from {datetime.fromtimestamp(first / 1000, UTC).isoformat()}"
        )
    return open_table(path, version=max(committed))


def arrow_dataset(table: DeltaTable, path: str, file_pruning_predicate: Any = None) -> Any:
    """A ``pyarrow.dataset.Dataset`` over a snapshot, read with pyarrow's native filesystem.

    This is what keeps processes from aborting with exit status 134 (the "exit 134" bug).
    ``DeltaTable.to_pyarrow_table()`` / ``to_pyarrow_dataset()`` / ``to_pandas()`` without a
    ``filesystem`` argument read through ``pyarrow.fs.PyFileSystem(DeltaStorageHandler(...))``: a
    filesystem implemented in Python, whose reads return Python-owned buffers
    (``arrow::py::PyBuffer``). The Parquet scan runs with ``pre_buffer=True`` on Arrow's C++ I/O
    thread pool, and the scan's futures, read-ahead generators and cached ranges can be released by an
    I/O thread a moment *after* ``to_table()`` has returned. If the interpreter is already finalizing
    then (the script simply ended, or called ``sys.exit``), that thread's ``~PyBuffer`` calls
    ``PyGILState_Ensure``; CPython ends any non-main thread that asks for the GIL during
    finalization with ``pthread_exit``, which glibc implements as a forced stack unwind; the unwind
    reaches a C++ ``noexcept`` destructor, so the C++ runtime calls ``std::terminate``:
    "terminate called without an active exception", SIGABRT, exit status 134 instead of the one
    the program meant. (Seen with gdb: ``PyThread_exit_thread <- take_gil <- PyGILState_Ensure <-
    arrow::py::PyBuffer::~PyBuffer <- ReadRangeCache::LazyImpl::~LazyImpl <- …`` on an Arrow I/O
    thread, main thread in finalization GC.) It needs nothing but ``deltalake`` and a read: about
    half the runs of a write-then-read script aborted on this machine (12/30 bare, 15/30 with pyspark
    imported, 32/60 with this project imported); write-only and load-only scripts never did, and the
    JVM plays no part.

    The fix is to never hand Arrow's I/O threads a Python-implemented filesystem: the dataset is
    built on pyarrow's own ``LocalFileSystem`` (or its C++ ``S3FileSystem`` for an ``s3a://`` table)
    rooted at the table (``SubTreeFileSystem``), so the
    buffers are C++-owned and nothing on those threads needs the GIL (0 aborts in 120 runs). The file
    list, partition values and statistics still come from ``deltalake``; only the byte reads move.
    """
    fs, inner = filesystem_of(path, settings.current().store if locations.is_remote(path) else None)
    filesystem = pafs.SubTreeFileSystem(inner, fs)
    return table.to_pyarrow_dataset(filesystem=filesystem, file_pruning_predicate=file_pruning_predicate)


def read_table_arrow(
    path: str | os.PathLike[str],
    columns: list[str] | None = None,
    filters: list[tuple[str, str, Any]] | list[list[tuple[str, str, Any]]] | None = None,
    version: int | None = None,
) -> pa.Table:
    """Read a table (or a few columns or rows of it) into Arrow without Spark.

    Args:
        path: table root (local, or ``s3a://``).
        columns: columns to return, in this order; all when None.
        filters: DNF filters as in ``pyarrow.parquet`` (``[("ns", "=", "ns-a"), ("ts", ">", t)]``);
            they prune files by partition and statistics and then filter rows exactly.
        version: the version to read; the latest when None.

    Returns:
        The rows; timestamps as ``timestamp[us, tz=UTC]``, partition columns included.

    Raises:
        FileNotFoundError: there is no Delta table at ``path``.
        LakeDamaged: its log cannot be read; :class:`MissingDataFiles` when a data file the
            version names is gone (``nsaudit lake vacuum`` removed an older version's files).
    """
    root = table_root(path)
    table = load_table(root, version=version)
    try:
        dataset = arrow_dataset(table, root, file_pruning_predicate=filters or None)
    except Exception as exc:  # noqa: BLE001 - deltalake's own error types: the file list is broken
        raise damaged(root, exc) from None
    expression = pq.filters_to_expression(filters) if filters else None
    try:
        return dataset.to_table(columns=columns, filter=expression)
    except FileNotFoundError as exc:  # the log names the file, the store lacks it
        raise MissingDataFiles(root, version, _missing_file(exc, root)) from None


def _missing_file(exc: FileNotFoundError, root: str) -> str:
    """The missing file named in pyarrow's message, relative to the table (the message if none)."""
    text = str(exc)
    inner = root.split("://", 1)[1] if "://" in root else root
    start = text.find(inner)
    if start < 0:
        return text.splitlines()[0][:200] if text else "?"
    end = text.find("'", start)
    return os.path.relpath(text[start : end if end > 0 else None], inner)


def count_table_rows(path: str | os.PathLike[str], filters: list[tuple[str, str, Any]] | None = None) -> int:
    """Rows of a table (those matching partition ``filters``, as :func:`read_table_arrow` takes
    them), counted from the Parquet footers of its files without reading their data.

    Raises:
        FileNotFoundError: there is no Delta table at ``path``.
    """
    root = table_root(path)
    dataset = arrow_dataset(load_table(root), root, file_pruning_predicate=filters or None)
    rows: int = dataset.count_rows(filter=pq.filters_to_expression(filters) if filters else None)
    return rows
