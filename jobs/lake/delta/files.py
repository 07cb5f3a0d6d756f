"""Task-side file writing for the lake's Delta writes: partition layout, NOT NULL checks, Parquet
files with Delta statistics.

Shipped to executors by value together with :mod:`jobs.lake.delta.write` (see that module), so it
imports nothing from ``jobs`` but :mod:`jobs.storage.stores`, shipped the same way. ``fs`` is a
pyarrow filesystem, local or S3, and ``root`` a path in it.
"""

from __future__ import annotations

import json
import math
import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from pyspark.sql.types import ArrayType, DataType, MapType, StructType

from jobs.storage.stores import make_dirs

# Spark's ExternalCatalogUtils.escapePathName set: these characters are %XX-escaped in partition
# folder names, so Spark's partition discovery (read_table) unescapes them to the same value.
_PATH_ESCAPES = frozenset("\"#%'*/:=?\\\x7f{[]^") | frozenset(chr(c) for c in range(1, 32))
NULL_PARTITION_DIR = "__HIVE_DEFAULT_PARTITION__"

# Delta stats keep strings to a prefix (delta-spark: 32 characters); a longer max is left out
# rather than truncated, since a truncated max would be smaller than the real one.
_STATS_STRING_PREFIX = 32
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Row groups of up to a million rows or 64 MiB of Arrow memory per file, and at most 256 MiB
# buffered per task however many partitions it writes (Python worker memory is outside the JVM
# heap, so it is kept modest).
_ROW_GROUP_BYTES = 64 * 1024 * 1024
_ROW_GROUP_ROWS = 1_000_000
TASK_BUFFER_BYTES = 256 * 1024 * 1024


def encode_partition_value(value: object) -> str | None:
    """Delta's string form of a partition value (protocol, "Partition Value Serialization").

    Example:
        >>> encode_partition_value(datetime.date(2026, 11, 21)), encode_partition_value(None)
        ('2026-11-21', None)
    """
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        if value == "":
            # Delta and Spark store "" and null the same way; it would read back as null.
            raise ValueError("an empty string cannot be a partition value (Delta reads it back as null)")
        return value
    return value.isoformat() if hasattr(value, "isoformat") else str(value)


def _escape_path_name(value: str) -> str:
    return "".join(f"%{ord(c):02X}" if c in _PATH_ESCAPES else c for c in value)


def partition_folder(partition_by: tuple[str, ...], key: tuple[Any, ...]) -> str:
    """The hive-style folder of partition ``key`` (encoded values), relative to the table root.

    Example:
        >>> partition_folder(("date", "ns"), ("2026-11-21", None))
        'date=2026-11-21/ns=__HIVE_DEFAULT_PARTITION__'
    """
    return "/".join(
        f"{c}={NULL_PARTITION_DIR if v is None else _escape_path_name(v)}"
        for c, v in zip(partition_by, key, strict=True)
    )


def split_by_partition(
    batch: pa.RecordBatch, partition_by: tuple[str, ...]
) -> Iterator[tuple[tuple[Any, ...], pa.RecordBatch]]:
    """Split a batch by its encoded partition values; one group when unpartitioned.

    Example:
        >>> [k for k, _ in split_by_partition(batch_with_ns_a_and_b, ("ns",))]
        [('ns-a',), ('ns-b',)]
    """
    if not partition_by:
        yield (), batch
        return
    keys = pa.Table.from_batches([batch]).select(list(partition_by)).group_by(list(partition_by), use_threads=False)
    unique = keys.aggregate([]).to_pylist()
    for row in unique:
        key = tuple(encode_partition_value(row[c]) for c in partition_by)
        if len(unique) == 1:
            yield key, batch
            continue
        mask = None
        for col in partition_by:
            column = batch.column(col)
            cond = pc.is_null(column) if row[col] is None else pc.equal(column, pa.scalar(row[col], column.type))
            mask = cond if mask is None else pc.and_(mask, cond)
        yield key, batch.filter(mask)


def check_not_null(batch: pa.RecordBatch, declared: StructType) -> None:
    """Raise ValueError if a batch has a null where the declared schema says NOT NULL.

    Checks top-level columns, struct fields (only where the struct itself is not null), array
    elements and map values, naming the column path, e.g. ``routes[].broker_name``.
    """
    for field in declared.fields:
        _check_array(batch.column(field.name), field.dataType, field.nullable, field.name)


def _check_array(arr: pa.Array, dtype: DataType, nullable: bool, where: str) -> None:
    if not nullable and arr.null_count:
        raise ValueError(f"column {where} is declared NOT NULL but has {arr.null_count} null value(s)")
    if isinstance(dtype, StructType):
        valid = arr.filter(pc.is_valid(arr)) if arr.null_count else arr
        for i, f in enumerate(dtype.fields):
            _check_array(valid.field(i), f.dataType, f.nullable, f"{where}.{f.name}")
    elif isinstance(dtype, ArrayType):
        _check_array(arr.flatten(), dtype.elementType, dtype.containsNull, f"{where}[]")
    elif isinstance(dtype, MapType):
        # As a list of key/value structs, flatten() applies slicing and skips null maps.
        entries = arr.cast(pa.list_(pa.struct([arr.type.key_field, arr.type.item_field]))).flatten()
        _check_array(entries.field(0), dtype.keyType, False, f"{where}{{key}}")
        _check_array(entries.field(1), dtype.valueType, dtype.valueContainsNull, f"{where}{{value}}")


class DataFile:
    """One Parquet file being written by a task, with its running Delta statistics."""

    def __init__(
        self, fs: pafs.FileSystem, root: str, rel_path: str, partition_values: dict[str, Any], schema: pa.Schema
    ) -> None:
        self.fs, self.root, self.rel_path, self.partition_values = fs, root, rel_path, partition_values
        self.writer = pq.ParquetWriter(f"{root}/{rel_path}", schema, filesystem=fs, compression="snappy")
        self.num_records = 0
        self.pending: list[pa.RecordBatch] = []
        self.pending_rows = self.pending_bytes = 0
        self.stats = {f.name: ColumnStats(f.type) for f in schema if ColumnStats.eligible(f.type)}

    @classmethod
    def create(
        cls,
        fs: pafs.FileSystem,
        root: str,
        partition_by: tuple[str, ...],
        key: tuple[Any, ...],
        schema: pa.Schema,
        prefix: str | None = None,
    ) -> DataFile:
        """Open a new file under ``root`` in the hive-style folder of partition ``key``, named
        ``part-[<prefix>-]<uuid>.c000.snappy.parquet`` (a write's id as prefix finds its files)."""
        folder = partition_folder(partition_by, key)
        # The table root too: the first write of an unpartitioned table creates it.
        make_dirs(fs, f"{root}/{folder}" if folder else root)
        # uuid: attempts of the same task, and concurrent writers, never collide.
        name = f"part-{prefix + '-' if prefix else ''}{uuid.uuid4()}.c000.snappy.parquet"
        rel = f"{folder}/{name}" if folder else name
        return cls(fs, root, rel, dict(zip(partition_by, key, strict=True)), schema)

    def write(self, batch: pa.RecordBatch) -> None:
        # Batches are buffered: pyarrow makes one row group per write call, and Spark's Arrow
        # batches (10,000 rows) would give files of many tiny row groups.
        self.pending.append(batch)
        self.pending_rows += batch.num_rows
        # the buffers' size, not nbytes: nbytes walks the offsets of nested lists, and pyarrow
        # 21 crashed (SIGSEGV) there on Spark batches whose list-of-struct event columns
        # (the observation keys) were all null
        self.pending_bytes += batch.get_total_buffer_size()
        self.num_records += batch.num_rows
        for name, stats in self.stats.items():
            stats.update(batch.column(name))
        if self.pending_rows >= _ROW_GROUP_ROWS or self.pending_bytes >= _ROW_GROUP_BYTES:
            self.flush()

    def flush(self) -> None:
        if self.pending:
            self.writer.write_table(pa.Table.from_batches(self.pending), row_group_size=self.pending_rows)
            self.pending, self.pending_rows, self.pending_bytes = [], 0, 0

    def close(self) -> dict[str, Any]:
        self.flush()
        self.writer.close()
        size = self.fs.get_file_info(f"{self.root}/{self.rel_path}").size
        stats: dict[str, Any] = {"numRecords": self.num_records, "minValues": {}, "maxValues": {}, "nullCount": {}}
        for name, col in self.stats.items():
            stats["nullCount"][name] = col.null_count
            if col.min is not None:
                stats["minValues"][name] = col.min
            if col.max is not None:
                stats["maxValues"][name] = col.max
        return {
            "path": self.rel_path,  # raw path: delta-rs percent-encodes it for the log
            "size": size,
            "partition_values": self.partition_values,
            "modification_time": int(time.time() * 1000),
            "stats": json.dumps(stats),
        }

    def discard(self) -> None:
        """Close and delete the file, as far as the filesystem lets (an unreachable store leaves
        an orphan, which no commit names and vacuum removes); never raises, so the error that
        made the task give up is the one it reports."""
        try:
            self.writer.close()
        except OSError:
            pass
        try:
            self.fs.delete_file(f"{self.root}/{self.rel_path}")
        except OSError:  # FileNotFoundError among them
            pass


class ColumnStats:
    """Running min/max/null count of one primitive column, in Delta's JSON stats form.

    A bound that cannot be stated exactly (NaN, infinity, a string longer than the stats prefix
    for a max) is dropped for the file: readers then keep the file, which is always correct.
    """

    def __init__(self, type_: pa.DataType) -> None:
        self.type = type_
        self.null_count = 0
        t = type_
        ranged = (
            pa.types.is_integer(t)
            or pa.types.is_floating(t)
            or pa.types.is_string(t)
            or pa.types.is_large_string(t)
            or pa.types.is_date(t)
            or pa.types.is_timestamp(t)
        )
        # bounds[0] is min, bounds[1] max; False marks a bound dropped for this file.
        self.bounds: list[object] = [None, None] if ranged else [False, False]

    @property
    def min(self) -> object:
        return self.bounds[0] if self.bounds[0] is not False else None

    @property
    def max(self) -> object:
        return self.bounds[1] if self.bounds[1] is not False else None

    @staticmethod
    def eligible(type_: pa.DataType) -> bool:
        # Nested columns have no stats here (Delta nests them per leaf field); booleans, binaries
        # and decimals get a null count only, as in delta-spark.
        return not pa.types.is_nested(type_)

    def update(self, arr: pa.Array) -> None:
        self.null_count += arr.null_count
        if self.bounds == [False, False] or arr.null_count == len(arr):
            return
        if pa.types.is_floating(self.type) and pc.any(pc.is_nan(arr)).as_py():
            self.bounds = [False, False]
            return
        mm = pc.min_max(arr)
        for i, scalar in enumerate((mm["min"], mm["max"])):
            if self.bounds[i] is False:
                continue
            value = self._encode(scalar, is_min=i == 0)
            if value is None:
                self.bounds[i] = False
            elif self.bounds[i] is None:
                self.bounds[i] = value
            else:
                pick = min if i == 0 else max
                self.bounds[i] = pick(self.bounds[i], value, key=_stats_order)

    def _encode(self, scalar: pa.Scalar, is_min: bool) -> object:
        t = self.type
        if pa.types.is_timestamp(t):
            # Delta stats are milliseconds: round outward so the range still covers the micros.
            per_unit = {"s": 1_000_000, "ms": 1000, "us": 1}
            micros = scalar.value * per_unit[t.unit] if t.unit in per_unit else scalar.value // 1000
            ms = micros // 1000 if is_min else -(-micros // 1000)
            return (_EPOCH + timedelta(milliseconds=ms)).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"
        value = scalar.as_py()
        if pa.types.is_date(t):
            return value.isoformat()
        if pa.types.is_floating(t):
            return value if math.isfinite(value) else None
        if isinstance(value, str) and len(value) > _STATS_STRING_PREFIX:
            # A prefix is still a lower bound; a cut max would be below the real one.
            return value[:_STATS_STRING_PREFIX] if is_min else None
        return value


def _stats_order(value: object) -> Any:
    # Strings compare in UTF-8 byte order, as Spark and Arrow compare them.
    return value.encode("utf-8") if isinstance(value, str) else value
