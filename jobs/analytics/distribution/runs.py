"""Runs of instants: a condition's per-instant rows merged, per (kind, subject, server), into runs
of consecutive snapshot instants, and the finding rows made of them.

``start_ts`` / ``end_ts`` are the first and last instant of a run; ``detail`` is the state at its
last instant plus ``snapshots`` (instants in the run).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from jobs.analytics.distribution.kinds import SEVERITY
from jobs.lake.findings import finding_columns
from jobs.snapshots import snapshot_position


def agg_runs(
    condition_df: DataFrame,
    day: dt.date,
    snapshot_interval_ms: int,
    keys: Sequence[str] = ("ns", "subject"),
    details: Sequence[str] = ("detail",),
) -> DataFrame:
    """Merge per-instant rows of one kind into runs of consecutive instants.

    Args:
        condition_df: one row per (``keys``, snapshot_ts) where the condition holds, with struct
            columns ``details``.
        day: the UTC day of the snapshots.
        snapshot_interval_ms: their spacing.
        keys: what a run is of (:func:`agg_kind_runs` adds ``kind``).
        details: the columns whose value at the run's last instant the run keeps.

    Returns:
        One row per run: ``keys``, ``start_ts``, ``end_ts`` (first and last instant),
        ``snapshots`` (instants in the run) and ``details`` (those of the last instant).

    Example:
        Held at 00:05, 00:10 and 00:20 (not 00:15): two runs, 00:05-00:10 and 00:20-00:20.
    """
    w = Window.partitionBy(*keys).orderBy("_pos")
    return (
        condition_df.withColumn("_pos", snapshot_position(F.col("snapshot_ts"), day, snapshot_interval_ms))
        # gaps-and-islands: within a run, position minus rank is constant
        .withColumn("_run", F.col("_pos") - F.row_number().over(w))
        .groupBy(*keys, "_run")
        .agg(
            F.min("snapshot_ts").alias("start_ts"),
            F.max("snapshot_ts").alias("end_ts"),
            F.count(F.lit(1)).alias("snapshots"),
            *[F.max_by(c, "_pos").alias(c) for c in details],
        )
        .select(*keys, "start_ts", "end_ts", "snapshots", *details)
    )


def agg_kind_runs(conditions: Mapping[str, DataFrame], day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """:func:`agg_runs` of every kind's condition rows at once: one window and one aggregate for
    all kinds, where a window per kind made the plan nine times as large.

    Each kind's ``detail`` struct keeps its own type in a column of its own (``_detail_<kind>``,
    null on the other kinds' rows); :func:`select_kind_runs` takes one kind's runs back out.

    Args:
        conditions: kind -> its per-instant rows (``ns``, ``subject``, ``snapshot_ts``, ``detail``).
        day: the UTC day of the snapshots.
        snapshot_interval_ms: their spacing.

    Returns:
        ``kind``, ``ns``, ``subject``, ``start_ts``, ``end_ts``, ``snapshots`` and a
        ``_detail_<kind>`` column per kind.
    """
    types = {kind: df.schema["detail"].dataType for kind, df in conditions.items()}
    merged_df: DataFrame | None = None
    for kind, condition_df in conditions.items():
        rows_df = condition_df.select(
            F.lit(kind).alias("kind"),
            "ns",
            "subject",
            "snapshot_ts",
            *[
                (F.col("detail") if other == kind else F.lit(None).cast(types[other])).alias(_detail_column(other))
                for other in conditions
            ],
        )
        merged_df = rows_df if merged_df is None else merged_df.unionByName(rows_df)
    assert merged_df is not None, "no kinds"
    return agg_runs(
        merged_df,
        day,
        snapshot_interval_ms,
        keys=("kind", "ns", "subject"),
        details=[_detail_column(kind) for kind in conditions],
    )


def select_kind_runs(kind_runs_df: DataFrame, kind: str) -> DataFrame:
    """The :func:`agg_runs` rows of one ``kind`` of :func:`agg_kind_runs`."""
    return kind_runs_df.where(F.col("kind") == kind).select(
        "ns", "subject", "start_ts", "end_ts", "snapshots", F.col(_detail_column(kind)).alias("detail")
    )


def _detail_column(kind: str) -> str:
    return f"_detail_{kind}"


def select_findings(runs_df: DataFrame, kind: str) -> DataFrame:
    """Finding rows (``jobs.lake.findings`` columns) of ``kind`` from :func:`agg_runs` rows; the JSON
    detail is ``snapshots`` followed by the fields of ``detail``."""
    return runs_df.select(
        *finding_columns(
            kind=kind,
            severity=SEVERITY[kind],
            subject=F.col("subject"),
            ns=F.col("ns"),
            start_ts=F.col("start_ts"),
            end_ts=F.col("end_ts"),
            detail=F.struct(F.col("snapshots"), F.col("detail.*")),
        )
    )
