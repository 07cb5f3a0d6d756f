"""The distribution stage: where each server's routes put the queues, and what is wrong with it.

Input is every server's routes at the ``route_snapshots`` instants (``00:00 + k *
snapshot_interval_ms`` and ``23:59:59.999``), taken as *pieces*: a ``route_snapshots`` row that
holds over a run of consecutive instants (:func:`jobs.snapshots.agg_route_pieces`, made from the
day's ``topic_route_history`` and ``broker_addr_history`` exactly as ``route_snapshots`` is), so
the day's instant rows of ``route_snapshots`` are never read back. The exact findings
(:mod:`jobs.analytics.distribution.exact`) come from the same history at millisecond positions,
so they start and end at the events that opened and closed them. Outputs, each replaced per
day: ``queue_distribution``, ``topic_distribution`` (:mod:`schemas.distribution`) and findings of
category ``distribution`` (:mod:`jobs.analytics.distribution.kinds`).
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field

import pyarrow.compute as pc
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from common.config import Config
from common.timeutil import day_start_ms
from jobs import lake
from jobs.analytics.distribution.composition import DistributionFrames, build_distribution
from jobs.analytics.distribution.exact import agg_exact_broker_data_runs, agg_exact_pieces
from jobs.analytics.distribution.groups import agg_queue_distribution
from jobs.analytics.distribution.kinds import CATEGORY
from jobs.analytics.distribution.params import DistributionParams
from jobs.analytics.distribution.perm_changes import (
    agg_perm_runs,
    agg_registered_read_only,
    select_topic_perm_changes,
    with_perm_sources,
)
from jobs.analytics.distribution.topic_changes import select_topic_deletes, select_topic_route_changes
from jobs.analytics.distribution.topics import topic_distribution_expansion
from jobs.lake.days import day_rows, read_day_arrow, read_or_empty, replace_day
from jobs.lake.findings import DayFindings
from jobs.lake.tables import table_exists
from jobs.snapshots import agg_broker_data_runs, agg_route_pieces
from jobs.spark.frames import CachedFrames, checkpoint_frame
from schemas.distribution import PARTITION_BY, QUEUE_DISTRIBUTION_SCHEMA, TOPIC_DISTRIBUTION_SCHEMA
from schemas.events import EVENTS_TABLE_SCHEMA
from schemas.routes import (
    BROKER_ADDR_HISTORY_SCHEMA,
    CLUSTER_HISTORY_SCHEMA,
    NS_STATE_SCHEMA,
    ROUTE_SNAPSHOTS_SCHEMA,
    TOPIC_ROUTE_HISTORY_SCHEMA,
)


@dataclass(frozen=True)
class DistributionResult:
    """What a day's distribution stage wrote.

    The report's end-of-day write-queue frame is
    :func:`jobs.analytics.distribution.end_of_day.end_of_day_distribution`.

    Attributes:
        day: the UTC day.
        snapshots: snapshot instants with at least one broker group or route on some server.
        servers: name servers with at least one broker group or route in a snapshot.
        queue_distribution_rows: rows written to ``queue_distribution``.
        topic_distribution_rows: rows written to ``topic_distribution``.
        findings_by_kind: findings written, per kind (kinds with none are absent); empty in the
            nightly audit, which writes every stage's findings at its end.
        notes: remarks for the report.
    """

    day: dt.date
    snapshots: int
    servers: int
    queue_distribution_rows: int
    topic_distribution_rows: int
    findings_by_kind: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """The integer figures, for the audit's stage log line."""
        return {
            "snapshots": self.snapshots,
            "servers": self.servers,
            "queue_distribution_rows": self.queue_distribution_rows,
            "topic_distribution_rows": self.topic_distribution_rows,
            "findings": sum(self.findings_by_kind.values()),
        }


def run_distribution(
    spark: SparkSession, lake_dir: str, day: dt.date, config: Config, findings: DayFindings | None = None
) -> DistributionResult:
    """Compute and write one day's distribution tables and findings (replacing that day's).

    Reads the day's ``topic_route_history``, ``broker_addr_history`` and ``cluster_history``
    (the routes at the snapshot instants are made from them exactly as ``route_snapshots`` is,
    but aggregated before they are exploded) and the day before's last ``route_snapshots``
    instant when the lake has it, the day's ``delete_topic``, ``wipe_write_perm`` and
    ``add_write_perm`` events (:mod:`jobs.analytics.distribution.topic_changes`,
    :mod:`jobs.analytics.distribution.perm_changes`) and which servers are observed (``ns_state``);
    writes ``queue_distribution``,
    ``topic_distribution`` and the day's ``distribution`` findings.

    Args:
        findings: the audit's findings of the day, which this stage's join (written by the
            incidents stage); None: they are written now.

    Raises:
        FileNotFoundError: the lake has no ``topic_route_history`` table (run the rebuild first).
    """
    params = DistributionParams.from_config(config)
    routes_path = lake.table_path(lake_dir, lake.TOPIC_ROUTE_HISTORY)
    if not table_exists(routes_path):
        raise FileNotFoundError(f"{routes_path}: no topic_route_history table; run the rebuild first")
    today = {"date": day}
    broker_addr_df = read_or_empty(spark, lake_dir, lake.BROKER_ADDR_HISTORY, BROKER_ADDR_HISTORY_SCHEMA, where=today)
    # small (a row per change of a group's BrokerData), read by the pieces and the group rows;
    # checkpointed like build_distribution's intermediates (see there)
    runs_df = checkpoint_frame(agg_broker_data_runs(broker_addr_df, day, params.snapshot_interval_ms))
    topic_route_df = read_or_empty(spark, lake_dir, lake.TOPIC_ROUTE_HISTORY, TOPIC_ROUTE_HISTORY_SCHEMA, where=today)
    # interval-sized, read by every per-topic and per-group aggregate
    pieces_df = checkpoint_frame(agg_route_pieces(topic_route_df, runs_df, day, params.snapshot_interval_ms))
    # the same at millisecond positions, for the exact findings (their conditions and the
    # QueueData their details name)
    exact_runs_df = checkpoint_frame(agg_exact_broker_data_runs(broker_addr_df, day))
    exact_pieces_df = checkpoint_frame(agg_exact_pieces(topic_route_df, exact_runs_df, day))
    events_df = read_or_empty(spark, lake_dir, lake.EVENTS, EVENTS_TABLE_SCHEMA, where=today)
    # small (a row per perm run), read by the exact kinds' several branches and the perm changes
    perm_runs_df = checkpoint_frame(_perm_runs(spark, lake_dir, day, topic_route_df, events_df))
    frames = build_distribution(
        pieces_df,
        _read_previous_end(spark, lake_dir, day),
        broker_addr_df,
        read_or_empty(spark, lake_dir, lake.CLUSTER_HISTORY, CLUSTER_HISTORY_SCHEMA, where=today),
        day,
        params,
        runs_df,
        exact_pieces_df=exact_pieces_df,
        exact_broker_data_runs_df=exact_runs_df,
        registered_read_only_df=agg_registered_read_only(perm_runs_df, day),
    )
    findings_df = (
        frames.findings_df.unionByName(select_topic_deletes(events_df, topic_route_df))
        .unionByName(select_topic_route_changes(topic_route_df, broker_addr_df, day))
        .unionByName(select_topic_perm_changes(perm_runs_df, topic_route_df))
    )
    kept = CachedFrames(cached=(*frames.cached, pieces_df, exact_pieces_df, exact_runs_df, runs_df, perm_runs_df))
    by_kind = _write_outputs(frames, findings_df, kept, findings, lake_dir, day, params)
    return _result(lake_dir, day, by_kind)


def _write_outputs(
    frames: DistributionFrames,
    findings_df: DataFrame,
    kept: CachedFrames,
    findings: DayFindings | None,
    lake_dir: str,
    day: dt.date,
    params: DistributionParams,
) -> dict[str, int]:
    """Write the two tables and hand the findings to ``findings`` (or write them, and free ``kept``,
    when None); the findings written, per kind (none when handed over)."""
    own = findings is None
    findings = findings if findings is not None else DayFindings(day)
    try:
        _write_tables(frames, lake_dir, day, params)
        findings.add(CATEGORY, findings_df, keep=kept)
        return findings.write_category(lake_dir, CATEGORY) if own else {}
    finally:
        if own:
            kept.release()


def _perm_runs(
    spark: SparkSession, lake_dir: str, day: dt.date, topic_route_df: DataFrame, events_df: DataFrame
) -> DataFrame:
    """Who set each QueueData's perm: a broker's registration or an admin's 205/327
    (:mod:`jobs.analytics.distribution.perm_changes`), knowing which servers are observed (``ns_state``)."""
    observed_df = (
        read_or_empty(spark, lake_dir, lake.NS_STATE, NS_STATE_SCHEMA, where={"date": day})
        .where(F.col("observed"))
        .select("ns", "resolution_ms")
    )
    return with_perm_sources(agg_perm_runs(topic_route_df), events_df, observed_df)


def _result(lake_dir: str, day: dt.date, by_kind: dict[str, int]) -> DistributionResult:
    """What the stage wrote, read back (``by_kind``: the findings it wrote itself)."""
    counts = _written_counts(lake_dir, day)
    notes = (
        []
        if counts["rows"]
        else [f"distribution: no route or broker group on any server at the snapshot instants of {day.isoformat()}"]
    )
    return DistributionResult(
        day=day,
        snapshots=counts["snapshots"],
        servers=counts["servers"],
        queue_distribution_rows=counts["rows"],
        topic_distribution_rows=day_rows(lake_dir, lake.TOPIC_DISTRIBUTION, day),
        findings_by_kind=by_kind,
        notes=notes,
    )


def _read_previous_end(spark: SparkSession, lake_dir: str, day: dt.date) -> DataFrame:
    """The ``route_snapshots`` rows of the day before's last instant (empty without the table)."""
    return read_or_empty(
        spark, lake_dir, lake.ROUTE_SNAPSHOTS, ROUTE_SNAPSHOTS_SCHEMA, where={"date": day - dt.timedelta(days=1)}
    ).where(F.col("snapshot_ts") == F.timestamp_millis(F.lit(day_start_ms(day) - 1)))


def _write_tables(frames: DistributionFrames, lake_dir: str, day: dt.date, params: DistributionParams) -> None:
    """Replace the day in ``topic_distribution`` and ``queue_distribution``."""
    # the write tasks make the instant rows of the segments
    replace_day(
        frames.topic_segments_df,
        lake_dir,
        lake.TOPIC_DISTRIBUTION,
        day,
        TOPIC_DISTRIBUTION_SCHEMA,
        partition_by=PARTITION_BY,
        expansion=topic_distribution_expansion(day, params.snapshot_interval_ms),
    )
    replace_day(
        agg_queue_distribution(frames.group_rows_df),
        lake_dir,
        lake.QUEUE_DISTRIBUTION,
        day,
        QUEUE_DISTRIBUTION_SCHEMA,
        partition_by=PARTITION_BY,
    )


def _written_counts(lake_dir: str, day: dt.date) -> dict[str, int]:
    """``queue_distribution`` rows, instants and servers, read back from what the stage wrote."""
    rows = read_day_arrow(lake_dir, lake.QUEUE_DISTRIBUTION, day, ["snapshot_ts", "ns"])
    return {
        "rows": rows.num_rows,
        "snapshots": pc.count_distinct(rows.column("snapshot_ts")).as_py(),
        "servers": pc.count_distinct(rows.column("ns")).as_py(),
    }
