"""Frame helpers the stages share: small driver-side frames kept in the JVM, checkpoints of
intermediates several queries read, and freeing them after the last read.

Example:
    >>> release_frame(checkpoint_frame(spark.range(3)))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema


def local_frame(
    spark: SparkSession, rows: Sequence[Sequence[Any] | Mapping[str, Any]], schema: T.StructType
) -> DataFrame:
    """A small DataFrame of driver-side ``rows`` (tuples in ``schema``'s order, or dicts), kept in
    the JVM.

    It is handed over as an Arrow table and planned as a local relation. ``createDataFrame`` of
    Python rows would run a Python function to convert them, in Python workers, each time the
    frame is computed; and the optimizer folds a query over an *empty* local relation away,
    where one over an empty Python-made frame is still planned, compiled and run.

    Example:
        >>> local_frame(spark, [("ns-a", 3)], T.StructType([T.StructField("ns", T.StringType()),
        ...                                                 T.StructField("n", T.LongType())])).first()
        Row(ns='ns-a', n=3)
    """
    return spark.createDataFrame(local_arrow_table(rows, schema), schema)


def local_arrow_table(rows: Sequence[Sequence[Any] | Mapping[str, Any]], schema: T.StructType) -> pa.Table:
    """Driver-side ``rows`` (tuples in ``schema``'s order, or dicts) as an Arrow table of ``schema``."""
    arrow_schema = to_arrow_schema(schema)
    if rows and not isinstance(rows[0], Mapping):
        return pa.Table.from_arrays(
            [
                pa.array(list(column), type=f.type)
                for column, f in zip(zip(*rows, strict=True), arrow_schema, strict=True)
            ],
            schema=arrow_schema,
        )
    return pa.Table.from_pylist(list(rows), schema=arrow_schema)


def checkpoint_frame(df: DataFrame) -> DataFrame:
    """``df`` computed now and cut from its plan: a stage's small intermediate that several later
    queries read.

    The rows stay in the executors' block managers (``localCheckpoint(eager=True)``) and the
    returned frame's plan is a scan of them. A persisted frame would keep the plan behind it:
    every later query that reads it is planned against the cache with that plan inside, and its
    tasks ship it (a plan of tens of scans of the events, and task binaries of MiBs). Free the
    rows with :func:`release_frame` after the last read. On a cluster an executor lost before
    then takes its blocks with it and the reading query fails rather than recomputing them.
    """
    return df.localCheckpoint(eager=True)


def spread(df: DataFrame, *keys: str) -> DataFrame:
    """``df`` hash-partitioned by ``keys`` into ``spark.sql.shuffle.partitions`` partitions: for a
    few rows that later become many (exploded into instants) where they are, so the many are made
    by as many tasks as a shuffle would use. The number is explicit, so adaptive execution does
    not merge the small shuffle into one partition."""
    partitions = cast(str, df.sparkSession.conf.get("spark.sql.shuffle.partitions"))  # a core conf: always set
    return df.repartition(int(partitions), *keys)


def release_frame(df: DataFrame) -> None:
    """Free what ``df`` holds in executor memory: its cache (``persist``), or the blocks of a
    ``localCheckpoint``, which ``unpersist`` leaves to Spark's context cleaner (that is, to some
    later garbage collection of the driver's JVM). Reading ``df`` afterwards recomputes a
    persisted frame but fails for a checkpointed one: release only after the last read."""
    df.unpersist()
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() == "LogicalRDD":  # a checkpoint: the rows live in its RDD's blocks
        # what RDD.unpersist does, without its warning that a local checkpoint cannot be
        # recomputed once freed (known here: the stage has read it for the last time)
        df.sparkSession.sparkContext._jsc.sc().unpersistRDD(plan.rdd().id(), False)


class Releasable(Protocol):
    """What holds persisted or checkpointed frames and frees them (:meth:`CachedFrames.release`)."""

    def release(self) -> None:
        """Free the frames held, after their last read."""


@dataclass(frozen=True)
class CachedFrames:
    """Base of a stage's output frames whose shared intermediates the stage persisted or
    checkpointed.

    ``cached`` is keyword-only, so a subclass lists its own frames first and positionally.
    """

    cached: tuple[DataFrame, ...] = field(default=(), kw_only=True)

    def release(self) -> None:
        """Free the shared intermediates (:func:`release_frame`)."""
        for df in self.cached:
            release_frame(df)
