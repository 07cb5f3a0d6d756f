"""What a client makes of each QueueData of a route (docs/nameserver-semantics.md §3), and the
aggregates the per-topic and per-group figures share.

A producer takes ``write_queue_nums`` queues of every QueueData with ``perm & 2`` whose group has
a master (id 0); a consumer takes ``read_queue_nums`` queues of every QueueData with ``perm & 4``.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from nameserver.model import MASTER_ID, PERM_READ, PERM_WRITE

# a piece (jobs.snapshots.agg_route_pieces): a route_snapshots row over positions first_pos .. last_pos
PIECE_COLUMNS = (
    "ns",
    "topic",
    "cluster",
    "broker_name",
    "broker_addrs",
    "read_queue_nums",
    "write_queue_nums",
    "perm",
    "topic_sys_flag",
)


def with_queue_flags(snapshots_df: DataFrame) -> DataFrame:
    """Add what a client makes of each ``route_snapshots`` row (§3).

    Adds ``writable`` (``perm & 2``), ``readable`` (``perm & 4``), ``has_master`` (the group's
    ``broker_addrs`` has id 0; false without BrokerData), ``publish_queues``, ``subscribe_queues``
    and ``unread_write_queues`` (longs, see :mod:`schemas.distribution`).

    Example:
        perm 6, read 4, write 8, broker_addrs {1: slave}: writable, readable, no master, so
        publish 0, subscribe 4, unread 4. broker_addrs null (no BrokerData): no master either.
    """
    perm, read, write = F.col("perm"), F.col("read_queue_nums"), F.col("write_queue_nums")
    writable = F.coalesce(perm.bitwiseAND(PERM_WRITE) == PERM_WRITE, F.lit(False))
    readable = F.coalesce(perm.bitwiseAND(PERM_READ) == PERM_READ, F.lit(False))
    has_master = F.coalesce(F.map_contains_key("broker_addrs", F.lit(MASTER_ID).cast("long")), F.lit(False))
    zero = F.lit(0).cast("long")
    return (
        snapshots_df.withColumn("writable", writable)
        .withColumn("readable", readable)
        .withColumn("has_master", has_master)
        # a negative or zero writeQueueNums contributes no queue (§3)
        .withColumn(
            "publish_queues",
            F.when(F.col("writable") & F.col("has_master"), F.greatest(write.cast("long"), zero)).otherwise(zero),
        )
        .withColumn("subscribe_queues", F.when(F.col("readable"), F.greatest(read.cast("long"), zero)).otherwise(zero))
        .withColumn(
            "unread_write_queues",
            F.when(
                F.col("readable") & F.col("writable") & (read < write),
                (write - F.greatest(read, F.lit(0))).cast("long"),
            ).otherwise(zero),
        )
    )


def sum_long(name: str) -> Column:
    """The sum of a column as a long, 0 over no rows."""
    return F.coalesce(F.sum(F.col(name).cast("long")), F.lit(0).cast("long"))


def count_if(condition: Column) -> Column:
    """The rows where ``condition`` holds, as an int."""
    return F.count(F.when(condition, 1)).cast("int")


def segment_positions() -> tuple[Column, Column]:
    """A segment's positions (:func:`jobs.snapshots.with_segments`) under the names
    :func:`jobs.snapshots.explode_pieces` and the write's expansion read."""
    return F.col("seg_first").alias("first_pos"), F.col("seg_last").alias("last_pos")
