"""A day's routes as *pieces*: ``route_snapshots`` rows that hold over a run of consecutive instant
positions, made from the interval-sized history (each group's BrokerData runs, then the queue rows
cut by them), never instant by instant."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from jobs.snapshots.instants import explode_positions, snapshot_positions, snapshot_ts_at
from jobs.spark.frames import spread
from jobs.spark.profile import broadcast

_FAR = 1 << 62  # a position before or after every instant, with room for +-1


def with_segments(pieces_df: DataFrame, keys: list[str]) -> DataFrame:
    """Cut every piece at the ends of the other pieces with the same ``keys``: one row per (piece,
    segment it covers), adding ``seg_first`` and ``seg_last``.

    A segment is a maximal run of positions over which no piece of the key starts or ends, so the
    set of pieces covering a position is the same at every position of a segment: an aggregate
    over a segment's rows is the aggregate over the instant rows at each of its positions. Keys
    may be null (they match null-safely).

    Example:
        pieces 0-9 and 5-20 of one key: segments 0-4 (first piece), 5-9 (both), 10-20 (second).
    """
    bounds_df = pieces_df.select(
        *keys, F.explode(F.array(F.col("first_pos"), F.col("last_pos") + 1)).alias("seg_first")
    ).distinct()
    segments_df = (
        bounds_df.withColumn("seg_last", F.lead("seg_first").over(Window.partitionBy(*keys).orderBy("seg_first")) - 1)
        .where(F.col("seg_last").isNotNull())
        .select(*[F.col(k).alias(f"_s_{k}") for k in keys], "seg_first", "seg_last")
    )
    same_key = [F.col(k).eqNullSafe(F.col(f"_s_{k}")) for k in keys]
    inside = (F.col("seg_first") >= F.col("first_pos")) & (F.col("seg_first") <= F.col("last_pos"))
    condition = same_key[0]
    for more in same_key[1:]:
        condition = condition & more
    return pieces_df.join(segments_df, condition & inside).drop(*[f"_s_{k}" for k in keys])


def _agg_value_runs(segments_df: DataFrame) -> DataFrame:
    """Adjacent segments of a (ns, broker_name) with one BrokerData value make one run."""
    value = ["cluster", "broker_entries"]
    by_pos = Window.partitionBy("ns", "broker_name").orderBy("seg_first")
    same = F.lit(True)
    for c in value:
        same = same & F.lag(c).over(by_pos).eqNullSafe(F.col(c))
    continues = same & (F.lag("seg_last").over(by_pos) + 1 == F.col("seg_first"))
    return (
        segments_df.withColumn("_new", F.when(continues, 0).otherwise(1))
        .withColumn("_run", F.sum("_new").over(by_pos.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
        .groupBy("ns", "broker_name", "_run")
        .agg(
            F.min("seg_first").alias("first_pos"),
            F.max("seg_last").alias("last_pos"),
            F.first("cluster").alias("cluster"),
            F.first("broker_entries").alias("broker_entries"),
        )
    )


def _explode_with_gaps(runs_df: DataFrame) -> DataFrame:
    """Each run as a ``run`` struct, then the positions without BrokerData after it and before the first run."""
    w = Window.partitionBy("ns", "broker_name").orderBy("first_pos")
    none_cluster, none_entries = F.when(F.lit(False), F.col("cluster")), F.when(F.lit(False), F.col("broker_entries"))

    def run(cluster: Column, entries: Column, first_pos: Column, last_pos: Column) -> Column:
        return F.struct(
            cluster.alias("cluster"),
            entries.alias("broker_entries"),
            first_pos.alias("first_pos"),
            last_pos.alias("last_pos"),
        )

    far = F.lit(_FAR).cast("long")
    return (
        runs_df.withColumn("_next_pos", F.lead("first_pos").over(w))
        .withColumn("_first_run", F.lag("last_pos").over(w).isNull())
        .select(
            "ns",
            "broker_name",
            F.explode(
                F.array(
                    run(F.col("cluster"), F.col("broker_entries"), F.col("first_pos"), F.col("last_pos")),
                    run(none_cluster, none_entries, F.col("last_pos") + 1, F.coalesce(F.col("_next_pos") - 1, far)),
                    run(none_cluster, none_entries, F.when(F.col("_first_run"), -far), F.col("first_pos") - 1),
                )
            ).alias("run"),
        )
    )


def agg_broker_data_runs(broker_addr_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """Each group's BrokerData over the day's instants, as runs of consecutive instant positions.

    The BrokerData is computed per segment of the group's history rows (a run of instants over
    which none of them starts or ends, :func:`with_segments`) and adjacent segments with the same
    value are merged into one run.

    Per (ns, broker_name) the runs cover every position exactly once: ``cluster`` and
    ``broker_addrs`` (``brokerAddrs``, broker id -> address) are constant over
    ``first_pos .. last_pos``, and null over the positions where the name has no BrokerData (the
    first and last runs reach far beyond the day).

    Example:
        ``{0: a}`` at 00:00-00:10, none at 00:15, ``{0: a}`` again from 00:20 to the end: a null
        run before 00:00, ``{0: a}`` 00:00-00:10, null at 00:15, ``{0: a}`` from 00:20, null after.
    """
    first, last = snapshot_positions(day, snapshot_interval_ms)
    rows_df = broker_addr_df.select(
        "ns", "broker_name", "cluster", "broker_id", "broker_addr", first.alias("first_pos"), last.alias("last_pos")
    ).where(F.col("first_pos") <= F.col("last_pos"))
    # the BrokerData over each segment of the name's history rows (the same at all its positions)
    segments_df = (
        with_segments(rows_df, ["ns", "broker_name"])
        .groupBy("ns", "broker_name", "seg_first", "seg_last")
        .agg(
            F.min("cluster").alias("cluster"),  # one BrokerData, one cluster at any instant
            F.array_sort(F.collect_list(F.struct("broker_id", "broker_addr"))).alias("broker_entries"),
        )
    )
    return (
        _explode_with_gaps(_agg_value_runs(segments_df))
        .where(F.col("run.first_pos") <= F.col("run.last_pos"))
        .select(
            "ns",
            "broker_name",
            "run.cluster",
            F.map_from_entries("run.broker_entries").alias("broker_addrs"),
            "run.first_pos",
            "run.last_pos",
        )
    )


def agg_route_pieces(
    topic_route_df: DataFrame, broker_data_runs_df: DataFrame, day: dt.date, snapshot_interval_ms: int
) -> DataFrame:
    """The day's routes as pieces: ``route_snapshots`` rows that hold over a run of instants.

    One row per (queue history row, BrokerData run of its group that overlaps it), with the
    ``route_snapshots`` columns but ``snapshot_ts`` and ``date``, plus ``first_pos`` and
    ``last_pos``: the row is the snapshot row of every instant position from ``first_pos`` to
    ``last_pos`` (see :func:`snapshot_position`). Pieces of one (ns, topic, broker name) do not
    overlap; a history row that covers no instant gives no piece. Both sides of the join are
    interval-sized (the runs are broadcast), so no instant-sized row is made here. Exploding the
    pieces gives ``route_snapshots`` (:func:`agg_route_snapshots`); the distribution stage
    aggregates them before they are exploded.

    Args:
        topic_route_df: the day's ``topic_route_history``.
        broker_data_runs_df: :func:`agg_broker_data_runs` of the day's ``broker_addr_history``.
        day: the UTC day.
        snapshot_interval_ms: spacing of the instants.
    """
    first, last = snapshot_positions(day, snapshot_interval_ms)
    # the pieces become instant rows where they are, in the write tasks: spread the
    # (interval-sized) history rows first
    queues_df = (
        spread(topic_route_df, "ns", "topic").withColumn("_first_pos", first).withColumn("_last_pos", last).alias("q")
    )
    # one row per change of a group's BrokerData: few enough to broadcast
    runs_df = broadcast(broker_data_runs_df.alias("b"))
    overlaps = (
        (F.col("q.ns") == F.col("b.ns"))
        & (F.col("q.broker_name") == F.col("b.broker_name"))
        & (F.col("b.first_pos") <= F.col("q._last_pos"))
        & (F.col("q._first_pos") <= F.col("b.last_pos"))
    )
    # a name that never has BrokerData matches no run: every instant, without cluster or addresses
    matched = F.col("b.first_pos").isNotNull()
    first_pos = F.when(matched, F.greatest("q._first_pos", "b.first_pos")).otherwise(F.col("q._first_pos"))
    last_pos = F.when(matched, F.least("q._last_pos", "b.last_pos")).otherwise(F.col("q._last_pos"))
    return (
        queues_df.join(runs_df, overlaps, "left")
        .select(
            "q.ns",
            "q.topic",
            "b.cluster",
            "q.broker_name",
            "b.broker_addrs",
            "q.read_queue_nums",
            "q.write_queue_nums",
            "q.perm",
            "q.topic_sys_flag",
            first_pos.alias("first_pos"),
            last_pos.alias("last_pos"),
        )
        .where(F.col("first_pos") <= F.col("last_pos"))
    )


def explode_pieces(pieces_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """One row per (piece, instant position it covers): the piece's columns but the positions,
    with ``snapshot_ts`` first."""
    columns = [c for c in pieces_df.columns if c not in ("first_pos", "last_pos")]
    return pieces_df.select(explode_positions(F.col("first_pos"), F.col("last_pos")).alias("_pos"), *columns).select(
        snapshot_ts_at(F.col("_pos"), day, snapshot_interval_ms).alias("snapshot_ts"), *columns
    )
