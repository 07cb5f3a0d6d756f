"""``topic_unroutable``: a topic no live server routes any more, though one did earlier.

The divergence episodes see servers that disagree; a topic that every server lost at once (the
only broker group of the topic shut down, expired or was cut off everywhere, or an admin deleted
the topic on every server) is a disagreement of none, yet every producer and consumer of it gets
"No route info of this topic". Per topic, over the comparison span (docs/audit.md, "Divergence"):
the instants at which at least one server is up (its ``ns_runs``) and no up server holds a
QueueData of the topic, from the removal of the last live route (an unregister, an expiry, a
closed channel, a delete, the stop of the last server that held it), make one finding per run of
such instants, with its exact span (to the event that brought a route back, or midnight).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.analytics.divergence.findings import CATEGORY
from jobs.analytics.divergence.span import Span, with_interval_ms
from jobs.analytics.divergence.up_periods import covering_at
from jobs.lake.findings import finding_columns
from jobs.spark.profile import broadcast

FINDING_KIND = "topic_unroutable"
SEVERITY = "critical"


def _unroutable_segments(facts: Column, periods: Column, span: Span) -> Column:
    """The topic's segments (struct ``seg_from``, ``seg_to``, ``up_ns``, ``gone``) on which some
    server is up and none of them holds a QueueData, from the first instant one did to the end of
    the span; ``gone`` are the broker names whose QueueData ended where the segment begins."""
    lo = F.array_min(F.transform(facts, lambda f: f["from_ms"]))
    end = F.lit(span.day_end_ms).cast(T.LongType())
    cuts = F.filter(F.transform(periods, lambda p: p["p_from"]), lambda t: (t > lo) & (t < end))
    bounds = F.sort_array(
        F.array_distinct(
            F.concat(
                F.transform(facts, lambda f: f["from_ms"]), F.transform(facts, lambda f: f["to_ms"]), cuts, F.array(end)
            )
        )
    )
    pairs = F.arrays_zip(
        F.slice(bounds, 1, F.size(bounds) - 1).alias("seg_from"), F.slice(bounds, 2, F.size(bounds) - 1).alias("seg_to")
    )

    def segment(s: Column) -> Column:
        up_ns = F.coalesce(
            F.get(covering_at(periods, s["seg_from"], "p_from", "p_to"), 0)["up_ns"], F.array().cast("array<string>")
        )
        held = F.exists(covering_at(facts, s["seg_from"]), lambda f: F.array_contains(up_ns, f["ns"]))
        gone = F.array_sort(
            F.array_distinct(
                F.transform(F.filter(facts, lambda f: f["to_ms"] == s["seg_from"]), lambda f: f["broker_name"])
            )
        )
        return F.struct(
            s["seg_from"].alias("seg_from"),
            s["seg_to"].alias("seg_to"),
            up_ns.alias("up_ns"),
            gone.alias("gone"),
            ((F.size(up_ns) > 0) & ~held).alias("unroutable"),
        )

    return F.filter(F.transform(pairs, segment), lambda s: s["unroutable"])


def agg_unroutable_findings(queue_df: DataFrame, periods_df: DataFrame, span: Span) -> DataFrame:
    """One ``topic_unroutable`` finding (critical) per run of touching unroutable segments of a
    topic that reaches into the day.

    ``start_ts`` is when the last live route went (00:00 when earlier: ``began_before_day``),
    ``end_ts`` when a live server held a route again, or the next midnight (``still_open``).
    ``detail``: ``broker_name`` (the first, by name, of ``groups``), ``groups`` (the broker groups
    whose QueueData went last: whose loss the incident is), ``up_servers`` (the servers up when it
    began: every one of them answered TOPIC_NOT_EXIST), ``duration_ms``, ``began_before_day``,
    ``still_open``.

    Args:
        queue_df: ``topic_route_history`` rows of the day and the day before.
        periods_df: :func:`jobs.analytics.divergence.up_periods.agg_up_periods` (one row).
        span: the comparison span.

    Example:
        ``solo`` on broker-s only, on both servers; broker-s unregisters from ns-a at 10:00:00 and
        from ns-b at 10:00:00.004: one finding from 10:00:00.004 to midnight, ``groups``
        ``["broker-s"]``, ``up_servers`` ``["ns-a", "ns-b"]``.
    """
    facts_df = (
        with_interval_ms(queue_df, "valid_from_ts", "valid_to_ts", span)
        .groupBy("topic")
        .agg(F.collect_list(F.struct("ns", "from_ms", "to_ms", "broker_name")).alias("facts"))
    )
    segments_df = (
        facts_df.crossJoin(broadcast(periods_df))
        .select("topic", F.explode(_unroutable_segments(F.col("facts"), F.col("periods"), span)).alias("s"))
        .select("topic", "s.*")
    )
    runs_df = _agg_unroutable_runs(segments_df, span)
    start = F.greatest(F.col("from_ms"), F.lit(span.day_start_ms))
    return runs_df.select(
        *finding_columns(
            date=span.day,
            category=CATEGORY,
            kind=FINDING_KIND,
            severity=SEVERITY,
            subject=F.col("topic"),
            ns=F.lit(None).cast(T.StringType()),
            start_ts=F.timestamp_millis(start),
            end_ts=F.timestamp_millis("to_ms"),
            detail={
                "broker_name": F.get(F.col("groups"), 0),
                "groups": F.col("groups"),
                "up_servers": F.col("up_servers"),
                "duration_ms": F.col("to_ms") - start,
                "began_before_day": F.col("from_ms") < span.day_start_ms,
                "still_open": F.col("to_ms") >= span.day_end_ms,
            },
        )
    )


def _agg_unroutable_runs(segments_df: DataFrame, span: Span) -> DataFrame:
    """A topic's touching unroutable segments joined into runs (``from_ms``, ``to_ms``, ``groups``,
    ``up_servers``: those of the run's first segment), the runs that reach into the day and began
    with a loss."""
    by_topic = Window.partitionBy("topic").orderBy("seg_from")
    new_run = ~F.coalesce(F.lag("seg_to").over(by_topic) == F.col("seg_from"), F.lit(False))
    return (
        segments_df.withColumn(
            "_run", F.sum(new_run.cast("int")).over(by_topic.rowsBetween(Window.unboundedPreceding, 0))
        )
        .groupBy("topic", "_run")
        .agg(
            F.min("seg_from").alias("from_ms"),
            F.max("seg_to").alias("to_ms"),
            F.min_by("gone", "seg_from").alias("groups"),
            F.min_by("up_ns", "seg_from").alias("up_servers"),
        )
        # it began with the removal of the last live route; a server that comes up empty while
        # the one that held the route is down took nothing away
        .where((F.col("to_ms") > span.day_start_ms) & (F.size("groups") > 0))
    )
