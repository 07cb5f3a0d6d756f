"""The distribution transforms composed for one day: the two tables' rows and the findings."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from jobs.analytics.distribution.conditions import (
    filter_addr_in_two_groups,
    filter_broker_in_two_clusters,
    filter_queue_data_without_broker,
    filter_queue_skew,
    with_skew_plan,
)
from jobs.analytics.distribution.exact import (
    EXACT_KINDS,
    agg_exact_kind_runs,
    agg_exact_no_master,
    agg_exact_topic_conditions,
    agg_exact_write_perm_wiped,
    select_exact_findings,
    select_exact_kind_runs,
    with_last_queue_datas,
)
from jobs.analytics.distribution.groups import agg_broker_groups, agg_group_rows, agg_group_totals
from jobs.analytics.distribution.kinds import SEVERITY
from jobs.analytics.distribution.params import DistributionParams
from jobs.analytics.distribution.perm_changes import filter_registered_read_only_topics, with_registered_read_only
from jobs.analytics.distribution.queue_data import PIECE_COLUMNS, with_queue_flags
from jobs.analytics.distribution.runs import agg_kind_runs, select_findings, select_kind_runs
from jobs.analytics.distribution.topics import agg_topic_segments, agg_topic_stats
from jobs.snapshots import agg_broker_data_runs
from jobs.spark.frames import CachedFrames, checkpoint_frame


@dataclass(frozen=True)
class DistributionFrames(CachedFrames):
    """The stage's outputs for one day, as DataFrames (lazy but for the small intermediates that
    :func:`build_distribution` computes at once: topic stats, group rows, findings' runs).

    Attributes:
        topic_segments_df: :func:`agg_topic_segments` rows (checkpointed).
        topic_stats_df: :func:`agg_topic_stats` rows (made from the segments when read).
        group_rows_df: :func:`agg_group_rows` rows (checkpointed).
        findings_df: finding rows (``jobs.lake.findings`` columns), category ``distribution``.
        cached: the checkpointed intermediates (:meth:`release` frees them after the last read).
    """

    topic_segments_df: DataFrame
    topic_stats_df: DataFrame
    group_rows_df: DataFrame
    findings_df: DataFrame


def build_distribution(
    pieces_df: DataFrame,
    previous_end_df: DataFrame,
    broker_addr_df: DataFrame,
    cluster_df: DataFrame,
    day: dt.date,
    params: DistributionParams,
    broker_data_runs_df: DataFrame | None = None,
    *,
    exact_pieces_df: DataFrame,
    exact_broker_data_runs_df: DataFrame,
    registered_read_only_df: DataFrame | None = None,
) -> DistributionFrames:
    """Compose the transforms for one day; computes the findings' runs of instants (small) at once.

    Args:
        pieces_df: the day's routes as pieces (:func:`jobs.snapshots.agg_route_pieces`, or
            :func:`jobs.analytics.distribution.topics.pieces_from_snapshots` of ``route_snapshots`` rows).
        previous_end_df: ``route_snapshots`` rows of the day before's last instant (may be empty).
        broker_addr_df: the day's ``broker_addr_history``.
        cluster_df: the day's ``cluster_history``.
        day: the UTC day.
        params: snapshot spacing and skew thresholds.
        broker_data_runs_df: :func:`jobs.snapshots.agg_broker_data_runs` of ``broker_addr_df``, if the caller has it.
        exact_pieces_df: the same routes at millisecond positions
            (:func:`jobs.analytics.distribution.exact.agg_exact_pieces`): the exact kinds'
            findings (``EXACT_KINDS``) come from them, the others from the instants.
        exact_broker_data_runs_df: :func:`jobs.analytics.distribution.exact.agg_exact_broker_data_runs`
            of ``broker_addr_df`` (``no_master``).
        registered_read_only_df: the QueueData runs their brokers registered without write perm
            (:func:`jobs.analytics.distribution.perm_changes.agg_registered_read_only`): no wipe,
            and a topic they alone make unwritable is read-only by configuration. None: none known.
    """
    interval = params.snapshot_interval_ms
    if broker_data_runs_df is None:
        broker_data_runs_df = agg_broker_data_runs(broker_addr_df, day, interval)
    flagged_df = pieces_df.transform(with_queue_flags)
    broker_groups_df = agg_broker_groups(broker_data_runs_df, day, interval)
    # each is read by its table and by several findings: computed once, and cut from its plan
    # the topics' instant rows are many and cheap to make again: the segments are kept instead
    topic_segments_df = checkpoint_frame(agg_topic_segments(flagged_df))
    topic_stats_df = agg_topic_stats(topic_segments_df, day, interval)
    group_rows_df = checkpoint_frame(agg_group_rows(agg_group_totals(flagged_df, day, interval), broker_groups_df, day))
    exact_flagged_df = exact_pieces_df.transform(with_queue_flags)
    exact_runs_df = checkpoint_frame(
        _agg_exact_runs(exact_flagged_df, exact_broker_data_runs_df, previous_end_df, registered_read_only_df, day)
    )
    conditions = _instant_conditions(group_rows_df, broker_groups_df, cluster_df, broker_addr_df, day, params)
    # small (a row per run), read once per kind: computed here, once, and cut from its plan, so
    # that the reads neither repeat nor re-plan it
    kind_runs_df = checkpoint_frame(agg_kind_runs(conditions, day, interval))
    findings_df = _union_findings(kind_runs_df, conditions, exact_runs_df, exact_flagged_df, params)
    return DistributionFrames(
        topic_segments_df,
        topic_stats_df,
        group_rows_df,
        findings_df,
        cached=(topic_segments_df, group_rows_df, kind_runs_df, exact_runs_df),
    )


def _instant_conditions(
    group_rows_df: DataFrame,
    broker_groups_df: DataFrame,
    cluster_df: DataFrame,
    broker_addr_df: DataFrame,
    day: dt.date,
    params: DistributionParams,
) -> dict[str, DataFrame]:
    """The conditions of the kinds found at the snapshot instants, by kind (for :func:`agg_kind_runs`)."""
    interval = params.snapshot_interval_ms
    return {
        "queue_skew": filter_queue_skew(group_rows_df, params),
        "queue_data_without_broker": filter_queue_data_without_broker(group_rows_df),
        "broker_in_two_clusters": filter_broker_in_two_clusters(cluster_df, broker_groups_df, day, interval),
        "addr_in_two_groups": filter_addr_in_two_groups(broker_addr_df, day, interval),
    }


def _agg_exact_runs(
    exact_flagged_df: DataFrame,
    exact_broker_data_runs_df: DataFrame,
    previous_end_df: DataFrame,
    registered_read_only_df: DataFrame | None,
    day: dt.date,
) -> DataFrame:
    """The exact kinds' runs (:func:`jobs.analytics.distribution.exact.agg_exact_kind_runs`) from the
    flagged exact pieces, as :func:`build_distribution` takes its arguments."""
    previous_flagged_df = previous_end_df.select(
        *PIECE_COLUMNS, F.lit(-1).cast("long").alias("first_pos"), F.lit(-1).cast("long").alias("last_pos")
    ).transform(with_queue_flags)
    exact_conditions = agg_exact_topic_conditions(agg_topic_segments(exact_flagged_df), exact_flagged_df)
    exact_conditions["no_master"] = agg_exact_no_master(exact_broker_data_runs_df)
    wiped_candidates_df = exact_flagged_df
    if registered_read_only_df is not None:
        # a permission the broker registered is its configuration, not an admin's wipe
        sourced_df = with_registered_read_only(exact_flagged_df, registered_read_only_df)
        exact_conditions["no_writable_queue"] = filter_registered_read_only_topics(
            exact_conditions["no_writable_queue"], sourced_df
        )
        wiped_candidates_df = sourced_df.where(~F.col("registered_read_only")).drop("registered_read_only")
    exact_conditions["write_perm_wiped"] = agg_exact_write_perm_wiped(wiped_candidates_df, previous_flagged_df)
    return agg_exact_kind_runs(exact_conditions, day)


def _union_findings(
    kind_runs_df: DataFrame,
    kinds: Iterable[str],
    exact_runs_df: DataFrame,
    exact_flagged_df: DataFrame,
    params: DistributionParams,
) -> DataFrame:
    """The finding rows of every kind (``SEVERITY`` order): the exact kinds from
    :func:`jobs.analytics.distribution.exact.agg_exact_kind_runs` rows, the others (``kinds``) from
    :func:`agg_kind_runs` rows; the details of three kinds gain what their run's end adds."""

    def runs(kind: str) -> DataFrame:
        return select_kind_runs(kind_runs_df, kind)

    def exact(kind: str) -> DataFrame:
        return select_exact_kind_runs(exact_runs_df, kind)

    enriched: Mapping[str, DataFrame] = {"queue_skew": with_skew_plan(runs("queue_skew"), params)}
    by_kind = {kind: select_findings(enriched[kind] if kind in enriched else runs(kind), kind) for kind in kinds}
    for kind in EXACT_KINDS:
        kind_df = exact(kind)
        if kind in ("no_writable_queue", "single_broker_topic"):  # the others' segments say it all
            kind_df = with_last_queue_datas(kind_df, exact_flagged_df)
        by_kind[kind] = select_exact_findings(kind_df, kind)
    findings = [by_kind[kind] for kind in SEVERITY if kind in by_kind]  # the others: topic_changes
    findings_df = findings[0]
    for more_df in findings[1:]:
        findings_df = findings_df.unionByName(more_df)
    return findings_df
