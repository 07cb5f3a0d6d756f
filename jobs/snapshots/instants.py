"""The snapshot instants of a day and their positions: ``00:00 + k * snapshot_interval_ms`` within
the day, then ``23:59:59.999``; a position counts them from 0 (00:00)."""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from common.timeutil import DAY_MS, day_start_ms


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


def explode_positions(first: Column, last: Column) -> Column:
    """One row per position from ``first`` to ``last`` (none when ``first`` exceeds ``last``)."""
    # a sequence, not an array built by higher-order functions: those are interpreted per element
    return F.explode(F.when(first <= last, F.sequence(first, last)))


def with_snapshot_ts(history_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """One row per (history row, snapshot instant in ``[valid_from_ts, valid_to_ts)``): ``snapshot_ts``.

    Example:
        A row valid 00:03-00:12 with a 5-minute interval gives 00:05 and 00:10; a row still open
        at the end of the day also gives ``23:59:59.999``.
    """
    first, last = snapshot_positions(day, snapshot_interval_ms)
    return history_df.withColumn("snapshot_ts", explode_positions(first, last)).withColumn(
        "snapshot_ts", snapshot_ts_at(F.col("snapshot_ts"), day, snapshot_interval_ms)
    )
