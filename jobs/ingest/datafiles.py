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
from typing import Any

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
from jobs.lake.tables import DataFile, conform_batch
from jobs.spark.frames import local_frame
from jobs.spark.pyworker import keep_archive_listings
from jobs.storage.locations import for_spark
from jobs.storage.stores import filesystem_of
from schemas.events import EVENTS_TABLE_SCHEMA


def event_batch(parsed: pa.Table, lines: pa.Array, file: str | pa.Array, plan: FastPlan) -> pa.RecordBatch:
    """The ``events`` data columns (``plan.file_schema``) of accepted parsed lines, all of segment
    ``file`` or each of the one in the array."""
    n = parsed.num_rows
    arrays = []
    for field in plan.file_schema:
        name = field.name
        if name in plan.millis_to_ts:
            millis = parsed.column(plan.millis_to_ts[name]).combine_chunks()
            arrays.append(
                pc.multiply(millis.cast(pa.int64()), 1000).cast(pa.timestamp("us", tz="UTC")).cast(field.type)
            )
        elif name == "ts_ms":
            arrays.append(parsed.column("ts").combine_chunks())
        elif name == "file" and isinstance(file, pa.Array):
            arrays.append(file)
        elif name == "file":
            arrays.append(pa.array([file] * n, pa.string()) if n else pa.array([], pa.string()))
        elif name == "line":
            arrays.append(lines)
        else:
            arrays.append(parsed.column(name).combine_chunks())
    raw = pa.RecordBatch.from_arrays(arrays, names=plan.file_schema.names)
    return conform_batch(raw, plan.file_schema)


REWRITE_SCHEMA = T.StructType(
    [T.StructField("old_path", T.StringType(), False), T.StructField("data_file", T.StringType(), True)]
)
_TO_REWRITE_SCHEMA = T.StructType(
    [T.StructField("data_file", T.StringType(), False), T.StructField("ranges", T.StringType(), False)]
)


def rewrite_without_lines(spark: SparkSession, to_rewrite_df: DataFrame, plan: FastPlan) -> DataFrame:
    """Rewrite data files without some of their lines, in tasks.

    Args:
        to_rewrite_df: ``data_file`` (the ``DataFile.close()`` JSON, with ``source_files``) and
            ``ranges`` (JSON object: source file -> array of ``{"first_line", "last_line"}``) to
            drop.

    Returns:
        ``REWRITE_SCHEMA`` rows: the new data file of each old one (by ``old_path``), null when
        no line is left. The old files are deleted.
    """
    fast_plan.ship_by_value(sys.modules[__name__])
    rows_df = to_rewrite_df.select("data_file", "ranges")
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
            files = table.column("file")
            drop = np.zeros(len(lines), dtype=bool)
            for source_file, ranges in json.loads(row["ranges"]).items():
                of_file = pc.equal(files, source_file).to_numpy(zero_copy_only=False)
                for r in ranges:
                    drop |= of_file & (lines >= r["first_line"]) & (lines <= r["last_line"])
            new_info = None
            if not drop.all():
                key = tuple(info["partition_values"][c] for c in plan.partition_by)
                data_file = DataFile.create(fs, root, plan.partition_by, key, plan.file_schema, prefix=plan.write_id)
                try:
                    for part in table.filter(pa.array(~drop)).to_batches():
                        data_file.write(part)
                    new_info = data_file.close()
                except BaseException:
                    data_file.discard()
                    raise
                new_info["source_files"] = info["source_files"]
            fs.delete_file(old_path)
            yield pa.RecordBatch.from_pylist(
                [{"old_path": info["path"], "data_file": json.dumps(new_info) if new_info else None}],
                schema=to_arrow_schema(REWRITE_SCHEMA),
            )


def read_fast_keys(spark: SparkSession, plan: FastPlan, staged: list[dict[str, Any]]) -> DataFrame:
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


def rewrite_staged(
    spark: SparkSession, plan: FastPlan, staged: list[dict[str, Any]], dropped_df: DataFrame
) -> list[dict[str, Any]]:
    """The written data files, those holding lines to drop rewritten without them.

    A data file holds the lines of one or more segment files (``source_files``); the dropped
    ranges are few (a copied segment, a conflict), so they are gathered on the driver.
    """
    if not staged:
        return staged
    ranges_df = dropped_df.groupBy("file").agg(
        F.to_json(F.collect_list(F.struct("first_line", "last_line"))).alias("ranges")
    )
    drops = {r["file"]: json.loads(r["ranges"]) for r in ranges_df.collect()}
    to_rewrite = [
        (json.dumps(info), json.dumps({f: drops[f] for f in info["source_files"] if f in drops}))
        for info in staged
        if any(f in drops for f in info["source_files"])
    ]
    if not to_rewrite:
        return staged
    to_rewrite_df = local_frame(spark, to_rewrite, _TO_REWRITE_SCHEMA)
    rewritten = {r["old_path"]: r["data_file"] for r in rewrite_without_lines(spark, to_rewrite_df, plan).collect()}
    kept = [info for info in staged if info["path"] not in rewritten]
    return kept + [json.loads(text) for text in rewritten.values() if text is not None]
