"""The fast path's ``events`` data files: the rows of accepted lines, and rewriting a written file
without some of its lines (a duplicated or conflicting seq found after the scan).

The files are written in tasks and committed later, with the rest of the day's events, as one
Delta transaction (:func:`jobs.lake.tables.write_table`, ``extra_files``).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from functools import partial

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

from jobs.ingest import plan as fast_plan
from jobs.ingest.plan import FastPlan
from jobs.lake.delta.files import DataFile
from jobs.lake.delta.write import conform_batch
from jobs.spark.frames import local_frame
from jobs.spark.pyworker import keep_archive_listings
from jobs.storage.locations import for_spark
from jobs.storage.stores import filesystem_of
from schemas.events import EVENTS_TABLE_SCHEMA


def event_batch(parsed: pa.Table, lines: pa.Array, file: str, plan: FastPlan) -> pa.RecordBatch:
    """The ``events`` data columns (``plan.file_schema``) of accepted parsed lines."""
    n = parsed.num_rows
    arrays = []
    for field in plan.file_schema:
        name = field.name
        if name in plan.millis_to_ts:
            millis = parsed.column(plan.millis_to_ts[name]).combine_chunks()
            arrays.append(pc.multiply(millis.cast(pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC")).cast(field.type))
        elif name == "ts_ms":
            arrays.append(parsed.column("ts").combine_chunks())
        elif name == "file":
            arrays.append(pa.array([file] * n, pa.string()) if n else pa.array([], pa.string()))
        elif name == "line":
            arrays.append(lines)
        else:
            arrays.append(parsed.column(name).combine_chunks())
    raw = pa.RecordBatch.from_arrays(arrays, names=plan.file_schema.names)
    return conform_batch(raw, plan.file_schema)


REWRITE_SCHEMA = T.StructType(
    [
        T.StructField("source_file", T.StringType(), False),
        T.StructField("data_file", T.StringType(), True),
    ]
)


def rewrite_without_lines(spark: SparkSession, to_rewrite_df: DataFrame, plan: FastPlan) -> DataFrame:
    """Rewrite data files without some of their lines, in tasks.

    Args:
        to_rewrite_df: ``source_file``, ``data_file`` (the ``DataFile.close()`` JSON) and
            ``ranges`` (JSON array of ``{"first_line", "last_line"}`` objects) to drop.

    Returns:
        ``REWRITE_SCHEMA`` rows: the new data file of each source file, null when no line is
        left. The old files are deleted.
    """
    fast_plan.ship_by_value(sys.modules[__name__])
    rows_df = to_rewrite_df.select("source_file", "data_file", "ranges")
    return rows_df.mapInArrow(partial(_rewrite_batches, plan=plan), REWRITE_SCHEMA)


def _rewrite_batches(batches: Iterator[pa.RecordBatch], plan: FastPlan) -> Iterator[pa.RecordBatch]:
    keep_archive_listings()
    fs, root = filesystem_of(plan.table_path, plan.store)
    for batch in batches:
        for row in batch.to_pylist():
            info = json.loads(row["data_file"])
            old_path = f"{root}/{info['path']}"
            table = pq.read_table(old_path, schema=plan.file_schema, filesystem=fs)
            lines = table.column("line").to_numpy()
            drop = np.zeros(len(lines), dtype=bool)
            for r in json.loads(row["ranges"]):
                drop |= (lines >= r["first_line"]) & (lines <= r["last_line"])
            new_info = None
            if not drop.all():
                key = tuple(info["partition_values"][c] for c in plan.partition_by)
                data_file = DataFile.create(fs, root, plan.partition_by, key, plan.file_schema,
                                            prefix=plan.write_id)
                try:
                    for part in table.filter(pa.array(~drop)).to_batches():
                        data_file.write(part)
                    new_info = data_file.close()
                except BaseException:
                    data_file.discard()
                    raise
                new_info["source_file"] = row["source_file"]
            fs.delete_file(old_path)
            yield pa.RecordBatch.from_pylist(
                [{"source_file": row["source_file"], "data_file": json.dumps(new_info) if new_info else None}],
                schema=to_arrow_schema(REWRITE_SCHEMA),
            )


def read_fast_keys(spark: SparkSession, plan: FastPlan, staged: list[dict]) -> DataFrame:
    """The sequencing keys of the fast path's events, read back from its data files."""
    columns = ("ns", "seq", "ts_ms", "file", "line")
    schema = T.StructType([EVENTS_TABLE_SCHEMA[c] for c in columns])
    if not staged:
        df = local_frame(spark, [], schema)
    else:
        root = for_spark(plan.table_path)
        paths = [f"{root}/{info['path']}" for info in staged]
        df = spark.read.schema(EVENTS_TABLE_SCHEMA).option("basePath", root).parquet(*paths).select(*columns)
    return df.withColumn("event_hash", F.lit(None).cast(T.LongType()))


def rewrite_staged(spark: SparkSession, plan: FastPlan, staged: list[dict], dropped_df: DataFrame) -> list[dict]:
    """The written data files, those of files with dropped lines rewritten without them."""
    if not staged:
        return staged
    ranges_df = dropped_df.groupBy("file").agg(
        F.to_json(F.collect_list(F.struct("first_line", "last_line"))).alias("ranges")
    )
    staged_df = local_frame(
        spark, [(info["source_file"], json.dumps(info)) for info in staged],
        T.StructType([T.StructField("source_file", T.StringType()), T.StructField("data_file", T.StringType())]),
    )
    to_rewrite_df = staged_df.join(ranges_df.withColumnRenamed("file", "source_file"), "source_file")
    rewritten = {r["source_file"]: r["data_file"] for r in rewrite_without_lines(spark, to_rewrite_df, plan).collect()}
    kept = [info for info in staged if info["source_file"] not in rewritten]
    return kept + [json.loads(text) for text in rewritten.values() if text is not None]
