"""``route_snapshots``: every server's routes at fixed instants of a day, from the rebuilt history.

Instants: ``00:00 + k * snapshot_interval_ms`` within the day, and the end of the day
``23:59:59.999``, which is the state after the day's last event (every event of the day has
``ts`` at or before it). Columnar: each history interval is exploded into the instants it covers,
and the queue rows are joined to the broker rows of the same (ns, broker name, instant). One row per
(instant, ns, topic, broker name), as ``queueDatas`` lists them; ``cluster`` and ``broker_addrs`` are
the group's BrokerData at that instant.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs import lake
from jobs.delta_io import read_table, write_table
from nameserver.timeutil import DAY_MS, day_start_ms
from schemas.routes import BROKER_ADDR_HISTORY_SCHEMA, PARTITION_BY, ROUTE_SNAPSHOTS_SCHEMA, TOPIC_ROUTE_HISTORY_SCHEMA


def snapshot_instants_ms(day: dt.date, snapshot_interval_ms: int) -> list[int]:
    """Every snapshot instant of ``day`` in epoch ms, ascending (the last is ``23:59:59.999``)."""
    start = day_start_ms(day)
    instants = list(range(start, start + DAY_MS, snapshot_interval_ms))
    if instants[-1] != start + DAY_MS - 1:
        instants.append(start + DAY_MS - 1)
    return instants


def with_snapshot_ts(history_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """One row per (history row, snapshot instant in ``[valid_from_ts, valid_to_ts)``): ``snapshot_ts``.

    Example:
        A row valid 00:03-00:12 with a 5-minute interval gives 00:05 and 00:10; a row still open
        at the end of the day also gives ``23:59:59.999``.
    """
    if snapshot_interval_ms <= 0:
        raise ValueError(f"snapshot_interval_ms must be > 0, not {snapshot_interval_ms}")
    start, interval = day_start_ms(day), snapshot_interval_ms
    last = start + DAY_MS - 1
    from_ms = F.unix_millis("valid_from_ts")
    to_ms = F.coalesce(F.unix_millis("valid_to_ts"), F.lit(start + DAY_MS))
    # grid points k with from <= start + k*interval < to (times are within the day, so >= 0)
    k_lo = F.ceil((from_ms - start) / interval).cast("long")
    k_hi = F.least(F.floor((to_ms - 1 - start) / interval), F.lit((DAY_MS - 1) // interval)).cast("long")
    grid = F.when(k_lo <= k_hi, F.sequence(k_lo, k_hi)).otherwise(F.array().cast(T.ArrayType(T.LongType())))
    instants = F.transform(grid, lambda k: k * interval + start)
    instants = F.when(F.col("valid_to_ts").isNull(), F.array_union(instants, F.array(F.lit(last)))).otherwise(instants)
    return history_df.withColumn("snapshot_ts", F.explode(F.transform(instants, F.timestamp_millis)))


def agg_route_snapshots(
    topic_route_df: DataFrame, broker_addr_df: DataFrame, day: dt.date, snapshot_interval_ms: int
) -> DataFrame:
    """``route_snapshots`` rows of one day from that day's ``topic_route_history`` and
    ``broker_addr_history`` rows."""
    brokers_df = (
        with_snapshot_ts(broker_addr_df, day, snapshot_interval_ms)
        .groupBy("ns", "broker_name", "snapshot_ts")
        .agg(
            F.min("cluster").alias("cluster"),  # one BrokerData, one cluster at any instant
            F.map_from_entries(F.array_sort(F.collect_list(F.struct("broker_id", "broker_addr")))).alias("broker_addrs"),
        )
    )
    return (
        with_snapshot_ts(topic_route_df, day, snapshot_interval_ms)
        .join(brokers_df, ["ns", "broker_name", "snapshot_ts"], "left")
        .select(
            "snapshot_ts", "ns", "topic", "cluster", "broker_name", "broker_addrs", "read_queue_nums",
            "write_queue_nums", "perm", "topic_sys_flag", F.lit(day).alias("date"),
        )
    )


def run_snapshots(spark: SparkSession, lake_dir: str, day: dt.date, snapshot_interval_ms: int) -> None:
    """Recompute one day's ``route_snapshots`` from the lake's history tables (replaces the day)."""
    where = {"date": day}
    topic_route_df = read_table(spark, lake.table_path(lake_dir, lake.TOPIC_ROUTE_HISTORY),
                                TOPIC_ROUTE_HISTORY_SCHEMA, where=where)
    broker_addr_df = read_table(spark, lake.table_path(lake_dir, lake.BROKER_ADDR_HISTORY),
                                BROKER_ADDR_HISTORY_SCHEMA, where=where)
    write_table(
        agg_route_snapshots(topic_route_df, broker_addr_df, day, snapshot_interval_ms),
        lake.table_path(lake_dir, lake.ROUTE_SNAPSHOTS),
        mode="overwrite", partition_by=PARTITION_BY, replace_where=where, schema=ROUTE_SNAPSHOTS_SCHEMA,
    )
