"""``route_snapshots``: every server's routes at fixed instants of a day, from the rebuilt history.

Instants: ``00:00 + k * snapshot_interval_ms`` within the day, and the end of the day
``23:59:59.999``, which is the state after the day's last event (every event of the day has
``ts`` at or before it). One row per (instant, ns, topic, broker name), as ``queueDatas`` lists
them; ``cluster`` and ``broker_addrs`` are the group's BrokerData at that instant.

Columnar, and the instant-sized rows are made last: the group's BrokerData is computed per instant
(a fleet's broker rows, small) and merged into runs of consecutive instants with the same value;
each queue row (one history interval) is joined to the runs of its group that overlap it (both
interval-sized, the runs broadcast) and only then exploded into the instants it covers. The
instant rows go to the writer without a shuffle.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame, SparkSession, Window
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


_FAR = 1 << 62  # a position before or after every instant, with room for +-1


def snapshot_positions(day: dt.date, snapshot_interval_ms: int) -> tuple[Column, Column]:
    """The first and last position (see :func:`snapshot_position`) of the snapshot instants in
    ``[valid_from_ts, valid_to_ts)`` of each row; the first exceeds the last when there is none.

    The instants a row covers are consecutive: grid instants from the first at or after
    ``valid_from_ts`` to the last before ``valid_to_ts``, and for a row still open at the end of
    the day (``valid_to_ts`` null) every grid instant from there on and ``23:59:59.999``.
    """
    if snapshot_interval_ms <= 0:
        raise ValueError(f"snapshot_interval_ms must be > 0, not {snapshot_interval_ms}")
    start, interval = day_start_ms(day), snapshot_interval_ms
    end_pos = len(snapshot_instants_ms(day, interval)) - 1
    from_ms = F.unix_millis("valid_from_ts")
    to_ms = F.coalesce(F.unix_millis("valid_to_ts"), F.lit(start + DAY_MS))
    # grid points k with from <= start + k*interval < to (times are within the day, so >= 0)
    k_lo = F.ceil((from_ms - start) / interval).cast("long")
    k_hi = F.least(F.floor((to_ms - 1 - start) / interval), F.lit((DAY_MS - 1) // interval)).cast("long")
    is_open = F.col("valid_to_ts").isNull()
    first = F.when(is_open, F.least(k_lo, F.lit(end_pos).cast("long"))).otherwise(k_lo)
    last = F.when(is_open, F.lit(end_pos).cast("long")).otherwise(k_hi)
    return first, last


def snapshot_ts_at(pos: Column, day: dt.date, snapshot_interval_ms: int) -> Column:
    """The snapshot instant at position ``pos`` (a long column), as a timestamp."""
    start = day_start_ms(day)
    end_pos = len(snapshot_instants_ms(day, snapshot_interval_ms)) - 1
    ms = F.when(pos == end_pos, F.lit(start + DAY_MS - 1)).otherwise(pos * snapshot_interval_ms + start)
    return F.timestamp_millis(ms)


def snapshot_position(ts: Column, day: dt.date, snapshot_interval_ms: int) -> Column:
    """The position of the snapshot instant ``ts`` among the day's instants (0 = 00:00), as a long.

    Consecutive instants have consecutive positions; the end of the day (``23:59:59.999``) follows
    the last grid instant.
    """
    start = day_start_ms(day)
    end_pos = len(snapshot_instants_ms(day, snapshot_interval_ms)) - 1
    ms = F.unix_millis(ts)
    return (
        F.when(ms == start + DAY_MS - 1, F.lit(end_pos))
        .otherwise(F.floor((ms - F.lit(start)) / F.lit(snapshot_interval_ms)))
        .cast("long")
    )


def _explode_positions(first: Column, last: Column) -> Column:
    # a sequence, not an array built by higher-order functions: those are interpreted per element
    return F.explode(F.when(first <= last, F.sequence(first, last)))


def with_snapshot_ts(history_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """One row per (history row, snapshot instant in ``[valid_from_ts, valid_to_ts)``): ``snapshot_ts``.

    Example:
        A row valid 00:03-00:12 with a 5-minute interval gives 00:05 and 00:10; a row still open
        at the end of the day also gives ``23:59:59.999``.
    """
    first, last = snapshot_positions(day, snapshot_interval_ms)
    return (
        history_df.withColumn("snapshot_ts", _explode_positions(first, last))
        .withColumn("snapshot_ts", snapshot_ts_at(F.col("snapshot_ts"), day, snapshot_interval_ms))
    )


def agg_broker_data_runs(broker_addr_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """Each group's BrokerData over the day's instants, as runs of consecutive instant positions.

    Per (ns, broker_name) the runs cover every position exactly once: ``cluster`` and
    ``broker_addrs`` (``brokerAddrs``, broker id -> address) are constant over
    ``first_pos .. last_pos``, and null over the positions where the name has no BrokerData (the
    first and last runs reach far beyond the day).

    Example:
        ``{0: a}`` at 00:00-00:10, none at 00:15, ``{0: a}`` again from 00:20 to the end: a null
        run before 00:00, ``{0: a}`` 00:00-00:10, null at 00:15, ``{0: a}`` from 00:20, null after.
    """
    first, last = snapshot_positions(day, snapshot_interval_ms)
    value = ["ns", "broker_name", "cluster", "broker_entries"]
    per_instant_df = (
        broker_addr_df.withColumn("_pos", _explode_positions(first, last))
        .groupBy("ns", "broker_name", "_pos")
        .agg(
            F.min("cluster").alias("cluster"),  # one BrokerData, one cluster at any instant
            F.array_sort(F.collect_list(F.struct("broker_id", "broker_addr"))).alias("broker_entries"),
        )
    )
    # gaps-and-islands: within a run of one value, position minus rank is constant
    runs_df = (
        per_instant_df.withColumn("_run", F.col("_pos") - F.row_number().over(Window.partitionBy(*value).orderBy("_pos")))
        .groupBy(*value, "_run")
        .agg(F.min("_pos").alias("first_pos"), F.max("_pos").alias("last_pos"))
    )
    # each run, the positions without BrokerData after it, and those before the group's first run
    w = Window.partitionBy("ns", "broker_name").orderBy("first_pos")
    none_cluster, none_entries = F.when(F.lit(False), F.col("cluster")), F.when(F.lit(False), F.col("broker_entries"))

    def run(cluster: Column, entries: Column, first_pos: Column, last_pos: Column) -> Column:
        return F.struct(cluster.alias("cluster"), entries.alias("broker_entries"),
                        first_pos.alias("first_pos"), last_pos.alias("last_pos"))

    far = F.lit(_FAR).cast("long")
    return (
        runs_df.withColumn("_next_pos", F.lead("first_pos").over(w))
        .withColumn("_first_run", F.lag("last_pos").over(w).isNull())
        .select(
            "ns", "broker_name",
            F.explode(F.array(
                run(F.col("cluster"), F.col("broker_entries"), F.col("first_pos"), F.col("last_pos")),
                run(none_cluster, none_entries, F.col("last_pos") + 1, F.coalesce(F.col("_next_pos") - 1, far)),
                run(none_cluster, none_entries, F.when(F.col("_first_run"), -far), F.col("first_pos") - 1),
            )).alias("run"),
        )
        .where(F.col("run.first_pos") <= F.col("run.last_pos"))
        .select("ns", "broker_name", "run.cluster", F.map_from_entries("run.broker_entries").alias("broker_addrs"),
                "run.first_pos", "run.last_pos")
    )


def agg_route_snapshots(
    topic_route_df: DataFrame, broker_addr_df: DataFrame, day: dt.date, snapshot_interval_ms: int
) -> DataFrame:
    """``route_snapshots`` rows of one day from that day's ``topic_route_history`` and
    ``broker_addr_history`` rows."""
    first, last = snapshot_positions(day, snapshot_interval_ms)
    # The explode below makes a row per covered instant in the partition of its history row, and
    # they go to the writer as they are: spread the (interval-sized) history rows first, so the
    # instant rows are written by as many tasks as a shuffle would use. An explicit number, so
    # adaptive execution does not merge the small shuffle into one task.
    partitions = int(topic_route_df.sparkSession.conf.get("spark.sql.shuffle.partitions"))
    queues_df = (
        topic_route_df.repartition(partitions, "ns", "topic")
        .withColumn("_first_pos", first)
        .withColumn("_last_pos", last)
        .alias("q")
    )
    # one row per change of a group's BrokerData: few enough to broadcast
    runs_df = F.broadcast(agg_broker_data_runs(broker_addr_df, day, snapshot_interval_ms).alias("b"))
    overlaps = (
        (F.col("q.ns") == F.col("b.ns")) & (F.col("q.broker_name") == F.col("b.broker_name"))
        & (F.col("b.first_pos") <= F.col("q._last_pos")) & (F.col("q._first_pos") <= F.col("b.last_pos"))
    )
    # a name that never has BrokerData matches no run: every instant, without cluster or addresses
    matched = F.col("b.first_pos").isNotNull()
    first_pos = F.when(matched, F.greatest("q._first_pos", "b.first_pos")).otherwise(F.col("q._first_pos"))
    last_pos = F.when(matched, F.least("q._last_pos", "b.last_pos")).otherwise(F.col("q._last_pos"))
    return (
        queues_df.join(runs_df, overlaps, "left")
        .select(_explode_positions(first_pos, last_pos).alias("_pos"), "q.*", "b.cluster", "b.broker_addrs")
        .select(
            snapshot_ts_at(F.col("_pos"), day, snapshot_interval_ms).alias("snapshot_ts"), "ns", "topic", "cluster",
            "broker_name", "broker_addrs", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag",
            F.lit(day).alias("date"),
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
