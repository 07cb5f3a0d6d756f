"""A key's elementary segments and each up server's view of the key on them.

Per key, higher-order functions over its facts do the work without a shuffle: the facts' ends
and the servers' up/down instants are the boundaries, consecutive boundaries make the key's
segments, and the facts covering a segment give each up server's view. Only disagreeing
segments (more than one view) become rows.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from jobs.analytics.divergence.kinds import ABSENT, BROKER_MISSING, KEY_COLUMNS, QUEUE_DATA_MISMATCH, ROUTE_MISSING
from jobs.analytics.divergence.span import Span
from jobs.analytics.divergence.up_periods import covering_at
from jobs.spark.profile import broadcast


def _views(kind: Column, covering: Column, up_ns: Column) -> Column:
    """Each up server's view of a key on a segment, from the facts covering the segment: an array
    of struct ``ns``, ``view``, sorted by ns, without the servers that are not compared.

    One branch per kind, so a row evaluates only its own kind's expression.
    """

    def on(n: Column, layer: str | None = None) -> Column:
        return F.exists(covering, lambda f: (f["ns"] == n) & (F.lit(True) if layer is None else f["layer"] == layer))

    def per_server(view: Callable[[Column], Column]) -> Column:
        return F.filter(
            F.transform(up_ns, lambda n: F.struct(n.alias("ns"), view(n).alias("view"))),
            lambda v: v["view"].isNotNull(),
        )

    def queue_data(n: Column) -> Column:
        value = F.get(F.filter(covering, lambda f: (f["ns"] == n) & (f["layer"] == "qd")), 0)["value"]
        return F.coalesce(value, F.when(on(n, "topic") & on(n, "broker"), F.lit(ABSENT)))

    def broker_addrs(n: Column) -> Column:
        # brokerAddrs in the standard JSON form: quoted numeric ids, ascending
        cells = F.sort_array(
            F.transform(
                F.filter(covering, lambda f: f["ns"] == n),
                lambda f: F.struct(f["sub"].alias("id"), f["value"].alias("addr")),
            )
        )
        text = F.array_join(F.transform(cells, lambda c: F.format_string('"%d":"%s"', c["id"], c["addr"])), ",")
        return F.when(F.size(cells) > 0, F.concat(F.lit("{"), text, F.lit("}")))

    return (
        F.when(kind == ROUTE_MISSING, per_server(lambda n: F.when(on(n), F.lit("present")).otherwise(F.lit(ABSENT))))
        .when(kind == BROKER_MISSING, per_server(lambda n: F.when(on(n), F.lit("live")).otherwise(F.lit(ABSENT))))
        .when(kind == QUEUE_DATA_MISMATCH, per_server(queue_data))
        .otherwise(per_server(broker_addrs))
    )


def _compare(segment: Column, day_start_ms_: int) -> Column:
    """A disagreeing segment (``seg_from``, ``seg_to``, ``up_ns``, ``views``, ``top``: struct of
    the majority's ``n`` and ``view``) with ``majority``, ``servers_up``, ``servers_wrong``,
    ``exposure`` (ms; 0 before ``day_start_ms_``) and ``critical`` (a route missing on a
    majority of the up servers)."""
    views = segment["views"]
    up = F.size(segment["up_ns"])
    wrong = F.size(views) - segment["top"]["n"]
    in_day = segment["seg_from"] >= F.lit(day_start_ms_)
    absent = F.size(F.filter(views, lambda v: v["view"] == F.lit(ABSENT)))
    return F.struct(
        segment["seg_from"].alias("seg_from"),
        segment["seg_to"].alias("seg_to"),
        views.alias("views"),
        segment["top"]["view"].alias("majority"),
        up.alias("servers_up"),
        wrong.alias("servers_wrong"),
        F.when(in_day, wrong * (segment["seg_to"] - segment["seg_from"]) / up).otherwise(F.lit(0.0)).alias("exposure"),
        (in_day & (F.col("kind") == ROUTE_MISSING) & (absent * 2 > up)).alias("critical"),
    )


def _majority(views: Column) -> Column:
    """The view most servers hold (struct ``n``, ``held``, ``view``); a tie goes to a held value
    over ``absent`` (the broker did register it), then to the greatest value."""
    distinct = F.array_distinct(F.transform(views, lambda v: v["view"]))
    return F.array_max(
        F.transform(
            distinct,
            lambda d: F.struct(
                F.size(F.filter(views, lambda v: v["view"] == d)).alias("n"),
                (d != F.lit(ABSENT)).alias("held"),
                d.alias("view"),
            ),
        )
    )


def _segment_ends(facts: Column, periods: Column) -> Column:
    """A key's boundaries (unsorted, repeated): every fact's ends, and the up periods' starts inside its extent."""
    lo = F.array_min(F.transform(facts, lambda f: f["from_ms"]))
    hi = F.array_max(F.transform(facts, lambda f: f["to_ms"]))
    cuts = F.filter(F.transform(periods, lambda p: p["p_from"]), lambda t: (t > lo) & (t < hi))
    return F.concat(F.transform(facts, lambda f: f["from_ms"]), F.transform(facts, lambda f: f["to_ms"]), cuts)


def _segments_between(bounds: Column, facts: Column, periods: Column) -> Column:
    """Each pair of consecutive ``bounds`` as a segment, with the servers up on it and the facts covering it."""
    pairs = F.arrays_zip(
        F.slice(bounds, 1, F.size(bounds) - 1).alias("seg_from"), F.slice(bounds, 2, F.size(bounds) - 1).alias("seg_to")
    )
    return F.transform(
        pairs,
        lambda s: F.struct(
            s["seg_from"].alias("seg_from"),
            s["seg_to"].alias("seg_to"),
            F.get(covering_at(periods, s["seg_from"], "p_from", "p_to"), 0)["up_ns"].alias("up_ns"),
            covering_at(facts, s["seg_from"]).alias("covering"),
        ),
    )


def select_disagreeing_segments(keyed_df: DataFrame, periods_df: DataFrame, span: Span) -> DataFrame:
    """Every key's elementary segments on which the compared servers hold more than one view.

    Per key, with higher-order functions over its ``facts`` (no shuffle): the boundaries are every
    fact's ends and the up periods' boundaries inside the key's extent; each pair of consecutive
    boundaries is a segment; the facts covering it give each up server's view (:func:`_views`).
    Agreeing segments are dropped before the majority is worked out, and only disagreeing ones
    become rows.

    Args:
        keyed_df: :func:`jobs.analytics.divergence.facts.build_keyed_facts` rows.
        periods_df: :func:`jobs.analytics.divergence.up_periods.agg_up_periods` (one row).
        span: the comparison span.
    """
    facts, periods, bounds = F.col("facts"), F.col("periods"), F.col("_bounds")
    ends = _segment_ends(facts, periods)
    segments = _segments_between(bounds, facts, periods)
    viewed = F.transform(
        "_segments",
        lambda s: F.struct(
            s["seg_from"].alias("seg_from"),
            s["seg_to"].alias("seg_to"),
            s["up_ns"].alias("up_ns"),
            _views(F.col("kind"), s["covering"], s["up_ns"]).alias("views"),
        ),
    )
    disagreeing = F.filter(viewed, lambda s: F.exists(s["views"], lambda v: v["view"] != s["views"][0]["view"]))
    ranked = F.transform(
        "_disagreeing",
        lambda s: F.struct(
            s["seg_from"].alias("seg_from"),
            s["seg_to"].alias("seg_to"),
            s["up_ns"].alias("up_ns"),
            s["views"].alias("views"),
            _majority(s["views"]).alias("top"),
        ),
    )
    # one column per step: an array used several times is built once (Spark does not inline a
    # costly projection into several uses). No row filter on these columns: it would be pushed
    # into the cross join's condition and compute everything twice; explode drops empty arrays.
    return (
        keyed_df.crossJoin(broadcast(periods_df))
        .withColumn("_bounds", F.sort_array(F.array_distinct(ends)))
        .withColumn("_segments", segments)
        .withColumn("_disagreeing", disagreeing)
        .select(*KEY_COLUMNS, F.explode(F.transform(ranked, lambda s: _compare(s, span.day_start_ms))).alias("s"))
        .select(
            *KEY_COLUMNS,
            "s.seg_from",
            "s.seg_to",
            "s.views",
            "s.majority",
            "s.servers_up",
            "s.servers_wrong",
            "s.exposure",
            "s.critical",
        )
    )
