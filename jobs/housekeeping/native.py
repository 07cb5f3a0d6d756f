"""Housekeeping through delta-spark (``[lake] writer = native``): Delta's own OPTIMIZE, VACUUM and
DELETE in a SparkSession that has its jars (:func:`jobs.spark.session.build_session`).

The same operations as :mod:`jobs.housekeeping.delta_rs`, one commit each (or none).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from urllib.parse import unquote, urlparse

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

# Delta refuses a VACUUM retention below its safety default (7 days) while this check is on; the
# caller has already refused short retentions unless forced.
_RETENTION_CHECK = "spark.databricks.delta.retentionDurationCheck.enabled"
# VACUUM lists the table's folders in a Spark job of this many tasks (Spark's default: 10,000, for
# tables of millions of files); a lake table has a few hundred folders, and on two cores 10,000
# tasks took three minutes per table.
_LISTING_PARALLELISM = "spark.sql.sources.parallelPartitionDiscovery.parallelism"


def optimize(spark: SparkSession, path: str, days: Sequence[dt.date], zorder_by: Sequence[str]) -> None:
    """OPTIMIZE the partitions of ``days``: ZORDER BY ``zorder_by`` when it names columns, else compaction."""
    from delta.tables import DeltaTable

    dates = ", ".join(f"DATE'{d.isoformat()}'" for d in days)
    builder = DeltaTable.forPath(spark, path).optimize().where(f"`date` IN ({dates})")
    if zorder_by:
        builder.executeZOrderBy(*zorder_by)
    else:
        builder.executeCompaction()


def vacuum(spark: SparkSession, path: str, retain_hours: int, dry_run: bool) -> list[str]:
    """VACUUM (or ``DRY RUN``) the table keeping ``retain_hours`` of versions; absolute paths of
    the files it deletes."""
    quoted = path.replace("`", "``")
    confs = {_RETENTION_CHECK: "false", _LISTING_PARALLELISM: str(spark.sparkContext.defaultParallelism)}
    previous = {key: spark.conf.get(key, None) for key in confs}
    for key, value in confs.items():
        spark.conf.set(key, value)
    try:
        # DRY RUN lists the files; the VACUUM after it deletes the same ones (nothing commits between)
        listed = spark.sql(f"VACUUM delta.`{quoted}` RETAIN {int(retain_hours)} HOURS DRY RUN").collect()
        if listed and not dry_run:
            spark.sql(f"VACUUM delta.`{quoted}` RETAIN {int(retain_hours)} HOURS")
    finally:
        for key, old in previous.items():
            spark.conf.unset(key) if old is None else spark.conf.set(key, old)
    return [_local(row[0]) for row in listed]


def _local(uri: str) -> str:
    """``file:/lake/t/date=…/part.parquet`` (or a plain path) as a local path."""
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def delete_before(spark: SparkSession, path: str, day: dt.date) -> None:
    """DELETE the rows of partitions dated before ``day``: one commit that removes their files."""
    from delta.tables import DeltaTable

    DeltaTable.forPath(spark, path).delete(F.col("date") < F.lit(day))
