"""Test inputs as DataFrames that stay in the JVM.

``spark.createDataFrame`` of Python rows plans them as a Python RDD: every query over such an
input runs Python workers to convert the rows again (about 1.5 s more per query of a
distribution test). :func:`frame` hands them over as an Arrow table instead
(:func:`jobs.spark.frames.local_frame`), as the jobs do with their own driver-side rows.
"""

from __future__ import annotations

from collections.abc import Iterable

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T

from jobs.spark.frames import local_frame


def frame(spark: SparkSession, rows: Iterable, schema: T.StructType | str) -> DataFrame:
    """``rows`` (tuples in the schema's order, or dicts) as a DataFrame of ``schema`` (a
    ``StructType`` or a DDL string such as ``"ns string, n long"``)."""
    if isinstance(schema, str):
        schema = T.StructType.fromDDL(schema)
    return local_frame(spark, list(rows), schema)
