"""Divergence between name servers: the intervals in which they answer differently (``ns_divergences``).

Name servers never talk to each other (semantics spec §7): each holds what the brokers told it, so
two servers may disagree for up to one registration period plus one scan period. Longer means
something is wrong. Four kinds of disagreement are measured, each per *key*:

* ``route_missing`` (topic): the topic has a QueueData on some up servers and none on others;
  clients pinned to those get "No route info of this topic". View: ``present`` / ``absent``.
* ``broker_missing`` (broker address): live (``liveness_windows``) on some up servers only. View:
  ``live`` / ``absent``.
* ``queue_data_mismatch`` (topic, broker name): the QueueData's ``read/write/perm/sysflag``
  (``8/8/6/0``) differs among the servers that have it, or is ``absent`` on a server that knows
  the topic and has a BrokerData of that name (the restart race, W20). A server that does not
  know the topic (that is ``route_missing``) or the broker name (broker-level) is not compared.
* ``broker_addrs_mismatch`` (broker name): the BrokerData's ``brokerAddrs`` differs, as canonical
  text ``{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}``, among the servers that have it.

Servers that are down (outside their ``ns_runs``) are left out. Everything is columnar. Each key
becomes one row holding its *facts* (per-server intervals of a value, a few dozen at most), and
higher-order functions over that array do the rest without a shuffle: the facts' ends and the
servers' up/down instants are the boundaries, consecutive boundaries make the key's elementary
segments, the facts covering a segment give each up server's view. Only disagreeing segments
(more than one view) become rows; those that touch form an episode (gaps and islands, a window
per key). Per episode:

* ``ns_views``: the views of the longest *stretch* of the episode, a stretch being consecutive
  segments with the same views and the same up servers (elementary segments are also cut by
  changes that do not touch the views, such as another broker's QueueData, so the longest
  elementary segment would be arbitrary). Ties go to the earliest. Keys are the compared servers
  only: up, and for the last two kinds knowing the topic and broker name; ``absent`` is a compared
  server without the value.
* ``servers_wrong`` / ``servers_up`` are those of the same stretch: compared servers not holding
  the majority view, and servers up (compared or not). The majority view is the most common one;
  a tie goes to a view that is not ``absent`` (the broker did register it), then to the greatest.
* ``exposure``: Σ over the episode's segments within the day of
  ``servers_wrong / servers_up × segment length`` (ms): the expected time a client pinned to a
  random up server saw a minority answer.

Days: history rows are clipped to their UTC day and ``valid_to_ts`` / ``end_ts`` null means still
valid at the day's end. An episode still open at the end of the day ends at the next midnight (the
next day's part then starts at 00:00 and touches it). The grace is judged on the whole
disagreement: the day before's rows of the last ``grace + 1`` ms are read as well, so an
episode that began shortly before midnight and is reported from 00:00 counts its time before
midnight towards the grace. (If the day before's part was shorter than the grace, that day has no
row for it and today's part stands alone.)

Grace (interfaces spec, ``audit.divergence_grace_ms``): disagreements lasting at most the grace
are propagation, not episodes. Unless configured it is the observed heartbeat period (median of
the day's per-window median refresh gaps) + the scan interval (the largest of the day's
``ns_start`` events) + ``audit.clock_skew_ms``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

import pandas as pd
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs import lake
from jobs.lake.tables import read_table, table_exists, write_table
from jobs.lake.findings import finding_columns, write_findings
from jobs.spark.frames import checkpoint_frame, local_frame, release_frame
from common.config import Config
from common.timeutil import DAY_MS, day_start_ms
from schemas.divergence import NS_DIVERGENCES_SCHEMA
from schemas.liveness import LIVENESS_WINDOWS_SCHEMA
from schemas.events import EVENTS_TABLE_SCHEMA
from schemas.routes import BROKER_ADDR_HISTORY_SCHEMA, NS_RUNS_SCHEMA, TOPIC_ROUTE_HISTORY_SCHEMA

ROUTE_MISSING = "route_missing"
BROKER_MISSING = "broker_missing"
QUEUE_DATA_MISMATCH = "queue_data_mismatch"
BROKER_ADDRS_MISMATCH = "broker_addrs_mismatch"
KINDS = (ROUTE_MISSING, BROKER_MISSING, QUEUE_DATA_MISMATCH, BROKER_ADDRS_MISMATCH)
ABSENT = "absent"
CATEGORY = "consistency"
FINDING_KIND = "ns_divergence"
REPORT_ROWS = 500
# parts of a composite key; RocketMQ topic and broker names never hold control characters
_KEY_SEP = "\u0001"

# one interval of a value on one server; ``layer`` says what it is (see the ``agg_*_facts``)
FACT_TYPE = T.StructType([
    T.StructField("ns", T.StringType()),
    T.StructField("from_ms", T.LongType()),
    T.StructField("to_ms", T.LongType()),
    T.StructField("layer", T.StringType()),
    T.StructField("sub", T.LongType()),
    T.StructField("value", T.StringType()),
])
_KEY_COLUMNS = ("kind", "key", "topic", "broker_name", "broker_addr")
KEYED_COLUMNS = (*_KEY_COLUMNS, "facts")
EPISODE_COLUMNS = (
    *_KEY_COLUMNS, "start_ms", "end_ms", "views", "majority", "servers_wrong", "servers_up", "exposure",
    "critical", "began_before_day",
)
REPORT_COLUMNS = ("kind", "subject", "start_ts", "end_ts", "duration_ms", "ns_views")


@dataclass(frozen=True)
class Grace:
    """The grace used for a day and where it came from.

    Attributes:
        grace_ms: disagreements lasting at most this long are not episodes.
        source: ``config`` (``audit.divergence_grace_ms``) or ``derived``.
        heartbeat_period_ms: observed median refresh gap, or the configured period when the
            day has none (derived grace only).
        scan_interval_ms: the day's largest ``ns_start`` scan interval, or the configured one.
        clock_skew_ms: ``audit.clock_skew_ms``.
    """

    grace_ms: int
    source: str
    heartbeat_period_ms: int | None = None
    scan_interval_ms: int | None = None
    clock_skew_ms: int | None = None


@dataclass(frozen=True)
class Span:
    """The instants a day's comparison covers, epoch ms: ``[start_ms, day_end_ms)``.

    ``start_ms`` reaches ``grace + 1`` ms into the day before, to see how long a disagreement
    that is ongoing at 00:00 has already lasted.
    """

    day: dt.date
    start_ms: int
    day_start_ms: int
    day_end_ms: int

    @classmethod
    def of(cls, day: dt.date, grace_ms: int) -> "Span":
        """The span of ``day`` for a grace of ``grace_ms``."""
        start = day_start_ms(day)
        return cls(day, start - grace_ms - 1, start, start + DAY_MS)


@dataclass(frozen=True)
class DivergenceResult:
    """What a day's divergence stage wrote.

    Attributes:
        day: the UTC day.
        grace: the grace used and how it was obtained.
        grace_ms: ``grace.grace_ms`` (a number for the stage's log line).
        episodes: ``ns_divergences`` rows written.
        episodes_by_kind: of those, per kind (kinds with none are absent).
        findings_by_severity: ``ns_divergence`` findings written, per severity.
        report_df: pandas frame for the report (:data:`REPORT_COLUMNS`, ``ns_views`` as text),
            longest first, at most :data:`REPORT_ROWS` rows.
        notes: lines for the report's headline (the grace used).
    """

    day: dt.date
    grace: Grace
    grace_ms: int
    episodes: int
    episodes_by_kind: dict[str, int] = field(default_factory=dict)
    findings_by_severity: dict[str, int] = field(default_factory=dict)
    report_df: pd.DataFrame | None = None
    notes: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------- grace


def agg_grace_inputs(windows_df: DataFrame, ns_start_df: DataFrame) -> DataFrame:
    """One row: ``heartbeat_period_ms`` (median of the windows' ``p50_gap_ms``) and
    ``scan_interval_ms`` (largest of the ``ns_start`` events'); each null when the day has none."""
    period_df = windows_df.agg(F.percentile_approx("p50_gap_ms", 0.5).cast(T.LongType()).alias("heartbeat_period_ms"))
    scan_df = ns_start_df.agg(F.max("scan_interval_ms").cast(T.LongType()).alias("scan_interval_ms"))
    return period_df.crossJoin(scan_df).select("heartbeat_period_ms", "scan_interval_ms")


def derive_grace(heartbeat_period_ms: int | None, scan_interval_ms: int | None, config: Config) -> Grace:
    """The grace for a day: the configured one, else observed period + scan interval + skew.

    Args:
        heartbeat_period_ms: observed median refresh gap; None falls back to
            ``audit.heartbeat_period_ms`` (30000 by default).
        scan_interval_ms: from the day's ``ns_start`` events; None falls back to
            ``nameserver.scan_interval_ms`` (10000 by default).
        config: the loaded configuration.

    Example:
        >>> derive_grace(30_012, 10_000, Config()).grace_ms  # + clock_skew_ms 2000
        42012
    """
    audit = config.audit
    if audit.divergence_grace_ms is not None:
        return Grace(int(audit.divergence_grace_ms), "config")
    period = int(heartbeat_period_ms) if heartbeat_period_ms is not None else audit.heartbeat_period_ms
    scan = int(scan_interval_ms) if scan_interval_ms is not None else config.nameserver.scan_interval_ms
    return Grace(period + scan + audit.clock_skew_ms, "derived", period, scan, audit.clock_skew_ms)


# ---------------------------------------------------------------------------- facts


def with_interval_ms(df: DataFrame, from_col: str, to_col: str, span: Span) -> DataFrame:
    """Add ``from_ms`` / ``to_ms`` clipped to the span; drop rows that end up empty.

    A null end means valid at the end of the row's ``date``: the next midnight.
    """
    row_day_end = (F.unix_date("date").cast(T.LongType()) + 1) * DAY_MS
    return (
        df.withColumn("from_ms", F.greatest(F.unix_millis(from_col), F.lit(span.start_ms)))
        .withColumn("to_ms", F.least(F.coalesce(F.unix_millis(to_col), row_day_end), F.lit(span.day_end_ms)))
        .where(F.col("from_ms") < F.col("to_ms"))
    )


def agg_union_intervals(df: DataFrame, group_cols: list[str]) -> DataFrame:
    """Per group, the union of its ``[from_ms, to_ms)`` intervals as disjoint islands.

    Touching intervals merge (a value replaced by another, or cut at midnight, is one island).

    Example:
        [0, 10), [10, 20), [5, 12), [30, 40) -> [0, 20), [30, 40).
    """
    ordered = Window.partitionBy(*group_cols).orderBy("from_ms", "to_ms")
    reach = F.max("to_ms").over(ordered.rowsBetween(Window.unboundedPreceding, -1))
    return (
        df.withColumn("_new", (reach.isNull() | (F.col("from_ms") > reach)).cast(T.IntegerType()))
        .withColumn("_island", F.sum("_new").over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
        .groupBy(*group_cols, "_island")
        .agg(F.min("from_ms").alias("from_ms"), F.max("to_ms").alias("to_ms"))
        .select(*group_cols, "from_ms", "to_ms")
    )


def _fact(layer: str, value: Column | None = None, sub: Column | None = None) -> Column:
    """One fact (:data:`FACT_TYPE`) from a row's ``ns``, ``from_ms`` and ``to_ms``."""
    return F.struct(
        F.col("ns").alias("ns"), F.col("from_ms").alias("from_ms"), F.col("to_ms").alias("to_ms"),
        F.lit(layer).alias("layer"), (sub if sub is not None else F.lit(None)).cast(T.LongType()).alias("sub"),
        (value if value is not None else F.lit(None)).cast(T.StringType()).alias("value"),
    )


def _keyed(df: DataFrame, kind: str, key_cols: tuple[str, ...]) -> DataFrame:
    """:data:`KEYED_COLUMNS` from a frame with the kind's key columns and ``facts``."""
    def key_part(name: str) -> Column:
        return (F.col(name) if name in key_cols else F.lit(None)).cast(T.StringType()).alias(name)

    return df.select(F.lit(kind).alias("kind"), F.concat_ws(_KEY_SEP, *key_cols).alias("key"), key_part("topic"),
                     key_part("broker_name"), key_part("broker_addr"), "facts")


def agg_topic_facts(queue_df: DataFrame) -> DataFrame:
    """Per topic, the islands in which each server has any QueueData of it (a route, §2.10), as
    ``facts`` of layer ``topic``."""
    presence_df = agg_union_intervals(queue_df.select("topic", "ns", "from_ms", "to_ms"), ["topic", "ns"])
    return presence_df.groupBy("topic").agg(F.collect_list(_fact("topic")).alias("facts"))


def agg_broker_data_facts(addr_df: DataFrame) -> DataFrame:
    """Per broker name, the islands in which each server has a BrokerData of it (some id in
    ``brokerAddrs``, invariant I2), as ``facts`` of layer ``broker``."""
    presence_df = agg_union_intervals(addr_df.select("broker_name", "ns", "from_ms", "to_ms"), ["broker_name", "ns"])
    return presence_df.groupBy("broker_name").agg(F.collect_list(_fact("broker")).alias("facts"))


def agg_broker_live_facts(windows_df: DataFrame) -> DataFrame:
    """``broker_missing`` keys: per address, its liveness windows on each server (layer ``live``)."""
    return _keyed(windows_df.groupBy("broker_addr").agg(F.collect_list(_fact("live")).alias("facts")),
                  BROKER_MISSING, ("broker_addr",))


def agg_queue_data_facts(queue_df: DataFrame, topic_facts_df: DataFrame, broker_facts_df: DataFrame) -> DataFrame:
    """``queue_data_mismatch`` keys: per (topic, broker name) of the history, its QueueData on each
    server (layer ``qd``, value ``read/write/perm/sysflag``), with the topic's presence and the
    broker name's BrokerData presence, which make a missing QueueData ``absent`` rather than not
    compared. Both are one small row per topic / broker name, so they are broadcast."""
    value = F.concat_ws("/", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag")
    empty = F.array().cast(T.ArrayType(FACT_TYPE))
    keyed_df = (
        queue_df.groupBy("topic", "broker_name").agg(F.collect_list(_fact("qd", value)).alias("_qd"))
        .join(F.broadcast(topic_facts_df.withColumnRenamed("facts", "_topic")), "topic", "left")
        .join(F.broadcast(broker_facts_df.withColumnRenamed("facts", "_broker")), "broker_name", "left")
        .withColumn("facts", F.concat("_qd", F.coalesce("_topic", empty), F.coalesce("_broker", empty)))
    )
    return _keyed(keyed_df, QUEUE_DATA_MISMATCH, ("topic", "broker_name"))


def agg_broker_addrs_facts(addr_df: DataFrame) -> DataFrame:
    """``broker_addrs_mismatch`` keys: per broker name, each ``brokerAddrs[id]`` cell on each server
    (layer ``addr``, ``sub`` the id, value the address)."""
    facts = F.collect_list(_fact("addr", F.col("broker_addr"), F.col("broker_id")))
    return _keyed(addr_df.groupBy("broker_name").agg(facts.alias("facts")), BROKER_ADDRS_MISMATCH, ("broker_name",))


def build_keyed_facts(queue_df: DataFrame, addr_df: DataFrame, windows_df: DataFrame, span: Span) -> DataFrame:
    """One row per key of every kind (:data:`KEYED_COLUMNS`) with its ``facts``, from
    ``topic_route_history``, ``broker_addr_history`` and ``liveness_windows`` rows (the day's and
    the day before's), clipped to the span."""
    queue_df = with_interval_ms(queue_df, "valid_from_ts", "valid_to_ts", span)
    addr_df = with_interval_ms(addr_df, "valid_from_ts", "valid_to_ts", span)
    windows_df = with_interval_ms(windows_df, "start_ts", "end_ts", span)
    topic_facts_df = agg_topic_facts(queue_df)
    return (
        _keyed(topic_facts_df, ROUTE_MISSING, ("topic",))
        .unionByName(agg_broker_live_facts(windows_df))
        .unionByName(agg_queue_data_facts(queue_df, topic_facts_df, agg_broker_data_facts(addr_df)))
        .unionByName(agg_broker_addrs_facts(addr_df))
    )


# ---------------------------------------------------------------------------- up servers


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
    points = F.sort_array(F.array_distinct(F.concat(
        F.transform(runs, lambda r: r["from_ms"]), F.transform(runs, lambda r: r["to_ms"]), edges)))
    pairs = F.arrays_zip(F.slice(points, 1, F.size(points) - 1).alias("p_from"),
                         F.slice(points, 2, F.size(points) - 1).alias("p_to"))
    periods = F.transform(pairs, lambda p: F.struct(
        p["p_from"].alias("p_from"),
        p["p_to"].alias("p_to"),
        F.sort_array(F.array_distinct(F.transform(_covering(runs, p["p_from"]), lambda r: r["ns"]))).alias("up_ns"),
    ))
    return (
        with_interval_ms(runs_df, "start_ts", "stop_ts", span)
        .agg(F.collect_list(F.struct("ns", "from_ms", "to_ms")).alias("runs"))
        .select(periods.alias("periods"))
    )


def _covering(array: Column, at: Column, lo: str = "from_ms", hi: str = "to_ms") -> Column:
    """The elements of ``array`` whose ``[lo, hi)`` contains ``at``."""
    return F.filter(array, lambda e: (e[lo] <= at) & (at < e[hi]))


# ---------------------------------------------------------------------------- segments


def _views(kind: Column, covering: Column, up_ns: Column) -> Column:
    """Each up server's view of a key on a segment, from the facts covering the segment: an array
    of struct ``ns``, ``view``, sorted by ns, without the servers that are not compared.

    One branch per kind, so a row evaluates only its own kind's expression.
    """
    def on(n: Column, layer: str | None = None) -> Column:
        return F.exists(covering, lambda f: (f["ns"] == n) & (F.lit(True) if layer is None else f["layer"] == layer))

    def per_server(view: Callable[[Column], Column]) -> Column:
        return F.filter(F.transform(up_ns, lambda n: F.struct(n.alias("ns"), view(n).alias("view"))),
                        lambda v: v["view"].isNotNull())

    def queue_data(n: Column) -> Column:
        value = F.get(F.filter(covering, lambda f: (f["ns"] == n) & (f["layer"] == "qd")), 0)["value"]
        return F.coalesce(value, F.when(on(n, "topic") & on(n, "broker"), F.lit(ABSENT)))

    def broker_addrs(n: Column) -> Column:
        # brokerAddrs in the standard JSON form: quoted numeric ids, ascending
        cells = F.sort_array(F.transform(F.filter(covering, lambda f: f["ns"] == n),
                                         lambda f: F.struct(f["sub"].alias("id"), f["value"].alias("addr"))))
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
    return F.array_max(F.transform(distinct, lambda d: F.struct(
        F.size(F.filter(views, lambda v: v["view"] == d)).alias("n"), (d != F.lit(ABSENT)).alias("held"),
        d.alias("view"),
    )))


def select_disagreeing_segments(keyed_df: DataFrame, periods_df: DataFrame, span: Span) -> DataFrame:
    """Every key's elementary segments on which the compared servers hold more than one view.

    Per key, with higher-order functions over its ``facts`` (no shuffle): the boundaries are every
    fact's ends and the up periods' boundaries inside the key's extent; each pair of consecutive
    boundaries is a segment; the facts covering it give each up server's view (:func:`_views`).
    Agreeing segments are dropped before the majority is worked out, and only disagreeing ones
    become rows.

    Args:
        keyed_df: :func:`build_keyed_facts` rows.
        periods_df: :func:`agg_up_periods` (one row).
        span: the comparison span.
    """
    facts, periods, bounds = F.col("facts"), F.col("periods"), F.col("_bounds")
    lo = F.array_min(F.transform(facts, lambda f: f["from_ms"]))
    hi = F.array_max(F.transform(facts, lambda f: f["to_ms"]))
    cuts = F.filter(F.transform(periods, lambda p: p["p_from"]), lambda t: (t > lo) & (t < hi))
    ends = F.concat(F.transform(facts, lambda f: f["from_ms"]), F.transform(facts, lambda f: f["to_ms"]), cuts)
    pairs = F.arrays_zip(F.slice(bounds, 1, F.size(bounds) - 1).alias("seg_from"),
                         F.slice(bounds, 2, F.size(bounds) - 1).alias("seg_to"))
    segments = F.transform(pairs, lambda s: F.struct(
        s["seg_from"].alias("seg_from"),
        s["seg_to"].alias("seg_to"),
        F.get(_covering(periods, s["seg_from"], "p_from", "p_to"), 0)["up_ns"].alias("up_ns"),
        _covering(facts, s["seg_from"]).alias("covering"),
    ))
    viewed = F.transform("_segments", lambda s: F.struct(
        s["seg_from"].alias("seg_from"), s["seg_to"].alias("seg_to"), s["up_ns"].alias("up_ns"),
        _views(F.col("kind"), s["covering"], s["up_ns"]).alias("views"),
    ))
    disagreeing = F.filter(viewed, lambda s: F.exists(s["views"], lambda v: v["view"] != s["views"][0]["view"]))
    ranked = F.transform("_disagreeing", lambda s: F.struct(
        s["seg_from"].alias("seg_from"), s["seg_to"].alias("seg_to"), s["up_ns"].alias("up_ns"),
        s["views"].alias("views"), _majority(s["views"]).alias("top"),
    ))
    # one column per step: an array used several times is built once (Spark does not inline a
    # costly projection into several uses). No row filter on these columns: it would be pushed
    # into the cross join's condition and compute everything twice; explode drops empty arrays.
    return (
        keyed_df.crossJoin(F.broadcast(periods_df))
        .withColumn("_bounds", F.sort_array(F.array_distinct(ends)))
        .withColumn("_segments", segments)
        .withColumn("_disagreeing", disagreeing)
        .select(*_KEY_COLUMNS, F.explode(F.transform(ranked, lambda s: _compare(s, span.day_start_ms))).alias("s"))
        .select(*_KEY_COLUMNS, "s.seg_from", "s.seg_to", "s.views", "s.majority", "s.servers_up", "s.servers_wrong",
                "s.exposure", "s.critical")
    )


# ---------------------------------------------------------------------------- episodes


def agg_episodes(disagree_df: DataFrame, span: Span, grace_ms: int) -> DataFrame:
    """Merge touching disagreeing segments into episodes longer than the grace that reach into the
    day (:data:`EPISODE_COLUMNS`).

    ``views``, ``majority``, ``servers_wrong`` and ``servers_up`` are those of the longest stretch
    (module docstring); ``start_ms`` is cut to 00:00 for an episode that began the day before
    (``began_before_day``), while the grace is judged on its whole length within the span.

    Example:
        Segments [0, 10 s) and [10 s, 50 s) disagreeing, [50 s, 60 s) agreeing, [60 s, 70 s)
        disagreeing, grace 40 s: one episode [0, 50 s); [60 s, 70 s) is too short.
    """
    by_key = Window.partitionBy("kind", "key").orderBy("seg_from")
    upto = by_key.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    prev_to = F.lag("seg_to").over(by_key)
    new_episode = prev_to.isNull() | (prev_to != F.col("seg_from"))
    new_stretch = new_episode | (F.lag("views").over(by_key) != F.col("views")) | (
        F.lag("servers_up").over(by_key) != F.col("servers_up"))
    stretches_df = (
        disagree_df.withColumn("_new_ep", new_episode.cast(T.IntegerType()))
        .withColumn("_new_st", new_stretch.cast(T.IntegerType()))
        .withColumn("_ep", F.sum("_new_ep").over(upto))
        .withColumn("_st", F.sum("_new_st").over(upto))
        .groupBy(*_KEY_COLUMNS, "_ep", "_st")
        .agg(
            F.min("seg_from").alias("_from"),
            F.max("seg_to").alias("_to"),
            F.first("views").alias("views"),
            F.first("majority").alias("majority"),
            F.first("servers_wrong").alias("servers_wrong"),
            F.first("servers_up").alias("servers_up"),
            F.sum("exposure").alias("exposure"),
            F.max("critical").alias("critical"),
        )
    )
    # longest stretch; among equals the earliest
    rank = F.struct((F.col("_to") - F.col("_from")).alias("len"), (-F.col("_from")).alias("early"))
    stretch = F.struct("views", "majority", "servers_wrong", "servers_up")
    return (
        stretches_df.groupBy(*_KEY_COLUMNS, "_ep")
        .agg(
            F.min("_from").alias("_start"),
            F.max("_to").alias("end_ms"),
            F.max_by(stretch, rank).alias("_longest"),
            F.round(F.sum("exposure"), 3).alias("exposure"),
            F.max("critical").alias("critical"),
        )
        .where((F.col("end_ms") - F.col("_start") > grace_ms) & (F.col("end_ms") > span.day_start_ms))
        .select(
            *_KEY_COLUMNS,
            F.greatest(F.col("_start"), F.lit(span.day_start_ms)).alias("start_ms"),
            "end_ms",
            F.col("_longest.views").alias("views"),
            F.col("_longest.majority").alias("majority"),
            F.col("_longest.servers_wrong").alias("servers_wrong"),
            F.col("_longest.servers_up").alias("servers_up"),
            "exposure",
            "critical",
            (F.col("_start") < span.day_start_ms).alias("began_before_day"),
        )
    )


def build_episodes(keyed_df: DataFrame, periods_df: DataFrame, day: dt.date, grace_ms: int) -> DataFrame:
    """Segments and episodes for one day (:data:`EPISODE_COLUMNS`).

    Args:
        keyed_df: :func:`build_keyed_facts` over :meth:`Span.of` ``(day, grace_ms)``.
        periods_df: :func:`agg_up_periods` over the same span.
        day: the UTC day.
        grace_ms: disagreements lasting at most this long are not episodes.
    """
    span = Span.of(day, grace_ms)
    return agg_episodes(select_disagreeing_segments(keyed_df, periods_df, span), span, grace_ms)


def select_divergences(episodes_df: DataFrame, day: dt.date) -> DataFrame:
    """``ns_divergences`` rows (:data:`NS_DIVERGENCES_SCHEMA`) of the episodes."""
    return episodes_df.select(
        F.lit(day).alias("date"),
        "kind",
        "topic",
        "broker_name",
        "broker_addr",
        F.timestamp_millis("start_ms").alias("start_ts"),
        F.timestamp_millis("end_ms").alias("end_ts"),
        (F.col("end_ms") - F.col("start_ms")).alias("duration_ms"),
        F.map_from_entries("views").alias("ns_views"),
        F.col("servers_wrong").cast(T.IntegerType()).alias("servers_wrong"),
        F.col("servers_up").cast(T.IntegerType()).alias("servers_up"),
        F.col("exposure").cast(T.DoubleType()).alias("exposure"),
    )


# ---------------------------------------------------------------------------- findings and report


def _subject() -> Column:
    """The topic (route_missing, queue_data_mismatch), broker address or broker name."""
    kind = F.col("kind")
    return (
        F.when(kind.isin(ROUTE_MISSING, QUEUE_DATA_MISMATCH), F.col("topic"))
        .when(kind == BROKER_MISSING, F.col("broker_addr"))
        .otherwise(F.col("broker_name"))
    )


def agg_divergence_findings(episodes_df: DataFrame, span: Span, grace: Grace) -> DataFrame:
    """One ``ns_divergence`` finding per episode: warning, critical when a route was missing on a
    majority of the up servers. ``detail``: kind, key, ns_views, majority, duration_ms, exposure,
    servers_wrong, servers_up, grace_ms (and how it was obtained), began_before_day,
    continues_next_day."""
    key = F.map_filter(
        F.create_map(F.lit("topic"), F.col("topic"), F.lit("broker_name"), F.col("broker_name"),
                     F.lit("broker_addr"), F.col("broker_addr")),
        lambda _, v: v.isNotNull(),
    )
    detail = F.struct(
        "kind",
        key.alias("key"),
        F.map_from_entries("views").alias("ns_views"),
        "majority",
        (F.col("end_ms") - F.col("start_ms")).alias("duration_ms"),
        "exposure",
        "servers_wrong",
        "servers_up",
        F.lit(grace.grace_ms).alias("grace_ms"),
        F.lit(grace.source).alias("grace_source"),
        "began_before_day",
        (F.col("end_ms") == span.day_end_ms).alias("continues_next_day"),
    )
    return episodes_df.select(
        *finding_columns(
            span.day, CATEGORY, FINDING_KIND,
            F.when(F.col("critical"), F.lit("critical")).otherwise(F.lit("warning")),
            _subject(), F.lit(None).cast(T.StringType()),
            F.timestamp_millis("start_ms"), F.timestamp_millis("end_ms"), detail,
        )
    )


def select_report_rows(episodes_df: DataFrame, limit: int = REPORT_ROWS) -> DataFrame:
    """The report's rows (:data:`REPORT_COLUMNS`), longest first, ``ns_views`` as
    ``ns-a=live, ns-b=absent``."""
    views_text = F.array_join(F.transform("views", lambda v: F.concat(v["ns"], F.lit("="), v["view"])), ", ")
    return (
        episodes_df.select(
            "kind", _subject().alias("subject"), F.timestamp_millis("start_ms").alias("start_ts"),
            F.timestamp_millis("end_ms").alias("end_ts"), (F.col("end_ms") - F.col("start_ms")).alias("duration_ms"),
            views_text.alias("ns_views"),
        )
        .orderBy(F.col("duration_ms").desc(), "kind", "subject", "start_ts")
        .limit(limit)
    )


# ---------------------------------------------------------------------------- the stage


def _read_days(spark: SparkSession, lake_dir: str, name: str, schema: T.StructType, days: list[dt.date]) -> DataFrame:
    path = lake.table_path(lake_dir, name)
    if not table_exists(path):
        return local_frame(spark, [], schema)
    return read_table(spark, path, schema, where={"date": days})


def resolve_grace(spark: SparkSession, lake_dir: str, day: dt.date, config: Config) -> Grace:
    """The day's grace (:func:`derive_grace`), reading the day's liveness windows and ``ns_start``
    events only when it is not configured."""
    if config.audit.divergence_grace_ms is not None:
        return derive_grace(None, None, config)
    windows_df = _read_days(spark, lake_dir, lake.LIVENESS_WINDOWS, LIVENESS_WINDOWS_SCHEMA, [day])
    events_df = _read_days(spark, lake_dir, lake.EVENTS, EVENTS_TABLE_SCHEMA, [day])
    starts_df = events_df.where(F.col("type") == "ns_start").select("scan_interval_ms")
    row = agg_grace_inputs(windows_df, starts_df).first()  # one row of two numbers
    return derive_grace(row["heartbeat_period_ms"], row["scan_interval_ms"], config)


def run_divergence(spark: SparkSession, lake_dir: str, day: dt.date, config: Config) -> DivergenceResult:
    """Compare the name servers for ``day``: replaces the day in ``ns_divergences`` and the day's
    ``consistency`` findings.

    Reads ``topic_route_history``, ``broker_addr_history``, ``ns_runs`` (from the rebuild) and
    ``liveness_windows`` (from the liveness stage) of the day and the day before.
    """
    grace = resolve_grace(spark, lake_dir, day, config)
    span = Span.of(day, grace.grace_ms)
    days = [day - dt.timedelta(days=1), day]
    keyed_df = build_keyed_facts(
        _read_days(spark, lake_dir, lake.TOPIC_ROUTE_HISTORY, TOPIC_ROUTE_HISTORY_SCHEMA, days),
        _read_days(spark, lake_dir, lake.BROKER_ADDR_HISTORY, BROKER_ADDR_HISTORY_SCHEMA, days),
        _read_days(spark, lake_dir, lake.LIVENESS_WINDOWS, LIVENESS_WINDOWS_SCHEMA, days),
        span,
    )
    periods_df = agg_up_periods(_read_days(spark, lake_dir, lake.NS_RUNS, NS_RUNS_SCHEMA, days), span)
    # small (one row per episode) and read four times below: computed once, cut from its plan
    episodes_df = checkpoint_frame(build_episodes(keyed_df, periods_df, day, grace.grace_ms))
    try:
        write_table(
            select_divergences(episodes_df, day), lake.table_path(lake_dir, lake.NS_DIVERGENCES), mode="overwrite",
            partition_by=["date"], replace_where={"date": day}, schema=NS_DIVERGENCES_SCHEMA, few_rows=True,
        )
        findings_df = agg_divergence_findings(episodes_df, span, grace)
        write_findings(findings_df, lake_dir, day, CATEGORY)
        # one small row per (kind, critical): the stage's log line
        counts = episodes_df.groupBy("kind", "critical").count().collect()
        report_df = select_report_rows(episodes_df).toPandas()
    finally:
        release_frame(episodes_df)
    by_kind: dict[str, int] = {}
    by_severity: dict[str, int] = {}
    for row in counts:
        by_kind[row["kind"]] = by_kind.get(row["kind"], 0) + row["count"]
        severity = "critical" if row["critical"] else "warning"
        by_severity[severity] = by_severity.get(severity, 0) + row["count"]
    return DivergenceResult(day, grace, grace.grace_ms, sum(by_kind.values()), by_kind, by_severity, report_df,
                            [grace_note(grace)])


def grace_note(grace: Grace) -> str:
    """One line saying which grace the day's divergences used.

    Example:
        >>> grace_note(Grace(42012, "derived", 30012, 10000, 2000))
        'divergence grace 42012 ms = heartbeat period 30012 + scan interval 10000 + clock skew 2000 (derived)'
    """
    if grace.source == "config":
        return f"divergence grace {grace.grace_ms} ms (audit.divergence_grace_ms)"
    return (f"divergence grace {grace.grace_ms} ms = heartbeat period {grace.heartbeat_period_ms} + scan interval "
            f"{grace.scan_interval_ms} + clock skew {grace.clock_skew_ms} (derived)")
