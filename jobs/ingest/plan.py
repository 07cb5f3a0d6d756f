"""The fast path's plan: what its tasks need of the schemas, computed on the driver as plain data.

The modules whose functions run in the scan's and the rewrite's tasks are shipped to executors
by value (:func:`ship_by_value`), so an executor needs only numpy and pyarrow, not this project.
"""

from __future__ import annotations

import sys
import uuid
from dataclasses import dataclass
from types import ModuleType
from typing import Any, cast

import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from jobs.lake import tables
from jobs.storage.settings import current
from jobs.storage.stores import ObjectStore
from schemas import validation
from schemas.events import EVENT_SCHEMA, EVENT_TYPES, FORMAT_VERSION, REQUIRED_KEYS, TYPE_RULES


@dataclass(frozen=True)
class FastPlan:
    """What the tasks need, as plain data (the schema modules stay on the driver).

    Attributes:
        table_path: the ``events`` table root; data files go into its partition folders.
        partition_by: the table's partition columns (``date``, ``ns``).
        parse_schema: the event schema with every field nullable, for ``pyarrow.json``, which
            refuses a value of another JSON kind and, as v1 allows no other key, a key the
            schema lacks (the kinds and keys of ``schemas.validation.EVENT_RULE``).
        file_schema: the table's columns without the partition columns, as written to Parquet.
        version: the only accepted ``v``.
        event_types: the accepted ``type`` values.
        required: keys every event must have, non-null.
        type_rules: type -> (keys it must have non-null, keys it must have, null allowed).
        nested: ``(path, kind)`` of every NOT NULL place below the top level (see
            :func:`_nested_rules`).
        millis_to_ts: table column -> the event key (epoch ms) it is the timestamp of.
        max_line_bytes: the longest line (without its ``"\n"``) the fast path may accept.
        not_null_when_present: keys that may be absent but not null (``pyarrow.json`` reads
            both as null).
        write_events: false sends every line to the JVM (where delta-spark writes the table).
        write_id: the prefix of every data file the scan and the rewrite write (their names
            find them when the run fails before its commit:
            :func:`jobs.lake.delta.write.delete_failed_write`).
        store: how the tasks reach ``s3a://`` segments and an ``s3a://`` table (unused for local paths).
    """

    table_path: str
    partition_by: tuple[str, ...]
    parse_schema: pa.Schema
    file_schema: pa.Schema
    version: int
    event_types: tuple[str, ...]
    required: tuple[str, ...]
    type_rules: dict[str, tuple[tuple[str, ...], tuple[str, ...]]]
    nested: tuple[Any, ...]
    millis_to_ts: dict[str, str]
    max_line_bytes: int = validation.MAX_LINE_BYTES
    not_null_when_present: tuple[str, ...] = ()
    write_events: bool = True
    write_id: str = ""
    store: ObjectStore | None = None


def build_plan(
    table_path: str, partition_by: tuple[str, ...], file_schema: pa.Schema, write_events: bool = True
) -> FastPlan:
    """The plan for writing ``events`` data files under ``table_path`` (driver side), with a
    new ``write_id`` and the process's object-store settings."""
    return FastPlan(
        table_path=table_path,
        partition_by=tuple(partition_by),
        parse_schema=to_arrow_schema(cast(T.StructType, all_nullable(EVENT_SCHEMA))),  # a struct stays one
        file_schema=file_schema,
        version=FORMAT_VERSION,
        event_types=tuple(EVENT_TYPES),
        required=tuple(REQUIRED_KEYS),
        type_rules={t: (tuple(r.required), tuple(r.present)) for t, r in TYPE_RULES.items()},
        nested=cast("tuple[Any, ...]", _nested_rules(EVENT_SCHEMA)),  # a struct's rules: never None
        millis_to_ts={"ts": "ts", "last_update_ts": "last_update_ts"},
        max_line_bytes=validation.MAX_LINE_BYTES,
        not_null_when_present=validation.NOT_NULL_WHEN_PRESENT,
        write_events=write_events,
        write_id=uuid.uuid4().hex,
        store=current().store,
    )


def all_nullable(dtype: T.DataType) -> T.DataType:
    """``dtype`` with every field and element nullable, as ``from_json`` parses into it."""
    if isinstance(dtype, T.StructType):
        return T.StructType([T.StructField(f.name, all_nullable(f.dataType), True) for f in dtype.fields])
    if isinstance(dtype, T.ArrayType):
        return T.ArrayType(all_nullable(dtype.elementType), True)
    return dtype


def _nested_rules(dtype: T.DataType, top: bool = True) -> tuple[Any, ...] | None:
    """A plain-data tree of the NOT NULL places of ``dtype`` below the top level.

    ``("struct", ((name, not_null, subtree), ...))``, ``("array", not_null_elements, subtree)``
    or ``None`` for scalars. Top-level keys are checked per event type, so ``not_null`` is false
    there, as in ``jobs.ingest.checks._nested_null_checks``.
    """
    if isinstance(dtype, T.StructType):
        return (
            "struct",
            tuple((f.name, (not top) and not f.nullable, _nested_rules(f.dataType, False)) for f in dtype.fields),
        )
    if isinstance(dtype, T.ArrayType):
        return ("array", not dtype.containsNull, _nested_rules(dtype.elementType, False))
    return None


def ship_by_value(*modules: ModuleType) -> None:
    """Ship this module, ``modules`` and the data files' writer to executors by value."""
    # Executors may not have this project installed (a standalone cluster); ship the modules.
    tables.ship_by_value()  # the data files' writer, and jobs.spark.pyworker
    for module in (sys.modules[__name__], *modules):
        cloudpickle.register_pickle_by_value(module)
