"""Exact findings: ``no_writable_queue``, ``single_broker_topic``, ``read_write_mismatch``,
``no_master`` and ``write_perm_wiped`` from the validity intervals themselves, not from the snapshot instants.

The input is the day's routes as pieces at millisecond resolution (:func:`agg_exact_pieces`:
:func:`jobs.snapshots.agg_route_pieces` with a 1 ms "interval", so a position is the millisecond
of the day, 0 = 00:00:00.000). Nothing is exploded: a topic's pieces are cut into segments over
which none of them starts or ends (:func:`jobs.snapshots.with_segments`), the condition is
checked once per segment, and touching segments where it holds make one run. A run starts at the
event that made the condition true and ends at the event that made it false (``end_ts``
exclusive), or at the next midnight when it still holds at the end of the day (``still_open``).
A master gap of 53 s between two snapshots is thus a 53 s finding.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from common.timeutil import DAY_MS, day_start_ms
from jobs.analytics.distribution.kinds import SEVERITY
from jobs.analytics.distribution.queue_data import sum_long
from jobs.lake.findings import finding_columns
from jobs.snapshots import agg_broker_data_runs, agg_route_pieces, with_segments
from jobs.spark.profile import broadcast
from nameserver.model import MASTER_ID

EXACT_KINDS = ("no_writable_queue", "read_write_mismatch", "single_broker_topic", "no_master", "write_perm_wiped")
WIPED_TOPICS_LISTED = 20  # a write_perm_wiped detail names at most this many topics
REGISTRATION_PERIOD_MS = 30_000  # a broker registers with every server this often (§2.1)
MS = 1  # the "snapshot interval" that makes every millisecond of the day a position


def agg_exact_broker_data_runs(broker_addr_df: DataFrame, day: dt.date) -> DataFrame:
    """:func:`jobs.snapshots.agg_broker_data_runs` at millisecond positions."""
    return agg_broker_data_runs(broker_addr_df, day, MS)


def agg_exact_pieces(topic_route_df: DataFrame, exact_runs_df: DataFrame, day: dt.date) -> DataFrame:
    """The day's routes as pieces at millisecond positions: ``first_pos`` is the millisecond of the
    day the piece starts at, ``last_pos`` the last millisecond it holds (``DAY_MS - 1`` when it is
    still valid at the end of the day). Pieces that held for no millisecond are never rows.

    Args:
        topic_route_df: the day's ``topic_route_history``.
        exact_runs_df: :func:`agg_exact_broker_data_runs` of the day's ``broker_addr_history``.
        day: the UTC day.
    """
    return agg_route_pieces(topic_route_df, exact_runs_df, day, MS)


def agg_exact_runs(
    segments_df: DataFrame, keys: Sequence[str], day: dt.date, details: Sequence[str] = ("detail",)
) -> DataFrame:
    """Merge touching segments (``first_pos``, ``last_pos`` in ms of the day) of each key into runs.

    Args:
        segments_df: the segments where a condition holds: ``keys``, ``first_pos``, ``last_pos``
            and the columns ``details``; the segments of one key do not overlap.
        keys: what a run is of.
        day: the UTC day.
        details: the columns whose value on the run's last segment the run keeps.

    Returns:
        One row per run: ``keys``, ``start_ts``, ``end_ts`` (exclusive: the instant the condition
        stopped holding; the next midnight when it still holds at the end of the day),
        ``duration_ms``, ``still_open``, ``last_pos`` and the ``details`` of its last segment.

    Example:
        Segments 0-999 and 1000-1999 (touching) and 5000-5999 of one key: runs 00:00:00.000 to
        00:00:02.000 and 00:00:05.000 to 00:00:06.000.
    """
    by_pos = Window.partitionBy(*keys).orderBy("first_pos")
    start = day_start_ms(day)
    continues = F.coalesce(F.lag("last_pos").over(by_pos) + 1 == F.col("first_pos"), F.lit(False))
    return (
        segments_df.withColumn("_new", F.when(continues, 0).otherwise(1))
        .withColumn("_run", F.sum("_new").over(by_pos.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
        .groupBy(*keys, "_run")
        .agg(
            F.min("first_pos").alias("first_pos"),
            F.max("last_pos").alias("last_pos"),
            *[F.max_by(c, "first_pos").alias(c) for c in details],
        )
        .select(
            *keys,
            F.timestamp_millis(F.col("first_pos") + start).alias("start_ts"),
            F.timestamp_millis(F.col("last_pos") + 1 + start).alias("end_ts"),
            (F.col("last_pos") + 1 - F.col("first_pos")).alias("duration_ms"),
            (F.col("last_pos") >= DAY_MS - 1).alias("still_open"),
            "last_pos",
            *details,
        )
    )


def agg_exact_topic_conditions(topic_segments_df: DataFrame, flagged_df: DataFrame) -> dict[str, DataFrame]:
    """Per exact kind, the segments (``ns``, ``subject``, ``first_pos``, ``last_pos``, ``detail``)
    where its condition holds.

    Args:
        topic_segments_df: :func:`jobs.analytics.distribution.topics.agg_topic_segments` of the
            millisecond pieces.
        flagged_df: :func:`jobs.analytics.distribution.queue_data.with_queue_flags` of the
            millisecond pieces (for ``read_write_mismatch``, whose detail names the QueueData).
    """

    def topic_rows(where: Column, *detail: str) -> DataFrame:
        return topic_segments_df.where(where).select(
            "ns", F.col("topic").alias("subject"), "first_pos", "last_pos", F.struct(*detail).alias("detail")
        )

    mismatch_df = (
        with_segments(flagged_df.where(F.col("unread_write_queues") > 0), ["ns", "topic"])
        .groupBy("ns", "topic", "seg_first", "seg_last")
        .agg(
            sum_long("unread_write_queues").alias("unread_write_queues"),
            F.array_sort(F.collect_list(F.struct("broker_name", "read_queue_nums", "write_queue_nums"))).alias(
                "queue_datas"
            ),
        )
        .select(
            "ns",
            F.col("topic").alias("subject"),
            F.col("seg_first").alias("first_pos"),
            F.col("seg_last").alias("last_pos"),
            F.struct("unread_write_queues", "queue_datas").alias("detail"),
        )
    )
    return {
        # a producer gets no queue from the route (§3); a topic none of whose QueueData may be read
        # or written is out of service by its configuration (RocketMQ 5 brokers register
        # rmq_sys_SYNC_BROKER_MEMBER_<broker> with perm 1), not a producer's dead end
        "no_writable_queue": topic_rows(
            (F.col("publish_queues") == 0) & ((F.col("writable_brokers") > 0) | (F.col("readable_brokers") > 0)),
            "brokers",
            "brokers_with_master",
            "writable_brokers",
            "write_queues",
        ),
        "read_write_mismatch": mismatch_df,
        "single_broker_topic": topic_rows(F.col("brokers") == 1, "read_queues", "write_queues", "publish_queues"),
    }


def agg_exact_kind_runs(conditions: Mapping[str, DataFrame], day: dt.date) -> DataFrame:
    """:func:`agg_exact_runs` of every kind's segments at once (one window for all kinds).

    Each kind's ``detail`` keeps its own type in a column of its own (``_detail_<kind>``, null on
    the other kinds' rows); :func:`select_exact_kind_runs` takes one kind's runs back out.

    Args:
        conditions: kind -> its segments (``ns``, ``subject``, ``first_pos``, ``last_pos``, ``detail``).
        day: the UTC day.
    """
    types = {kind: df.schema["detail"].dataType for kind, df in conditions.items()}
    merged_df: DataFrame | None = None
    for kind, condition_df in conditions.items():
        rows_df = condition_df.select(
            F.lit(kind).alias("kind"),
            "ns",
            "subject",
            "first_pos",
            "last_pos",
            *[
                (F.col("detail") if other == kind else F.lit(None).cast(types[other])).alias(f"_detail_{other}")
                for other in conditions
            ],
        )
        merged_df = rows_df if merged_df is None else merged_df.unionByName(rows_df)
    assert merged_df is not None, "no exact kinds"
    return agg_exact_runs(merged_df, ("kind", "ns", "subject"), day, [f"_detail_{kind}" for kind in conditions])


def select_exact_kind_runs(kind_runs_df: DataFrame, kind: str) -> DataFrame:
    """The :func:`agg_exact_runs` rows of one ``kind`` of :func:`agg_exact_kind_runs`."""
    return kind_runs_df.where(F.col("kind") == kind).select(
        "ns",
        "subject",
        "start_ts",
        "end_ts",
        "duration_ms",
        "still_open",
        "last_pos",
        F.col(f"_detail_{kind}").alias("detail"),
    )


def agg_exact_no_master(exact_runs_df: DataFrame) -> DataFrame:
    """``no_master`` segments: a BrokerData without id 0 (its QueueData give producers nothing,
    §3; consumers may still read from the slaves), with its ``cluster`` and ``addrs`` (id ->
    address). A BrokerData created without its master that gets it within
    ``REGISTRATION_PERIOD_MS`` is a group starting (its slave registered first), not a finding.

    Args:
        exact_runs_df: :func:`agg_exact_broker_data_runs` (runs of one BrokerData value; null
            ``broker_addrs`` where the name has none).
    """
    lacks_master = (
        F.col("broker_addrs").isNotNull()
        & (F.size("broker_addrs") > 0)
        & ~F.map_contains_key("broker_addrs", F.lit(MASTER_ID).cast("long"))
    )
    # a group whose slave registers a moment before its master (a start, not a loss): the
    # BrokerData is new and the master follows within a registration period
    previous = F.lag("broker_addrs").over(Window.partitionBy("ns", "broker_name").orderBy("first_pos"))
    starting = (
        previous.isNull()
        & (F.col("last_pos") + 1 - F.col("first_pos") < REGISTRATION_PERIOD_MS)
        & (F.col("last_pos") < DAY_MS - 1)
    )
    return (
        exact_runs_df.withColumn("_starting", starting)
        .where(lacks_master & ~F.col("_starting"))
        .select(
            "ns",
            F.col("broker_name").alias("subject"),
            "first_pos",
            "last_pos",
            F.struct("cluster", F.col("broker_addrs").alias("addrs")).alias("detail"),
        )
    )


def agg_exact_write_perm_wiped(flagged_df: DataFrame, previous_flagged_df: DataFrame) -> DataFrame:
    """``write_perm_wiped`` segments per (ns, broker name).

    A QueueData without ``perm & 2`` counts over the whole of its piece when the same (ns, topic,
    broker name) was writable before it (today, or at the end of the day before), and over the
    part of it where the same (topic, broker name) is writable on another server. The pieces of
    one (ns, topic, broker name) never overlap, so "before" is a comparison of piece starts, and
    the other servers' writable pieces are intersected with it, never exploded.
    WIPE_WRITE_PERM_OF_BROKER (205) changes one server only; a topic that is read-only everywhere
    and always is a choice, not a wipe.

    Args:
        flagged_df: :func:`jobs.analytics.distribution.queue_data.with_queue_flags` of the
            millisecond pieces.
        previous_flagged_df: the same for the day before's last instant, at position -1.

    Example:
        broker-a's t1 writable on ns-a from 00:00 and wiped at 10:00:00.001 (205), added back at
        10:20: a segment 10:00:00.001-10:20 of ns-a, ``writable_earlier`` 1.
    """
    keys = ["ns", "topic", "broker_name"]
    wiped_df = flagged_df.where(~F.col("writable")).select(*keys, "cluster", "first_pos", "last_pos")
    # only (topic, group) cells that lack the write bit somewhere: at most as many as QueueData
    suspects_df = broadcast(wiped_df.select("topic", "broker_name").distinct())
    writable_df = (
        flagged_df.unionByName(previous_flagged_df)
        .where("writable")
        .join(suspects_df, ["topic", "broker_name"], "left_semi")
        .select(*keys, "first_pos", "last_pos")
    )
    first_writable_df = writable_df.groupBy(*keys).agg(F.min("first_pos").alias("_first_writable"))
    earlier_df = (
        wiped_df.join(first_writable_df, keys)
        .where(F.col("_first_writable") < F.col("first_pos"))
        .select(
            *keys,
            "cluster",
            "first_pos",
            "last_pos",
            F.lit(True).alias("earlier"),
            F.lit(None).cast("string").alias("writable_on"),
        )
    )
    elsewhere_df = _select_wiped_elsewhere(wiped_df, writable_df)
    return _agg_wiped_segments(earlier_df.unionByName(elsewhere_df))


def _select_wiped_elsewhere(wiped_df: DataFrame, writable_df: DataFrame) -> DataFrame:
    """The parts of the wiped pieces where the same (topic, broker name) is writable on another server."""
    w, o = wiped_df.alias("w"), writable_df.alias("o")
    overlap = (
        (F.col("w.topic") == F.col("o.topic"))
        & (F.col("w.broker_name") == F.col("o.broker_name"))
        & (F.col("w.ns") != F.col("o.ns"))
        & (F.col("o.first_pos") <= F.col("w.last_pos"))
        & (F.col("o.last_pos") >= F.col("w.first_pos"))
    )
    return w.join(o, overlap).select(
        "w.ns",
        "w.topic",
        "w.broker_name",
        "w.cluster",
        F.greatest("w.first_pos", "o.first_pos").alias("first_pos"),
        F.least("w.last_pos", "o.last_pos").alias("last_pos"),
        F.lit(False).alias("earlier"),
        F.col("o.ns").alias("writable_on"),
    )


def _agg_wiped_segments(wiped_parts_df: DataFrame) -> DataFrame:
    """The wiped parts (earlier writable or writable elsewhere) as segments per (ns, broker name)."""
    group = ["ns", "broker_name"]
    return (
        with_segments(wiped_parts_df, group)
        .groupBy(*group, "seg_first", "seg_last")
        .agg(
            F.min("cluster").alias("cluster"),
            F.count_distinct("topic").alias("topics"),
            F.count_distinct(F.when(F.col("writable_on").isNotNull(), F.col("topic"))).alias(
                "writable_on_other_servers"
            ),
            F.count_distinct(F.when(F.col("earlier"), F.col("topic"))).alias("writable_earlier"),
            F.array_sort(F.collect_set("writable_on")).alias("writable_on"),
            F.slice(F.array_sort(F.collect_set("topic")), 1, WIPED_TOPICS_LISTED).alias("topics_listed"),
        )
        .select(
            "ns",
            F.col("broker_name").alias("subject"),
            F.col("seg_first").alias("first_pos"),
            F.col("seg_last").alias("last_pos"),
            F.struct(
                "cluster", "topics", "writable_on_other_servers", "writable_earlier", "writable_on", "topics_listed"
            ).alias("detail"),
        )
    )


def with_last_queue_datas(runs_df: DataFrame, flagged_df: DataFrame) -> DataFrame:
    """Add to the ``detail`` of topic runs the topic's QueueData at the run's last millisecond
    (``broker_name``, ``cluster``, ``perm``, queue numbers, ``has_master``; by broker name)."""
    # a row per finding: few enough to broadcast
    keys_df = broadcast(
        runs_df.select(
            F.col("ns").alias("_ns"), F.col("subject").alias("_topic"), F.col("last_pos").alias("_last")
        ).distinct()
    )
    covers = (
        (F.col("ns") == F.col("_ns"))
        & (F.col("topic") == F.col("_topic"))
        & (F.col("_last").between(F.col("first_pos"), F.col("last_pos")))
    )
    queue_datas_df = (
        flagged_df.join(keys_df, covers)
        .groupBy("_ns", "_topic", "_last")
        .agg(
            F.array_sort(
                F.collect_list(
                    F.struct("broker_name", "cluster", "perm", "read_queue_nums", "write_queue_nums", "has_master")
                )
            ).alias("queue_datas")
        )
        .select(
            F.col("_ns").alias("ns"), F.col("_topic").alias("subject"), F.col("_last").alias("last_pos"), "queue_datas"
        )
    )
    return (
        runs_df.join(queue_datas_df, ["ns", "subject", "last_pos"], "left")
        .withColumn("detail", F.struct("detail.*", "queue_datas"))
        .drop("queue_datas")
    )


def select_exact_findings(runs_df: DataFrame, kind: str) -> DataFrame:
    """Finding rows (``jobs.lake.findings`` columns) of ``kind`` from :func:`agg_exact_runs` rows;
    the JSON detail is ``duration_ms`` and ``still_open`` followed by the fields of ``detail``."""
    return runs_df.select(
        *finding_columns(
            kind=kind,
            severity=SEVERITY[kind],
            subject=F.col("subject"),
            ns=F.col("ns"),
            start_ts=F.col("start_ts"),
            end_ts=F.col("end_ts"),
            detail=F.struct(F.col("duration_ms"), F.col("still_open"), F.col("detail.*")),
        )
    )
