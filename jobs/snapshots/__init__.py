"""``route_snapshots``: every server's routes at fixed instants of a day, from the rebuilt history.

Instants: ``00:00 + k * snapshot_interval_ms`` within the day and ``23:59:59.999``; one row per
(instant, ns, topic, broker name). The rows are made columnar, as *pieces* that hold over runs of
instants (:func:`agg_route_pieces`), and exploded into instant rows only in the write tasks
(:func:`expand_positions_batch`). See docs/audit.md, "Snapshots". Parts: ``instants`` (the instants
and their positions), ``pieces``, ``expansion`` (the write tasks' instant rows), and ``stage``
(:func:`run_snapshots`).
"""

from jobs.snapshots.expansion import expand_positions_batch, position_expansion, route_snapshot_expansion
from jobs.snapshots.instants import (
    end_position,
    explode_positions,
    snapshot_instants_ms,
    snapshot_position,
    snapshot_positions,
    snapshot_ts_at,
    with_snapshot_ts,
)
from jobs.snapshots.pieces import agg_broker_data_runs, agg_route_pieces, explode_pieces, with_segments
from jobs.snapshots.stage import agg_route_snapshots, run_snapshots

__all__ = [
    "agg_broker_data_runs",
    "agg_route_pieces",
    "agg_route_snapshots",
    "end_position",
    "expand_positions_batch",
    "explode_pieces",
    "explode_positions",
    "position_expansion",
    "route_snapshot_expansion",
    "run_snapshots",
    "snapshot_instants_ms",
    "snapshot_position",
    "snapshot_positions",
    "snapshot_ts_at",
    "with_segments",
    "with_snapshot_ts",
]
