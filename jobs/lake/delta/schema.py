"""Schema enforcement for lake tables: a DataFrame or a table either matches its declared schema or
the write or read fails with a :class:`SchemaMismatchError` that lists every difference.

Example:
    >>> conform_to_schema(spark.createDataFrame([(1,)], "n int"), StructType([StructField("n", LongType())]))
    DataFrame[n: bigint]
"""

from __future__ import annotations

from typing import Any, cast

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    ByteType,
    DataType,
    DateType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    MapType,
    NullType,
    ShortType,
    StringType,
    StructField,
    StructType,
)

# Partition values live in folder names and in the log as strings; these types have one exact
# string form there (timestamps and floats do not, so they cannot be partition columns).
PARTITION_TYPES = (StringType, DateType, ByteType, ShortType, IntegerType, LongType, BooleanType)

# Lossless casts a write applies by itself; anything else must be cast by the job, on purpose.
_WIDENING: dict[type, tuple[type, ...]] = {
    LongType: (ByteType, ShortType, IntegerType),
    IntegerType: (ByteType, ShortType),
    ShortType: (ByteType,),
    DoubleType: (FloatType, ByteType, ShortType, IntegerType),
}


class SchemaMismatchError(ValueError):
    """A DataFrame or table that does not have the declared schema; the message lists why."""


def strip_nullability(dtype: DataType) -> DataType:
    """The same type with every level nullable, to compare types regardless of nullability."""
    if isinstance(dtype, StructType):
        return StructType([StructField(f.name, strip_nullability(f.dataType), True) for f in dtype.fields])
    if isinstance(dtype, ArrayType):
        return ArrayType(strip_nullability(dtype.elementType), True)
    if isinstance(dtype, MapType):
        return MapType(strip_nullability(dtype.keyType), strip_nullability(dtype.valueType), True)
    return dtype


def column(name: str) -> Column:
    """A top-level column by its exact name (a dot in a name is not a struct field access)."""
    return F.col("`" + name.replace("`", "``") + "`")


def _column_for(name: str, got: DataType, want: DataType) -> Column | None:
    """The expression turning a column of type ``got`` into ``want``, or None when not allowed."""
    if strip_nullability(got) == strip_nullability(want):
        return column(name)
    if isinstance(got, NullType) or type(got) in _WIDENING.get(type(want), ()):
        return column(name).cast(want)
    return None


def conform_to_schema(df: DataFrame, schema: StructType, *, what: str = "DataFrame") -> DataFrame:
    """Select the declared columns in declared order, widening types where that is lossless.

    Column names must match exactly (no missing, no extra). Types must be equal apart from
    nullability, or a lossless widening (int -> bigint, float -> double, an all-null literal ->
    any type). Nullability is not judged here from Spark's flags, which are often conservative
    (any join or UDF makes a column nullable); the writer checks actual values instead.

    Args:
        df: the data to write.
        schema: the declared schema.
        what: how to name the data in the error, e.g. the table path.

    Returns:
        ``df`` projected and cast to ``schema``'s names and types.

    Raises:
        SchemaMismatchError: listing missing and unexpected columns and every type mismatch.
    """
    got = {f.name: f.dataType for f in df.schema.fields}
    problems = []
    missing = [f.name for f in schema.fields if f.name not in got]
    extra = [n for n in got if n not in schema.names]
    if missing:
        problems.append(f"missing columns {missing}")
    if extra:
        problems.append(f"unexpected columns {extra}")
    columns = []
    for field in schema.fields:
        if field.name not in got:
            continue
        column = _column_for(field.name, got[field.name], field.dataType)
        if column is None:
            problems.append(
                f"column {field.name} is {got[field.name].simpleString()}, declared {field.dataType.simpleString()}"
            )
        else:
            columns.append(column.alias(field.name))
    if problems:
        raise SchemaMismatchError(f"{what} does not match the declared schema: " + "; ".join(problems))
    return df.select(*columns)


def check_partition_columns(schema: StructType, partition_by: tuple[str, ...], what: str) -> None:
    """Raise SchemaMismatchError unless every partition column is declared with a usable type."""
    problems = []
    for name in partition_by:
        if name not in schema.names:
            problems.append(f"partition column {name} is not in the schema")
        elif not isinstance(schema[name].dataType, PARTITION_TYPES):
            kind = schema[name].dataType.simpleString()
            problems.append(f"partition column {name} is {kind}, which cannot be a partition column")
    if len(set(partition_by)) != len(partition_by):
        problems.append(f"partition columns repeat: {list(partition_by)}")
    if problems:
        raise SchemaMismatchError(f"{what}: " + "; ".join(problems))


def check_table_schema(
    table_schema: StructType,
    table_partitions: tuple[str, ...],
    declared: StructType,
    partition_by: tuple[str, ...] | None,
    what: str,
) -> None:
    """Raise SchemaMismatchError unless a table has exactly the declared fields and partitioning.

    Field order may differ (the table's order wins); names, types and nullability at every level
    may not: a table never changes its schema behind the declared one's back. The one exception is
    a table delta-spark created: its schema may be :func:`delta_spark_schema` of the declared one.

    Args:
        table_schema: the schema in the table's log.
        table_partitions: the table's partition columns.
        declared: the schema the caller declares.
        partition_by: the partitioning the caller asks for; None to accept the table's.
        what: the table path, for the message.
    """
    if (
        declared != delta_spark_schema(declared)
        and _plain_struct(table_schema) == _plain_struct(delta_spark_schema(declared))
        and (partition_by is None or tuple(partition_by) == tuple(table_partitions))
    ):
        return  # the declared schema as delta-spark had to create it (delta_spark_schema)
    have = {f.name: f for f in table_schema.fields}
    want = {f.name: f for f in declared.fields}
    problems = []
    if set(have) - set(want):
        problems.append(f"table has columns not declared: {sorted(set(have) - set(want))}")
    if set(want) - set(have):
        problems.append(f"declared columns not in the table: {sorted(set(want) - set(have))}")
    for name in sorted(want.keys() & have.keys()):
        a, b = have[name], want[name]
        if _plain(a) != _plain(b):
            if _describe(a) != _describe(b):
                problems.append(f"column {name} is {_describe(a)} in the table, declared {_describe(b)}")
            else:
                problems.append(
                    f"column {name} differs in nested nullability: "
                    f"table {a.dataType.json()}, declared {b.dataType.json()}"
                )
    if partition_by is not None and tuple(partition_by) != tuple(table_partitions):
        problems.append(f"table is partitioned by {list(table_partitions)}, write asks for {list(partition_by)}")
    if problems:
        raise SchemaMismatchError(f"{what}: table schema differs from the declared one: " + "; ".join(problems))


def delta_spark_schema(declared: StructType) -> StructType:
    """The declared schema as delta-spark can enforce it: NOT NULL struct fields inside a nullable
    struct, an array or a map made nullable.

    delta-spark checks a field of a struct even where the struct is null, and so refuses a null
    struct whose fields are declared NOT NULL (delta-io/delta#860, open): ``events.data_version``
    is null for most events, its ``timestamp`` NOT NULL when it is there. Inside arrays and maps it
    cannot check NOT NULL at all and drops it (``events.topics``' fields). The native writer
    creates tables with this schema; every other field keeps its declared nullability.

    Example:
        ``data_version STRUCT<timestamp: BIGINT NOT NULL, counter: BIGINT NOT NULL>`` (nullable)
        becomes ``data_version STRUCT<timestamp: BIGINT, counter: BIGINT>``.
    """
    return StructType([_relaxed_field(f, False) for f in declared.fields])


def _relaxed_field(field: StructField, relax: bool, nested: bool = False) -> StructField:
    nullable = field.nullable or relax
    return StructField(field.name, _relaxed_type(field.dataType, nullable, nested), nullable, field.metadata)


def _relaxed_type(dtype: DataType, relax: bool, nested: bool = False) -> DataType:
    # Struct fields inside an array or a map become nullable too: delta-spark drops NOT NULL there
    # (spark.databricks.delta.constraints.allowUnenforcedNotNull.enabled, jobs.spark.session). A
    # column's own array keeps its containsNull (and a map its valueContainsNull) as declared; an
    # array or map nested inside an array's or map's elements loses it too (``nested``).
    if isinstance(dtype, StructType):
        return StructType([_relaxed_field(f, relax, nested) for f in dtype.fields])
    if isinstance(dtype, ArrayType):
        return ArrayType(_relaxed_type(dtype.elementType, True, True), dtype.containsNull or nested)
    if isinstance(dtype, MapType):
        return MapType(
            _relaxed_type(dtype.keyType, True, True),
            _relaxed_type(dtype.valueType, True, True),
            dtype.valueContainsNull or nested,
        )
    return dtype


def _plain_struct(schema: StructType) -> dict[str, Any]:
    return {f.name: _plain(f) for f in schema.fields}


def _plain(field: StructField) -> dict[str, Any]:
    # Compare names, types and nullability; field metadata (comments) does not matter here.
    def drop_metadata(obj: object) -> object:
        if isinstance(obj, dict):
            return {k: drop_metadata(v) for k, v in obj.items() if k != "metadata"}
        if isinstance(obj, list):
            return [drop_metadata(v) for v in obj]
        return obj

    return cast("dict[str, Any]", drop_metadata(field.jsonValue()))  # a field's JSON is an object


def _describe(field: StructField) -> str:
    return field.dataType.simpleString() + ("" if field.nullable else " NOT NULL")
