"""``route_snapshots``: every server's routes at fixed instants of a day, from the rebuilt history.

Instants: ``00:00 + k * snapshot_interval_ms`` within the day and ``23:59:59.999``; one row per
(instant, ns, topic, broker name). The rows are made columnar, as *pieces* that hold over runs of
instants (:func:`agg_route_pieces`), and exploded into instant rows only in the write tasks
(:func:`expand_positions_batch`). See docs/audit.md, "Snapshots".
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterator, Sequence
from functools import partial

import numpy as np
import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs import lake
from jobs.lake.days import replace_day
from jobs.lake.tables import RowExpansion, read_table
from jobs.spark.frames import spread
from jobs.spark.profile import broadcast
from common.timeutil import DAY_MS, day_start_ms
from schemas.routes import (
    BROKER_ADDR_HISTORY_SCHEMA,
    PARTITION_BY,
    ROUTE_SNAPSHOTS_SCHEMA,
    TOPIC_ROUTE_HISTORY_SCHEMA,
)


def snapshot_instants_ms(day: dt.date, snapshot_interval_ms: int) -> list[int]:
    """Every snapshot instant of ``day`` in epoch ms, ascending (the last is ``23:59:59.999``)."""
    start = day_start_ms(day)
    instants = list(range(start, start + DAY_MS, snapshot_interval_ms))
    if instants[-1] != start + DAY_MS - 1:
        instants.append(start + DAY_MS - 1)
    return instants


def end_position(snapshot_interval_ms: int) -> int:
    """The position of ``23:59:59.999`` among a day's snapshot instants: the last index of
    :func:`snapshot_instants_ms` (every day has the same instants relative to its start)."""
    last_grid = (DAY_MS - 1) // snapshot_interval_ms
    return last_grid if last_grid * snapshot_interval_ms == DAY_MS - 1 else last_grid + 1


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
    end_pos = end_position(interval)
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
    end_pos = end_position(snapshot_interval_ms)
    ms = F.when(pos == end_pos, F.lit(start + DAY_MS - 1)).otherwise(pos * snapshot_interval_ms + start)
    return F.timestamp_millis(ms)


def snapshot_position(ts: Column, day: dt.date, snapshot_interval_ms: int) -> Column:
    """The position of the snapshot instant ``ts`` among the day's instants (0 = 00:00), as a long.

    Consecutive instants have consecutive positions; the end of the day (``23:59:59.999``) follows
    the last grid instant.
    """
    start = day_start_ms(day)
    end_pos = end_position(snapshot_interval_ms)
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
        .agg(F.min("seg_first").alias("first_pos"), F.max("seg_last").alias("last_pos"),
             F.first("cluster").alias("cluster"), F.first("broker_entries").alias("broker_entries"))
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
    runs_df = _agg_value_runs(segments_df)
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
        spread(topic_route_df, "ns", "topic")
        .withColumn("_first_pos", first)
        .withColumn("_last_pos", last)
        .alias("q")
    )
    # one row per change of a group's BrokerData: few enough to broadcast
    runs_df = broadcast(broker_data_runs_df.alias("b"))
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
        .select(
            "q.ns", "q.topic", "b.cluster", "q.broker_name", "b.broker_addrs", "q.read_queue_nums",
            "q.write_queue_nums", "q.perm", "q.topic_sys_flag", first_pos.alias("first_pos"), last_pos.alias("last_pos"),
        )
        .where(F.col("first_pos") <= F.col("last_pos"))
    )


def explode_pieces(pieces_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """One row per (piece, instant position it covers): the piece's columns but the positions,
    with ``snapshot_ts`` first."""
    columns = [c for c in pieces_df.columns if c not in ("first_pos", "last_pos")]
    return pieces_df.select(_explode_positions(F.col("first_pos"), F.col("last_pos")).alias("_pos"), *columns).select(
        snapshot_ts_at(F.col("_pos"), day, snapshot_interval_ms).alias("snapshot_ts"), *columns
    )


# Most instant rows one expanded batch holds: a batch of pieces (Spark's Arrow batches hold up to
# 10,000 rows) may stand for millions of them.
_EXPANDED_BATCH_ROWS = 1 << 20


def expand_positions_batch(
    pieces: pa.RecordBatch, day: dt.date, snapshot_interval_ms: int, names: Sequence[str],
    max_rows: int = _EXPANDED_BATCH_ROWS,
) -> Iterator[pa.RecordBatch]:
    """The instant rows of an Arrow batch of rows that each hold over a run of instant positions
    (``first_pos`` to ``last_pos``), in batches of at most ``max_rows`` rows (or one row's
    instants, if more): row by row in the batch's order, a row per position, with the columns
    ``names``. ``snapshot_ts`` is the position's instant, ``date`` is ``day``, any other name is
    the batch's column of that name. The rows of :func:`explode_pieces`, plus ``date``.

    It runs in the write tasks (see :func:`position_expansion`), shipped by value: it uses only
    numpy and pyarrow. The instant rows are thus never converted from the JVM's rows one by one.
    """
    start = (day.toordinal() - _EPOCH_ORDINAL) * DAY_MS  # day_start_ms, without shipping nameserver
    end_pos = end_position(snapshot_interval_ms)
    first = pieces.column("first_pos").to_numpy(zero_copy_only=False).astype(np.int64)
    counts = pieces.column("last_pos").to_numpy(zero_copy_only=False).astype(np.int64) - first + 1
    ends = np.cumsum(counts)
    lo = 0
    while lo < len(counts):
        # the pieces lo..hi-1 make at most max_rows rows (at least one piece)
        done = int(ends[lo - 1]) if lo else 0
        hi = max(lo + 1, int(np.searchsorted(ends, done + max_rows, side="right")))
        n = counts[lo:hi]
        index = np.repeat(np.arange(lo, hi), n)
        pos = np.arange(int(n.sum()), dtype=np.int64) - np.repeat(np.cumsum(n) - n, n) + np.repeat(first[lo:hi], n)
        ms = np.where(pos == end_pos, start + DAY_MS - 1, start + pos * snapshot_interval_ms)
        take = pa.array(index)
        columns = {
            "snapshot_ts": pa.array(ms * 1000, pa.timestamp("us", tz="UTC")),
            "date": pa.array(np.full(len(index), day, dtype="datetime64[D]"), pa.date32()),
        }
        yield pa.RecordBatch.from_arrays(
            [columns[name] if name in columns else pieces.column(name).take(take) for name in names],
            names=list(names),
        )
        lo = hi


_SNAPSHOT_NAMES = ROUTE_SNAPSHOTS_SCHEMA.names
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


def position_expansion(day: dt.date, snapshot_interval_ms: int, names: Sequence[str]) -> RowExpansion:
    """How a write makes a day's instant rows, with the columns ``names``, from rows that hold over
    runs of instant positions (``first_pos``, ``last_pos``): in Spark, :func:`explode_pieces` and
    ``date``; in the write tasks, :func:`expand_positions_batch`."""
    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # executors need not have jobs installed
    names = list(names)
    return RowExpansion(
        spark=lambda pieces_df: explode_pieces(pieces_df, day, snapshot_interval_ms)
        .withColumn("date", F.lit(day)).select(*names),
        arrow=partial(expand_positions_batch, day=day, snapshot_interval_ms=snapshot_interval_ms, names=names),
    )


def route_snapshot_expansion(day: dt.date, snapshot_interval_ms: int) -> RowExpansion:
    """How the write of ``route_snapshots`` makes a day's instant rows from its pieces
    (:func:`position_expansion`)."""
    return position_expansion(day, snapshot_interval_ms, _SNAPSHOT_NAMES)


def agg_route_snapshots(
    topic_route_df: DataFrame, broker_addr_df: DataFrame, day: dt.date, snapshot_interval_ms: int
) -> DataFrame:
    """``route_snapshots`` rows of one day from that day's ``topic_route_history`` and
    ``broker_addr_history`` rows."""
    runs_df = agg_broker_data_runs(broker_addr_df, day, snapshot_interval_ms)
    pieces_df = agg_route_pieces(topic_route_df, runs_df, day, snapshot_interval_ms)
    return route_snapshot_expansion(day, snapshot_interval_ms).spark(pieces_df)


def run_snapshots(spark: SparkSession, lake_dir: str, day: dt.date, snapshot_interval_ms: int) -> None:
    """Recompute one day's ``route_snapshots`` from the lake's history tables (replaces the day)."""
    where = {"date": day}
    topic_route_df = read_table(spark, lake.table_path(lake_dir, lake.TOPIC_ROUTE_HISTORY),
                                TOPIC_ROUTE_HISTORY_SCHEMA, where=where)
    broker_addr_df = read_table(spark, lake.table_path(lake_dir, lake.BROKER_ADDR_HISTORY),
                                BROKER_ADDR_HISTORY_SCHEMA, where=where)
    runs_df = agg_broker_data_runs(broker_addr_df, day, snapshot_interval_ms)
    # the write tasks expand the pieces into the instant rows
    replace_day(
        agg_route_pieces(topic_route_df, runs_df, day, snapshot_interval_ms), lake_dir, lake.ROUTE_SNAPSHOTS, day,
        ROUTE_SNAPSHOTS_SCHEMA, partition_by=PARTITION_BY,
        expansion=route_snapshot_expansion(day, snapshot_interval_ms),
    )
