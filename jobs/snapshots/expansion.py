"""The instant rows of pieces, made in the write tasks: a write's :class:`RowExpansion` from rows that
hold over runs of instant positions to one row per instant. This module and
:mod:`jobs.snapshots.instants` are shipped to the executors by value."""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Iterator, Sequence
from functools import partial

import numpy as np
import pyarrow as pa
from pyspark import cloudpickle
from pyspark.sql import functions as F

from common.timeutil import DAY_MS
from jobs.lake.tables import RowExpansion
from jobs.snapshots import instants
from jobs.snapshots.instants import end_position
from jobs.snapshots.pieces import explode_pieces
from schemas.routes import ROUTE_SNAPSHOTS_SCHEMA

# Most instant rows one expanded batch holds: a batch of pieces (Spark's Arrow batches hold up to
# 10,000 rows) may stand for millions of them.
_EXPANDED_BATCH_ROWS = 1 << 20


def expand_positions_batch(
    pieces: pa.RecordBatch,
    day: dt.date,
    snapshot_interval_ms: int,
    names: Sequence[str],
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
            [columns[name] if name in columns else pieces.column(name).take(take) for name in names], names=list(names)
        )
        lo = hi


_SNAPSHOT_NAMES = ROUTE_SNAPSHOTS_SCHEMA.names
_EPOCH_ORDINAL = dt.date(1970, 1, 1).toordinal()


def position_expansion(day: dt.date, snapshot_interval_ms: int, names: Sequence[str]) -> RowExpansion:
    """How a write makes a day's instant rows, with the columns ``names``, from rows that hold over
    runs of instant positions (``first_pos``, ``last_pos``): in Spark, :func:`explode_pieces` and
    ``date``; in the write tasks, :func:`expand_positions_batch`."""
    # executors need not have jobs installed
    cloudpickle.register_pickle_by_value(sys.modules[__name__])
    cloudpickle.register_pickle_by_value(instants)
    names = list(names)
    return RowExpansion(
        spark=lambda pieces_df: (
            explode_pieces(pieces_df, day, snapshot_interval_ms).withColumn("date", F.lit(day)).select(*names)
        ),
        arrow=partial(expand_positions_batch, day=day, snapshot_interval_ms=snapshot_interval_ms, names=names),
    )


def route_snapshot_expansion(day: dt.date, snapshot_interval_ms: int) -> RowExpansion:
    """How the write of ``route_snapshots`` makes a day's instant rows from its pieces
    (:func:`position_expansion`)."""
    return position_expansion(day, snapshot_interval_ms, _SNAPSHOT_NAMES)
