"""The ``nsaudit_delta`` Python data source: tasks write Parquet, the driver commits once to Delta.

Spark calls :meth:`DeltaBatchWriter.write` in every task with that task's rows as Arrow record
batches. The task writes Parquet files with pyarrow straight into the table directory, in
hive-style partition folders (``date=2026-11-21/ns=ns-a/part-….parquet``) without the partition
columns inside the file (Delta's layout), and returns what Delta's ``add`` action needs: relative
path, size, partition values, row count and min/max/null-count statistics. When every task has
succeeded, Spark calls :meth:`DeltaBatchWriter.commit` once, on the driver's host, which commits
all files as ONE Delta transaction with ``deltalake`` (delta-rs); if any task or the commit fails,
:meth:`DeltaBatchWriter.abort` deletes the files and the table stays at its previous version.

This module and :mod:`jobs.delta.files` are shipped to executors by value (cloudpickle, see
``jobs.delta.register_data_source``), so a cluster's executors need only pyspark and pyarrow, not
this project. They must therefore import nothing else from ``jobs``; ``deltalake`` is imported in
``commit`` only, which runs on the driver's host.

A task that fails deletes its own files; a task attempt that Spark retries or speculates may leave
a file that no commit references. Such orphans are invisible to readers (Delta reads only files
in the log), as with delta-spark, and ``DeltaTable.vacuum`` removes them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.fs as pafs
from pyspark.sql.datasource import (
    DataSource,
    DataSourceArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.pandas.types import to_arrow_schema
from pyspark.sql.types import StructType

from jobs.delta.files import (
    TASK_BUFFER_BYTES,
    DataFile,
    check_not_null,
    split_by_partition,
)

FORMAT_NAME = "nsaudit_delta"


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
    """Everything a write needs, passed to the data source as one JSON option.

    Attributes:
        path: absolute local path of the table root.
        mode: ``append`` or ``overwrite``.
        partition_by: partition columns, in folder order.
        replace_where: partition column -> encoded partition value (``None`` for null) whose
            partitions an overwrite replaces; empty for a whole-table overwrite.
        schema_json: the declared table schema, Spark/Delta JSON (the two formats are the same).
        extra_files: data files already written into the table folder by someone else (dicts as
            :meth:`jobs.delta.files.DataFile.close` returns them), committed in the same
            transaction as the write's own files and deleted if the write fails.
    """

    path: str
    mode: str
    partition_by: tuple[str, ...]
    replace_where: dict[str, str | None]
    schema_json: str
    extra_files: tuple[dict, ...] = ()

    def to_option(self) -> str:
        """Serialize for ``DataFrameWriter.option``."""
        return json.dumps(
            {
                "path": self.path,
                "mode": self.mode,
                "partition_by": list(self.partition_by),
                "replace_where": self.replace_where,
                "schema_json": self.schema_json,
                "extra_files": list(self.extra_files),
            }
        )

    @classmethod
    def from_option(cls, text: str) -> WritePlan:
        """Inverse of :meth:`to_option`."""
        raw = json.loads(text)
        return cls(
            raw["path"], raw["mode"], tuple(raw["partition_by"]), raw["replace_where"], raw["schema_json"],
            tuple(raw.get("extra_files", ())),
        )


class DeltaWriteSource(DataSource):
    """Write-only Python data source; use through ``jobs.delta_io.write_table``."""

    @classmethod
    def name(cls) -> str:
        """Format name for ``df.write.format``."""
        return FORMAT_NAME

    def writer(self, schema: StructType, overwrite: bool) -> DeltaBatchWriter:
        """The writer for one write; Spark's own save mode is unused, the plan carries ours."""
        if "plan" not in self.options:
            raise ValueError(f"{FORMAT_NAME} is written through jobs.delta_io.write_table, which passes its plan")
        return DeltaBatchWriter(WritePlan.from_option(self.options["plan"]))


class DeltaBatchWriter(DataSourceArrowWriter):
    """Writes Parquet files in tasks and commits them as one Delta transaction."""

    def __init__(self, plan: WritePlan) -> None:
        self.plan = plan

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriterCommitMessage:
        """Write this task's batches; return the files as a commit message (``.files``)."""
        plan = self.plan
        declared = StructType.fromJson(json.loads(plan.schema_json))
        data_fields = [f for f in declared.fields if f.name not in plan.partition_by]
        file_schema = to_arrow_schema(StructType(data_fields))
        fs = pafs.LocalFileSystem()
        open_files: dict[tuple, DataFile] = {}
        try:
            for batch in iterator:
                check_not_null(batch, declared)
                for key, part in split_by_partition(batch, plan.partition_by):
                    if key not in open_files:
                        _check_replace_where(key, plan)
                        open_files[key] = DataFile.create(fs, plan.path, plan.partition_by, key, file_schema)
                    open_files[key].write(conform_batch(part.select(file_schema.names), file_schema))
                if sum(f.pending_bytes for f in open_files.values()) > TASK_BUFFER_BYTES:
                    for f in open_files.values():
                        f.flush()
            files = [f.close() for f in open_files.values()]
        except BaseException:
            for f in open_files.values():
                f.discard()
            raise
        message = WriterCommitMessage()
        # A plain WriterCommitMessage with builtin attributes unpickles anywhere; a subclass
        # defined here would be rebuilt by value and is not needed.
        message.files = files  # type: ignore[attr-defined]
        return message

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        """Commit every task's files as one Delta transaction (runs on the driver's host)."""
        from deltalake import DeltaTable, Schema
        from deltalake.transaction import (
            AddAction,
            CommitProperties,
            create_table_with_add_actions,
        )

        plan = self.plan
        adds = [
            AddAction(
                path=f["path"],
                size=f["size"],
                partition_values=f["partition_values"],
                modification_time=f["modification_time"],
                data_change=True,
                stats=f["stats"],
            )
            for f in _written_files(messages, plan)
        ]
        schema = Schema.from_json(plan.schema_json)
        props = CommitProperties(custom_metadata={"userMetadata": _commit_note(plan)})
        if not DeltaTable.is_deltatable(plan.path):
            create_table_with_add_actions(
                plan.path, schema, adds, mode="error", partition_by=list(plan.partition_by),
                commit_properties=props,
            )
            return
        table = DeltaTable(plan.path)
        table_schema = StructType.fromJson(json.loads(table.schema().to_json()))
        # write_table checked this before the job ran; checked again here because another writer
        # may have replaced the table meanwhile, and delta-rs commits files of any schema without
        # comparing it with the table's.
        if table_schema != StructType.fromJson(json.loads(plan.schema_json)):
            raise ValueError(f"{plan.path}: table schema changed during the write; nothing committed")
        # replace_where is an overwrite whose partition filters select the files to remove, in the
        # same transaction as the adds; delta-rs matches a null partition with ''.
        filters = [(k, "=", "" if v is None else v) for k, v in plan.replace_where.items()] or None
        mode = "overwrite" if plan.mode == "overwrite" else "append"
        table.create_write_transaction(
            adds, mode, schema, list(plan.partition_by), partition_filters=filters, commit_properties=props
        )

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Delete the files of the tasks that had finished; the table log is untouched."""
        fs = pafs.LocalFileSystem()
        for f in _written_files(messages, self.plan):
            try:
                fs.delete_file(f"{self.plan.path}/{f['path']}")
            except FileNotFoundError:
                pass


def _written_files(messages: list[WriterCommitMessage | None], plan: WritePlan) -> list[dict]:
    """The files of the tasks that returned a message, then the plan's extra files."""
    tasks = [f for m in messages if m is not None for f in getattr(m, "files", None) or []]
    return tasks + list(plan.extra_files)


def _commit_note(plan: WritePlan) -> str:
    return json.dumps({"writer": FORMAT_NAME, "mode": plan.mode, "replace_where": plan.replace_where})


def _check_replace_where(key: tuple, plan: WritePlan) -> None:
    # delta-rs removes the replaced partitions' files but does not check that the added rows lie
    # inside them; a row outside would be appended to a partition that is not replaced, and
    # duplicated by every rerun.
    values = dict(zip(plan.partition_by, key))
    for col, wanted in plan.replace_where.items():
        if values[col] != wanted:
            raise ValueError(
                f"row with {col}={values[col]!r} is outside replace_where {plan.replace_where}; nothing committed"
            )
