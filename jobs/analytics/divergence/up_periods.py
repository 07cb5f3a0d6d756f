"""The servers up at each instant of the span: a server is up inside its ``ns_runs`` intervals,
and servers that are down are left out of the comparison."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.analytics.divergence.span import Span, with_interval_ms


def agg_up_periods(runs_df: DataFrame, span: Span) -> DataFrame:
    """The span cut at every run boundary and at 00:00, as one row: ``periods``, an array of
    struct ``p_from``, ``p_to``, ``up_ns`` (sorted ids of the servers up throughout; a server is up
    inside its ``ns_runs`` intervals), ascending. A server has a handful of runs a day, so they are
    gathered into one row and cut there.

    Args:
        runs_df: ``ns_runs`` rows of the day and the day before (``stop_ts`` null: open at the
            end of that row's day).
        span: the comparison span.
    """
    runs = F.col("runs")
    edges = F.array(*(F.lit(t).cast(T.LongType()) for t in (span.start_ms, span.day_start_ms, span.day_end_ms)))
    points = F.sort_array(
        F.array_distinct(
            F.concat(F.transform(runs, lambda r: r["from_ms"]), F.transform(runs, lambda r: r["to_ms"]), edges)
        )
    )
    pairs = F.arrays_zip(
        F.slice(points, 1, F.size(points) - 1).alias("p_from"), F.slice(points, 2, F.size(points) - 1).alias("p_to")
    )
    periods = F.transform(
        pairs,
        lambda p: F.struct(
            p["p_from"].alias("p_from"),
            p["p_to"].alias("p_to"),
            F.sort_array(F.array_distinct(F.transform(covering_at(runs, p["p_from"]), lambda r: r["ns"]))).alias(
                "up_ns"
            ),
        ),
    )
    return (
        with_interval_ms(runs_df, "start_ts", "stop_ts", span)
        .agg(F.collect_list(F.struct("ns", "from_ms", "to_ms")).alias("runs"))
        .select(periods.alias("periods"))
    )


def covering_at(array: Column, at: Column, lo: str = "from_ms", hi: str = "to_ms") -> Column:
    """The elements of ``array`` whose ``[lo, hi)`` contains ``at``."""
    return F.filter(array, lambda e: (e[lo] <= at) & (at < e[hi]))
