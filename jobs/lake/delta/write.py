"""Writes of the lake's Delta tables: Spark tasks write Parquet, the driver commits once.

:func:`write_files` writes the files in tasks and :func:`jobs.lake.delta.commit.commit_files`
commits them as ONE Delta transaction with ``deltalake`` on the driver (docs/audit.md, "Lake
writes"). This module and :mod:`jobs.lake.delta.files` are shipped to executors by value
(cloudpickle, see :func:`jobs.lake.delta.ship_by_value`), so a cluster's executors need only pyspark
and pyarrow: they import nothing else from ``jobs`` but :mod:`jobs.spark.pyworker` and
:mod:`jobs.storage.stores` (how to reach an ``s3a://`` table), shipped the same way, and never
``deltalake``.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from functools import partial
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StringType, StructField, StructType

from jobs.lake.delta.files import (
    TASK_BUFFER_BYTES,
    DataFile,
    check_not_null,
    encode_partition_value,
    partition_folder,
    split_by_partition,
)
from jobs.spark.pyworker import keep_archive_listings
from jobs.storage.stores import ObjectStore, filesystem_of

# How long a failed write waits for its job's other tasks to end before deleting its files.
RUNNING_TASKS_TIMEOUT_S = 120.0

log = logging.getLogger(__name__)


def conform_batch(batch: pa.RecordBatch, schema: pa.Schema) -> pa.RecordBatch:
    """Cast a batch to the file schema, filling NOT NULL struct children under null parents.

    Spark hands a null struct (e.g. ``data_version`` of an event that has none) with null
    children; Arrow refuses to cast those children to their NOT NULL type although no reader
    ever sees them (the parent's validity hides them). Values the parent hides are set to the
    type's zero; NOT NULL of visible values was checked before (``check_not_null``).
    """
    return pa.RecordBatch.from_arrays(
        [_conform_array(batch.column(i), field) for i, field in enumerate(schema)], schema=schema
    )


def _conform_array(arr: pa.Array, field: pa.Field) -> pa.Array:
    target = field.type
    if pa.types.is_struct(target) and pa.types.is_struct(arr.type):
        children = [_conform_array(arr.field(child.name), child) for child in target]
        mask = arr.is_null() if arr.null_count else None
        return pa.StructArray.from_arrays(children, fields=list(target), mask=mask)
    if arr.null_count and not field.nullable:
        arr = arr.fill_null(_zero(arr.type))
    return arr.cast(target)


def _zero(arrow_type: pa.DataType) -> pa.Scalar:
    if pa.types.is_string(arrow_type) or pa.types.is_large_string(arrow_type):
        return pa.scalar("", arrow_type)
    if pa.types.is_binary(arrow_type) or pa.types.is_large_binary(arrow_type):
        return pa.scalar(b"", arrow_type)
    if pa.types.is_boolean(arrow_type):
        return pa.scalar(False)
    return pa.scalar(0).cast(arrow_type)


@dataclass(frozen=True)
class WritePlan:
    """Everything a write needs (its tasks get a pickled copy).

    Attributes:
        path: the table root: an absolute local path or ``s3a://bucket/key``.
        mode: ``append`` or ``overwrite``.
        partition_by: partition columns, in folder order.
        replace_where: partition column -> encoded partition value (``None`` for null) whose
            partitions an overwrite replaces; empty for a whole-table overwrite.
        schema_json: the declared table schema, Spark/Delta JSON (the two formats are the same).
        extra_files: data files already written into the table folder by someone else (dicts as
            :meth:`jobs.lake.delta.files.DataFile.close` returns them), committed in the same
            transaction as the write's own files and deleted if the write fails.
        expand: None, or a function each task applies to every Arrow batch of the DataFrame's
            rows, giving the batches of table rows it stands for (``arrow`` of
            :class:`jobs.lake.tables.RowExpansion`). It is pickled with the plan, so it must be
            shipped by value like this module.
        store: how tasks reach an ``s3a://`` table (its credentials travel with the plan, as
            Hadoop's do with a Spark job); None for a local one.
    """

    path: str
    mode: str
    partition_by: tuple[str, ...]
    replace_where: dict[str, str | None]
    schema_json: str
    extra_files: tuple[dict[str, Any], ...] = ()
    expand: Callable[[pa.RecordBatch], Iterator[pa.RecordBatch]] | None = None
    store: ObjectStore | None = None


# The rows a write task returns to the driver: one per data file it wrote (DataFile.close() dicts).
WRITTEN_FILES_SCHEMA = StructType([StructField("file", StringType(), False)])
_ARROW_WRITTEN_FILES = pa.schema([pa.field("file", pa.string(), False)])


def write_files(df: DataFrame, plan: WritePlan) -> list[dict[str, Any]]:
    """Write ``df`` into the table's folders, one Spark task per partition of ``df``; return the
    data files written (``DataFile.close()`` dicts), not yet committed.

    Each task (``mapInArrow``, :func:`write_task`) writes its rows with pyarrow straight into the
    table directory, in hive-style partition folders (``date=2026-11-21/ns=ns-a/part-….parquet``)
    without the partition columns inside the file (Delta's layout), and returns one small row per
    file with what Delta's ``add`` action needs: relative path, size, partition values, row count and
    min/max/null-count statistics. Only those rows reach the driver. If the job fails, every file this
    write made is deleted (the tasks that failed delete their own; the others' are found by the
    write's id in their names) and the exception is raised.
    """
    write_id = uuid.uuid4().hex
    # the tasks need not carry the extra files' descriptions (ingest's: one per segment file)
    task = partial(write_task, plan=replace(plan, extra_files=()), write_id=write_id)
    jobs_before = job_ids(df.sparkSession)
    try:
        rows = df.mapInArrow(task, WRITTEN_FILES_SCHEMA).collect()
    except BaseException:
        delete_failed_write(
            df.sparkSession, jobs_before, plan.path, plan.partition_by, plan.replace_where, write_id, plan.store
        )
        raise
    return [json.loads(r["file"]) for r in rows]


def write_task(batches: Iterator[pa.RecordBatch], plan: WritePlan, write_id: str) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` body: write this task's rows as Parquet files of the table (one per
    partition value met); yield one row per file, describing it for the commit."""
    keep_archive_listings()
    files = write_batches(batches, plan, write_id)
    if files:
        yield pa.RecordBatch.from_pylist([{"file": json.dumps(f)} for f in files], schema=_ARROW_WRITTEN_FILES)


def write_local_files(table: pa.Table, plan: WritePlan) -> list[dict[str, Any]]:
    """Write a few rows made in the driver as the table's data files, in this process (no Spark
    job); returns them as :func:`write_files` does, not yet committed."""
    return write_batches(iter(table.to_batches()), plan, uuid.uuid4().hex)


def write_batches(batches: Iterator[pa.RecordBatch], plan: WritePlan, write_id: str) -> list[dict[str, Any]]:
    """Write Arrow batches as Parquet files of the table (one per partition value met), named
    with ``write_id``; returns the files' descriptions for the commit. Files it made are deleted
    when it fails."""
    declared = StructType.fromJson(json.loads(plan.schema_json))
    data_fields = [f for f in declared.fields if f.name not in plan.partition_by]
    file_schema = to_arrow_schema(StructType(data_fields))
    fs, root = filesystem_of(plan.path, plan.store)
    open_files: dict[tuple[Any, ...], DataFile] = {}
    if plan.expand is not None:
        batches = (rows for batch in batches for rows in plan.expand(batch))
    try:
        for batch in batches:
            check_not_null(batch, declared)
            for key, part in split_by_partition(batch, plan.partition_by):
                if key not in open_files:
                    _check_replace_where(key, plan)
                    open_files[key] = DataFile.create(fs, root, plan.partition_by, key, file_schema, prefix=write_id)
                open_files[key].write(conform_batch(part.select(file_schema.names), file_schema))
            if sum(f.pending_bytes for f in open_files.values()) > TASK_BUFFER_BYTES:
                for f in open_files.values():
                    f.flush()
        return [f.close() for f in open_files.values()]
    except BaseException:
        for f in open_files.values():
            f.discard()
        raise


def job_ids(spark: SparkSession) -> set[int]:
    """The ids of the jobs Spark still knows in this thread's job group (or of those in none)."""
    sc = spark.sparkContext
    return set(sc.statusTracker().getJobIdsForGroup(sc.getLocalProperty("spark.jobGroup.id")))


def wait_for_tasks(spark: SparkSession, jobs: set[int], timeout_s: float = RUNNING_TASKS_TIMEOUT_S) -> bool:
    """Wait until no task of ``jobs`` runs; False if ``timeout_s`` passed first.

    When a job fails, Spark only asks its other tasks to stop: a task whose rows had all arrived
    goes on, and a write task then writes its files after the job has failed.
    """
    tracker = spark.sparkContext.statusTracker()
    deadline = time.monotonic() + timeout_s
    while True:
        stages = [s for j in jobs if (job := tracker.getJobInfo(j)) for s in job.stageIds]
        if not any((stage := tracker.getStageInfo(s)) and stage.numActiveTasks for s in stages):
            return True
        if time.monotonic() > deadline:
            log.warning(
                "jobs %s still have tasks running %.0f s after failing; files they write may be left",
                sorted(jobs),
                timeout_s,
            )
            return False
        time.sleep(0.05)


def delete_failed_write(
    spark: SparkSession,
    jobs_before: set[int],
    root: str,
    partition_by: Sequence[str],
    where: Mapping[str, object] | None,
    write_id: str,
    store: ObjectStore | None = None,
) -> None:
    """Clean up after a write that failed before its commit: once no task of the jobs started
    since ``jobs_before`` (:func:`job_ids`) runs, delete every data file named with ``write_id``.

    A failed job's other tasks may still be writing, and the driver's list of the files written
    (none, when the job itself failed) cannot say which exist; their names can. A task attempt that
    Spark retries or speculates, or one still running after ``RUNNING_TASKS_TIMEOUT_S`` (two minutes),
    may leave a file that no commit references. Such orphans are invisible to readers (Delta reads
    only files in the log), as with delta-spark, and ``DeltaTable.vacuum`` removes them.
    """
    wait_for_tasks(spark, job_ids(spark) - jobs_before)
    try:
        delete_files_by_id(root, partition_by, where, write_id, store)
    except OSError as exc:
        # the store that failed the write may fail the clean-up too; the files are orphans then,
        # invisible to readers like any other, and vacuum removes them
        log.warning("could not delete the files of a failed write to %s: %s", root, type(exc).__name__)


def delete_files_by_id(
    root: str,
    partition_by: Sequence[str],
    where: Mapping[str, object] | None,
    write_id: str,
    store: ObjectStore | None = None,
) -> None:
    """Delete every data file under ``root`` whose name carries ``write_id`` (a failed write's).

    Args:
        root: the table folder.
        partition_by: the table's partition columns.
        where: partition column -> value (plain or encoded) that every such file has, or None:
            only the folders of the leading partition columns it fixes are searched.
        write_id: the prefix :meth:`jobs.lake.delta.files.DataFile.create` was given.
        store: how to reach an ``s3a://`` root.
    """
    fs, root = filesystem_of(root, store)
    leading = []
    for column in partition_by:  # the folders the files must be under: the leading columns fixed
        if not where or column not in where:
            break
        leading.append(encode_partition_value(where[column]))
    base = f"{root}/{partition_folder(tuple(partition_by[: len(leading)]), tuple(leading))}" if leading else root
    try:
        infos = fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True))
    except FileNotFoundError:
        return
    for info in infos:
        if info.type == pafs.FileType.File and info.base_name.startswith(f"part-{write_id}-"):
            try:
                fs.delete_file(info.path)
            except FileNotFoundError:
                pass


def _check_replace_where(key: tuple[Any, ...], plan: WritePlan) -> None:
    # delta-rs removes the replaced partitions' files but does not check that the added rows lie
    # inside them; a row outside would be appended to a partition that is not replaced, and
    # duplicated by every rerun.
    values = dict(zip(plan.partition_by, key, strict=True))
    for col, wanted in plan.replace_where.items():
        if values[col] != wanted:
            raise ValueError(
                f"row with {col}={values[col]!r} is outside replace_where {plan.replace_where}; nothing committed"
            )
