"""The conditions of the lake's reads and writes: a write's ``replace_where`` as Delta partition
values, a read's ``where`` as a file-pruning predicate for ``deltalake`` and as a Spark row filter."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import date, datetime
from typing import Any

from pyspark.sql import Column
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType, DateType, StringType, StructType

from jobs.lake.delta.files import encode_partition_value
from jobs.lake.delta.schema import column


def encode_replace_where(
    replace_where: Mapping[str, Any] | None, schema: StructType, partition_by: tuple[str, ...]
) -> dict[str, str | None]:
    """``replace_where`` as Delta partition values ({} for None), each checked against its column.

    Raises:
        ValueError: an empty mapping, a column that is not a partition column, or a value that
            does not fit its column's type.
    """
    if replace_where is None:
        return {}
    if not replace_where:
        raise ValueError("replace_where is empty; use mode='overwrite' without it to replace the table")
    encoded = {}
    for col, value in replace_where.items():
        if col not in partition_by:
            raise ValueError(f"replace_where column {col!r} is not a partition column {list(partition_by)}")
        dtype = schema[col].dataType
        if isinstance(dtype, DateType):
            ok = isinstance(value, date) and not isinstance(value, datetime)
        elif isinstance(dtype, StringType):
            ok = isinstance(value, str)
        elif isinstance(dtype, BooleanType):
            ok = isinstance(value, bool)
        else:  # the integer partition types
            ok = isinstance(value, int) and not isinstance(value, bool)
        ok = ok or value is None
        if not ok:
            raise ValueError(f"replace_where {col}={value!r} does not fit column type {dtype.simpleString()}")
        encoded[col] = encode_partition_value(value)
    return encoded


def partition_filter(col: str, value: Any) -> str:
    """A SQL predicate for ``deltalake``'s file pruning: ``col`` is ``value`` (a value, a list of
    values, or None for IS NULL), the values encoded as Delta encodes partition values."""
    if value is None:
        return f'"{col}" IS NULL'
    values = list(value) if isinstance(value, Iterable) and not isinstance(value, (str, bytes)) else [value]
    literals = ", ".join(_sql_literal(encode_partition_value(v)) for v in values)
    return f'"{col}" IN ({literals})'


def _sql_literal(text: str | None) -> str:
    return "NULL" if text is None else "'" + text.replace("'", "''") + "'"


def row_filter(where: Mapping[str, Any]) -> Column:
    """``where`` (as :func:`jobs.lake.tables.read_table` takes it) as a Spark row condition."""
    condition = F.lit(True)
    for col, value in where.items():
        if value is None:
            condition = condition & column(col).isNull()
        elif isinstance(value, Iterable) and not isinstance(value, (str, bytes)):
            condition = condition & column(col).isin(list(value))
        else:
            condition = condition & (column(col) == F.lit(value))
    return condition
