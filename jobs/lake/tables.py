"""Reads and writes every lake table: Delta tables, readable by delta-spark and by ``deltalake``.

:func:`write_table` has Spark tasks write the Parquet files and the driver commit them as one
Delta transaction with ``deltalake`` (:mod:`jobs.lake.delta.write`, :mod:`jobs.lake.delta.commit`),
or uses delta-spark's own writer where the session's lake writer is native (``[lake] writer``,
:func:`jobs.spark.session.lake_writer`): the schema is checked, never cast; a failed write leaves
the previous version; a day's overwrite is idempotent. :func:`read_table` reads a snapshot with
the declared schema. How writes commit and fail, and what they guarantee: docs/audit.md, "Lake
writes".

This module is the lake's front door: outside :mod:`jobs.lake`, whatever needs a piece of the Delta
internals (:mod:`jobs.lake.delta`: a table's health, its JVM-free Arrow reads, the data files
ingest writes itself) takes it from here (``__all__``), never from those modules.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from jobs.lake.delta import ship_by_value
from jobs.lake.delta.arrow import count_table_rows, is_table, load_table, open_table, read_table_arrow, table_root
from jobs.lake.delta.commit import commit_files, delete_files
from jobs.lake.delta.files import DataFile
from jobs.lake.delta.health import MissingDataFiles, check_readable, damaged, has_log, open_delta, problem_line
from jobs.lake.delta.native import create_native, write_native
from jobs.lake.delta.schema import (
    SchemaMismatchError,
    check_partition_columns,
    check_table_schema,
    column,
    conform_to_schema,
)
from jobs.lake.delta.where import encode_replace_where, partition_filter, row_filter
from jobs.lake.delta.write import WritePlan, conform_batch, delete_failed_write, job_ids, write_files, write_local_files
from jobs.spark.frames import local_arrow_table, local_frame
from jobs.spark.session import lake_writer
from jobs.storage.locations import for_spark, is_remote, normalize
from jobs.storage.settings import current
from jobs.storage.stores import ObjectStore

# The lake's front door: every module outside jobs.lake reaches the Delta internals
# (jobs.lake.delta) through these names only (tests/test_architecture.py checks it).
__all__ = [
    "DataFile",
    "MissingDataFiles",
    "RowExpansion",
    "SchemaMismatchError",
    "check_readable",
    "conform_batch",
    "count_table_rows",
    "damaged",
    "data_file_schema",
    "delete_failed_write",
    "evolve_table_schema",
    "has_log",
    "job_ids",
    "load_table",
    "open_delta",
    "open_table",
    "problem_line",
    "read_table",
    "read_table_arrow",
    "ship_by_value",
    "table_exists",
    "table_root",
    "table_schema",
    "table_version",
    "write_rows",
    "write_table",
]


@dataclass(frozen=True)
class RowExpansion:
    """Table rows a write makes from fewer rows, inside its write tasks.

    When a table's rows repeat a few rows many times over (``route_snapshots``: each route piece
    once per instant it covers), the DataFrame handed to :func:`write_table` holds the few rows,
    and each write task expands its Arrow batches with ``arrow``, so the many rows are never
    converted one by one from the JVM's rows to Arrow (for ``route_snapshots``, 12 M rows with a
    map column: most of the stage's time). ``spark`` is the same expansion as a DataFrame
    transformation: the write checks its schema against the declared one, and delta-spark's
    writer, where it is used, writes its rows. The two must give the same rows.

    Attributes:
        spark: the few rows' DataFrame -> the table rows' DataFrame.
        arrow: one Arrow batch of the few rows -> Arrow batches of the table rows, with every
            declared column. It runs on the executors: it must be pickled by value (its module
            registered with ``cloudpickle.register_pickle_by_value``) and need only numpy and
            pyarrow there.
    """

    spark: Callable[[DataFrame], DataFrame]
    arrow: Callable[[pa.RecordBatch], Iterator[pa.RecordBatch]]


def object_store(root: str) -> ObjectStore | None:
    """How write tasks reach a (normalised) table root: the process's store for an ``s3a://`` one."""
    return current().store if is_remote(root) else None


def table_exists(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` holds a Delta table (a ``_delta_log`` with at least one commit)."""
    return is_table(table_root(path))


def table_version(path: str | os.PathLike[str]) -> int:
    """The latest committed version of a table (0 after the first write).

    Raises:
        FileNotFoundError: there is no Delta table at ``path``.
    """
    return load_table(table_root(path)).version()


def table_schema(path: str | os.PathLike[str]) -> tuple[StructType, tuple[str, ...]]:
    """A table's schema (as Spark types; Delta's schema JSON is Spark's) and partition columns.

    Raises:
        FileNotFoundError: there is no Delta table at ``path``.
    """
    table = load_table(table_root(path))
    return StructType.fromJson(json.loads(table.schema().to_json())), tuple(table.metadata().partition_columns)


def write_table(
    df: DataFrame,
    path: str | os.PathLike[str],
    *,
    mode: str,
    partition_by: Sequence[str] = (),
    replace_where: Mapping[str, Any] | None = None,
    schema: StructType | None = None,
    extra_files: Sequence[dict[str, Any]] = (),
    few_rows: bool = False,
    expansion: RowExpansion | None = None,
) -> int:
    """Write a DataFrame to a Delta table as one transaction, creating the table if needed: the
    schema checked (never cast), a failed write leaving the previous version (the module's docstring).

    Args:
        df: the rows to write; its columns must be the declared ones (any order).
        path: table root: a local or shared-mount directory, a ``file://`` URI, or an
            ``s3a://bucket/key`` (reached with the settings of :mod:`jobs.storage.settings`).
        mode: ``"append"`` adds the rows; ``"overwrite"`` replaces the whole table, or only the
            partitions named by ``replace_where``.
        partition_by: partition columns (string, date, integer or boolean columns). For an
            existing table it must equal the table's partitioning.
        replace_where: partition column -> value (``{"date": date(2026, 11, 21), "ns": "ns-a"}``);
            with ``mode="overwrite"`` only those partitions are replaced, in the same commit as
            the new rows are added. Every written row must lie inside them. An empty ``df`` still
            commits, removing the partitions' old files.
        schema: the declared schema; None: the existing table's, or ``df``'s for a new table.
        extra_files: Parquet files already written into the table's partition folders with
            :func:`data_file_schema`'s columns (``DataFile.close()`` dicts), added in the same
            commit; deleted if the write fails. Not available where delta-spark writes.
        few_rows: the rows are few (a day's findings, a table of intervals): one write task, after
            a shuffle, so whatever computes them keeps its parallelism. Otherwise each partition of
            ``df`` is a write task, each with a Python task's fixed cost (a union of small queries
            has dozens of partitions).
        expansion: ``df`` holds rows that the write tasks expand into the table's rows (see
            :class:`RowExpansion`); ``expansion.spark(df)`` are the rows written.

    Returns:
        The version the write committed (delta-spark's writer: the table's latest version read
        after the write, another writer's if one committed in between).

    Raises:
        SchemaMismatchError: ``df`` or the table does not match the declared schema or partitioning.
        ValueError: bad ``mode`` or ``replace_where``.
        Exception: what Spark raised for a failed task (a null in a NOT NULL column, a row outside
            ``replace_where``, an I/O error) or ``deltalake`` for a failed commit: table unchanged.
    """
    root, partition_by = table_root(path), tuple(partition_by)
    _check_mode(mode, replace_where)
    schema, file_schema = _declared_and_file_schema(root, df, schema, partition_by)
    encoded_where = encode_replace_where(replace_where, schema, partition_by)
    conformed_df, task_df = _frames_to_write(df, schema, root, expansion, few_rows)
    if lake_writer(df.sparkSession) == "native":
        create_native(df.sparkSession, root, schema, partition_by)
        write_native(conformed_df, root, mode, partition_by, replace_where, extra_files)
        return table_version(root)
    arrow_expansion = expansion.arrow if expansion else None
    files = (file_schema.json(), tuple(extra_files), arrow_expansion, object_store(root))
    return _write_with_tasks(task_df, WritePlan(root, mode, partition_by, encoded_where, *files), extra_files)


def write_rows(
    spark: SparkSession,
    rows: Sequence[Sequence[Any] | Mapping[str, Any]],
    path: str | os.PathLike[str],
    schema: StructType,
    *,
    mode: str,
    partition_by: Sequence[str] = (),
    replace_where: Mapping[str, Any] | None = None,
) -> int:
    """Write a few rows made in the driver (tuples in ``schema``'s order, or dicts) as one
    transaction, as :func:`write_table` writes a DataFrame's.

    Through delta-rs the rows are written and committed in this process, without a Spark job;
    through delta-spark's writer (a native session) they go through a local DataFrame.

    Returns:
        The version the write committed, as :func:`write_table` returns it.
    """
    if lake_writer(spark) == "native":
        return write_table(
            local_frame(spark, rows, schema),
            path,
            mode=mode,
            partition_by=partition_by,
            replace_where=replace_where,
            schema=schema,
        )
    root = table_root(path)
    partition_by = tuple(partition_by)
    _check_mode(mode, replace_where)
    evolve_table_schema(root, schema)
    existing = table_schema(root) if table_exists(root) else None
    check_partition_columns(schema, partition_by, root)
    if existing:
        check_table_schema(existing[0], existing[1], schema, partition_by, root)
    file_schema = existing[0] if existing else schema
    plan = WritePlan(
        root,
        mode,
        partition_by,
        encode_replace_where(replace_where, schema, partition_by),
        file_schema.json(),
        store=object_store(root),
    )
    written = write_local_files(local_arrow_table(rows, schema), plan)
    return commit_files(plan, written)


def _frames_to_write(
    df: DataFrame, schema: StructType, root: str, expansion: RowExpansion | None, few_rows: bool
) -> tuple[DataFrame, DataFrame]:
    """The rows written, conformed to ``schema``, and what the write tasks get (the same rows, or
    with an expansion the rows it expands)."""
    # with an expansion, the rows written are checked here through its DataFrame twin, and the
    # tasks conform each expanded batch to the file schema (as they do every batch)
    conformed_df = conform_to_schema(expansion.spark(df) if expansion else df, schema, what=root)
    task_df = df if expansion else conformed_df
    if few_rows:
        conformed_df, task_df = conformed_df.repartition(1), task_df.repartition(1)
    return conformed_df, task_df


def _check_mode(mode: str, replace_where: Mapping[str, Any] | None) -> None:
    if mode not in ("append", "overwrite"):
        raise ValueError(f"mode must be 'append' or 'overwrite', not {mode!r}")
    if replace_where is not None and mode != "overwrite":
        raise ValueError("replace_where needs mode='overwrite'")


def _declared_and_file_schema(
    root: str, df: DataFrame, schema: StructType | None, partition_by: tuple[str, ...]
) -> tuple[StructType, StructType]:
    """The declared schema (``schema``, else the table's, else ``df``'s), checked against the
    existing table, and the schema the files and the commit use."""
    if schema is not None:
        evolve_table_schema(root, schema)
    existing = table_schema(root) if table_exists(root) else None
    if schema is None:
        schema = existing[0] if existing else df.schema
    check_partition_columns(schema, partition_by, root)
    if existing:
        check_table_schema(existing[0], existing[1], schema, partition_by, root)
        # Files and the commit use the table's own field order and metadata.
        return schema, existing[0]
    return schema, schema


def evolve_table_schema(root: str, declared: StructType) -> None:
    """Add to an existing table the declared columns it lacks, when every one is nullable.

    A newer event format adds optional keys (and so ``events`` columns); the rows already in the
    table read them as null. One commit (a metadata change); a missing NOT NULL column, a changed
    type or an undeclared column is left for :func:`check_table_schema` to refuse.
    """
    if not table_exists(root):
        return
    have = {f.name for f in table_schema(root)[0].fields}
    missing = [f for f in declared.fields if f.name not in have]
    if not missing or not all(f.nullable for f in missing):
        return
    from deltalake import Field

    load_table(root).alter.add_columns([Field.from_json(json.dumps(f.jsonValue())) for f in missing])


def _write_with_tasks(task_df: DataFrame, plan: WritePlan, extra_files: Sequence[dict[str, Any]]) -> int:
    """Write ``task_df`` in Spark tasks and commit the files (with ``extra_files``) as one version;
    returns that version."""
    ship_by_value()
    try:
        written = write_files(task_df, plan)
    except BaseException:
        delete_files(plan, list(extra_files))
        raise
    return commit_files(plan, written)


def data_file_schema(path: str | os.PathLike[str], schema: StructType, partition_by: Sequence[str]) -> StructType:
    """The columns a data file of this table holds (no partition columns), in the table's order.

    For writers that make files themselves (``extra_files`` of :func:`write_table`). Checks the
    table, if it exists, against the declared schema and partitioning first.

    Raises:
        SchemaMismatchError: as :func:`write_table`.
    """
    root = table_root(path)
    partition_by = tuple(partition_by)
    check_partition_columns(schema, partition_by, root)
    table_struct = schema
    evolve_table_schema(root, schema)
    if table_exists(root):
        existing = table_schema(root)
        check_table_schema(existing[0], existing[1], schema, partition_by, root)
        table_struct = existing[0]
    return StructType([f for f in table_struct.fields if f.name not in partition_by])


def read_table(
    spark: SparkSession,
    path: str | os.PathLike[str],
    schema: StructType,
    *,
    version: int | None = None,
    timestamp: datetime | str | None = None,
    where: Mapping[str, Any] | None = None,
) -> DataFrame:
    """Read a table snapshot as a DataFrame with the declared schema.

    ``deltalake`` lists the active files of the snapshot (latest, or time-travelled), pruned by
    partition, and Spark reads them as Parquet with the declared schema; nothing is inferred. The
    schema check is the one :func:`write_table` makes.

    Args:
        spark: the session.
        path: table root.
        schema: the declared schema; must match the table's (see :func:`write_table`).
        version: read this version (time travel).
        timestamp: read the last version committed at or before this instant (a naive datetime
            is UTC; an ISO-8601 string with a zone works too).
        where: column -> value, or -> list of values, or -> None for IS NULL. Partition columns
            prune files before Spark sees them; every condition also filters rows exactly.

    Returns:
        The rows, columns in declared order with declared types. Spark's file reader makes every
        column nullable in the DataFrame's schema; NOT NULL is enforced on write. No matching
        file (or an empty table) gives an empty DataFrame with the declared schema.

    Raises:
        FileNotFoundError: there is no Delta table at ``path``.
        SchemaMismatchError: the table's schema differs from ``schema``, or ``where`` names an
            undeclared column.
        ValueError: both ``version`` and ``timestamp`` are given, or nothing had been committed
            by ``timestamp``.
    """
    root = table_root(path)
    where = dict(where or {})
    unknown = [c for c in where if c not in schema.names]
    if unknown:
        raise SchemaMismatchError(f"{root}: where names undeclared columns {unknown}")
    table = load_table(root, version=version, timestamp=timestamp)
    table_struct = StructType.fromJson(json.loads(table.schema().to_json()))
    partitions = tuple(table.metadata().partition_columns)
    check_table_schema(table_struct, partitions, schema, None, root)
    if lake_writer(spark) == "native":
        df = _delta_spark_frame(spark, root, table, pinned=version is not None or timestamp is not None)
    else:
        df = _parquet_frame(spark, root, table, schema, {c: v for c, v in where.items() if c in partitions})
    selected = [column(name) for name in schema.names]
    return df.where(row_filter(where)).select(*selected) if where else df.select(*selected)


def _delta_spark_frame(spark: SparkSession, root: str, table: DeltaTable, pinned: bool) -> DataFrame:
    """The table read by delta-spark; ``pinned``: at the version ``table`` (deltalake) resolved."""
    reader = spark.read.format("delta")
    if pinned:
        # Pin the snapshot deltalake resolved, so both engines mean the same version.
        reader = reader.option("versionAsOf", table.version())
    return reader.load(root)


def _parquet_frame(
    spark: SparkSession, root: str, table: DeltaTable, schema: StructType, partition_where: Mapping[str, Any]
) -> DataFrame:
    """The snapshot's files, pruned by ``partition_where``, read by Spark as Parquet with ``schema``."""
    pruning = [partition_filter(c, v) for c, v in partition_where.items()]
    files = table.file_uris(file_pruning_predicate=" AND ".join(pruning) if pruning else None)
    if not files:
        return local_frame(spark, [], schema)
    # basePath makes Spark take the partition columns from the hive-style folder names, typed
    # by the declared schema (Delta's partition values and our folder names are the same).
    return (
        spark.read.schema(schema).option("basePath", for_spark(root)).parquet(*(for_spark(normalize(f)) for f in files))
    )
