"""One day of a lake table: read it (an empty frame while the table does not exist yet) and replace it.

Every stage reads its inputs and writes its outputs through these two, so a first audited day
(no table yet) and a rerun (the day's partitions replaced in one commit) behave the same everywhere.
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.types import StructType

from jobs import lake
from jobs.lake.tables import count_table_rows, read_table, read_table_arrow, table_exists, write_table
from jobs.spark.frames import local_frame


def read_or_empty(
    spark: SparkSession, lake_dir: str, name: str, schema: StructType, where: Mapping[str, Any] | None = None
) -> DataFrame:
    """Table ``name`` of the lake, filtered by ``where`` (see :func:`jobs.lake.tables.read_table`).

    Returns:
        The rows with ``schema``; an empty frame with ``schema`` when the table is not in the lake
        yet (nothing has written it: a first day, or a stage that has not run).
    """
    path = lake.table_path(lake_dir, name)
    if not table_exists(path):
        return local_frame(spark, [], schema)
    return read_table(spark, path, schema, where=where)


def replace_day(
    df: DataFrame,
    lake_dir: str | os.PathLike[str],
    name: str,
    day: dt.date,
    schema: StructType,
    *,
    partition_by: Sequence[str] = ("date",),
    where: Mapping[str, Any] | None = None,
    **write_options: Any,
) -> int:
    """Replace ``day``'s partitions of table ``name`` with ``df``, in one commit.

    Args:
        df: the day's rows, all with ``date = day`` (and inside ``where``).
        lake_dir: the lake.
        name: table name (:mod:`schemas.tables`).
        day: the audited day.
        schema: the table's declared schema.
        partition_by: the table's partition columns, ``date`` first.
        where: more partition columns to narrow the replacement to (``{"category": ...}``); the
            day alone by default.
        **write_options: passed to :func:`jobs.lake.tables.write_table` (``few_rows``,
            ``expansion``, ...).

    Returns:
        The table version written.
    """
    return write_table(
        df,
        lake.table_path(lake_dir, name),
        mode="overwrite",
        partition_by=list(partition_by),
        replace_where={"date": day, **(where or {})},
        schema=schema,
        **write_options,
    )


def read_day_arrow(lake_dir: str | os.PathLike[str], name: str, day: dt.date, columns: Sequence[str]) -> pa.Table:
    """A few columns of one day of a small table, read in the driver without Spark (a stage's
    counts, read back from what it wrote); no rows when the table does not exist.

    Only for tables a day of which is small (findings, windows, episodes, a row per server or per
    snapshot instant): never ``events``.
    """
    path = lake.table_path(lake_dir, name)
    if not table_exists(path):
        return pa.table({c: pa.array([], pa.null()) for c in columns})
    return read_table_arrow(path, columns=list(columns), filters=[("date", "=", day)])


def day_rows(lake_dir: str | os.PathLike[str], name: str, day: dt.date) -> int:
    """Rows of one day of a table, from its files' footers (no data is read); 0 without the table."""
    path = lake.table_path(lake_dir, name)
    if not table_exists(path):
        return 0
    return count_table_rows(path, filters=[("date", "=", day)])
