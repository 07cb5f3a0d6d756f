"""Writes through delta-spark's own writer, for sessions that have its jars (``[lake] writer =
"native"``); :func:`jobs.lake.tables.write_table` chooses between it and the delta-rs path."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import date
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from jobs.lake.delta.arrow import is_table, table_root
from jobs.lake.delta.schema import delta_spark_schema


def create_native(spark: SparkSession, root: str, schema: StructType, partition_by: tuple[str, ...]) -> None:
    """Create a missing table from the declared schema, as its own first commit, through delta-spark.

    delta-spark's DataFrame writer would create it from the rows' schema made nullable (its rule:
    NOT NULL comes from a table's definition, never from data), so both writers' tables would
    differ; created from the declared schema, NOT NULL columns hold and are checked on write. The
    one difference left is :func:`delta_spark_schema`'s (NOT NULL inside a nullable struct).
    """
    if is_table(table_root(root)):
        return
    from delta.tables import DeltaTable

    DeltaTable.createIfNotExists(spark).location(root).addColumns(delta_spark_schema(schema)).partitionedBy(
        *partition_by
    ).execute()


def write_native(
    df: DataFrame,
    root: str,
    mode: str,
    partition_by: tuple[str, ...],
    replace_where: Mapping[str, Any] | None,
    extra_files: Sequence[dict[str, Any]] = (),
) -> None:
    """delta-spark's own writer, for sessions that have its jars.

    It relies on delta-spark for the same guarantees (one commit, replaceWhere in the same
    transaction); it cannot commit files written elsewhere (``extra_files``).
    """
    if extra_files:
        raise ValueError("extra_files cannot be committed through delta-spark's writer")
    writer = df.write.format("delta").mode(mode)
    if partition_by:
        writer = writer.partitionBy(*partition_by)
    if replace_where:
        writer = writer.option("replaceWhere", " AND ".join(_sql_equals(c, v) for c, v in replace_where.items()))
    writer.save(root)


def _sql_equals(col: str, value: Any) -> str:
    if value is None:
        return f"`{col}` IS NULL"
    if isinstance(value, bool):
        return f"`{col}` = {str(value).lower()}"
    if isinstance(value, date):
        return f"`{col}` = DATE'{value.isoformat()}'"
    if isinstance(value, str):
        return f"`{col}` = '" + value.replace("\\", "\\\\").replace("'", "\\'") + "'"
    return f"`{col}` = {int(value)}"
