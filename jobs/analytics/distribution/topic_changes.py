"""Planned topic changes an operator should know of: ``topic_deleted`` (DELETE_TOPIC_IN_NAMESRV,
216, as each server applied it) and ``topic_route_changed`` (a topic new on a broker group, or its
queue numbers changed, by the group's master with a new data version).

Neither is a disagreement between servers: an admin deletes a topic on every server, and a master
sends its new topic table to every server, so the divergence stage sees nothing. Both come from
what each server applied: the ``delete_topic`` events, and the ``topic_route_history`` intervals
that begin while the group's master was already registered (a registration after a restart, an
expiry or a partition brings back the routes it had, and is no change).
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from common.timeutil import day_start_ms
from jobs.analytics.distribution.kinds import SEVERITY
from jobs.lake.findings import finding_columns
from jobs.spark.profile import broadcast
from nameserver.model import MASTER_ID

QUEUE_COLUMNS = ("read_queue_nums", "write_queue_nums", "topic_sys_flag")


def select_topic_deletes(events_df: DataFrame, topic_route_df: DataFrame) -> DataFrame:
    """``topic_deleted`` findings: one per ``delete_topic`` event (server, topic, instant).

    Severity ``warning`` when the server held a route of the topic before and none after (its
    producers and consumers lost the topic), ``info`` otherwise (a cluster's share of a topic
    that other clusters still serve, or a topic the server did not know).

    Args:
        events_df: the day's events (``ns``, ``ts_ms``, ``type``, ``topic``, ``cluster``,
            ``remote``).
        topic_route_df: the day's ``topic_route_history``.

    Example:
        ``topic-0014`` deleted for every cluster at 10:00:00.001 on ``ns-a``, which held it on
        two groups: a warning, ``ns-a``, 10:00:00.001, ``groups_before`` 2, ``groups_after`` 0.
    """
    deletes_df = events_df.where(F.col("type") == "delete_topic").select(
        "ns", "topic", "cluster", "remote", F.col("ts_ms").alias("_ms")
    )
    routes_df = topic_route_df.select(
        "ns",
        "topic",
        "broker_name",
        F.unix_millis("valid_from_ts").alias("_from"),
        F.unix_millis("valid_to_ts").alias("_to"),
    )
    d, r = deletes_df.alias("d"), routes_df.alias("r")
    # a QueueData the server held when the delete came (ended by it or not) / still held after it
    held = (F.col("r._from") < F.col("d._ms")) & (F.col("r._to").isNull() | (F.col("r._to") >= F.col("d._ms")))
    kept = held & (F.col("r._to").isNull() | (F.col("r._to") > F.col("d._ms")))
    joined_df = broadcast(d).join(r, (F.col("d.ns") == F.col("r.ns")) & (F.col("d.topic") == F.col("r.topic")), "left")
    counted_df = joined_df.groupBy("d.ns", "d.topic", "d.cluster", "d.remote", "d._ms").agg(
        F.count_distinct(F.when(held, F.col("r.broker_name"))).alias("groups_before"),
        F.count_distinct(F.when(kept, F.col("r.broker_name"))).alias("groups_after"),
    )
    lost = (F.col("groups_before") > 0) & (F.col("groups_after") == 0)
    at = F.timestamp_millis("_ms")
    return counted_df.select(
        *finding_columns(
            kind="topic_deleted",
            severity=F.when(lost, F.lit("warning")).otherwise(F.lit(SEVERITY["topic_deleted"])),
            subject=F.col("topic"),
            ns=F.col("ns"),
            start_ts=at,
            end_ts=at,
            detail={
                "cluster": F.col("cluster"),
                "remote": F.col("remote"),
                "groups_before": F.col("groups_before"),
                "groups_after": F.col("groups_after"),
            },
        )
    )


def select_topic_route_changes(topic_route_df: DataFrame, broker_addr_df: DataFrame, day: dt.date) -> DataFrame:
    """``topic_route_changed`` findings (info): one per (server, topic, group) QueueData interval
    that began on ``day`` and is a change: its queue numbers or topic flag differ from those of
    the interval it follows without a gap (``action`` ``queues``), or none precedes it and the
    group's master had been registered on that server since before it began (``create``).

    A perm change alone is no route change (``write_perm_wiped`` and the admin findings).

    Args:
        topic_route_df: the day's ``topic_route_history``.
        broker_addr_df: the day's ``broker_addr_history``.
        day: the UTC day.

    Example:
        ``topic-0003`` on ``broker-002`` from 8/8 to 16/16 queues at 10:00 on ``ns-a``: one
        finding, ``ns-a``, 10:00, ``action`` ``queues``, 8/8 before, 16/16 after.
    """
    candidates_df = _select_route_candidates(topic_route_df, day)
    masters_df = broker_addr_df.where(F.col("broker_id") == MASTER_ID).select(
        "ns",
        "broker_name",
        F.unix_millis("valid_from_ts").alias("_m_from"),
        F.unix_millis("valid_to_ts").alias("_m_to"),
    )
    c, m = candidates_df.alias("c"), masters_df.alias("m")
    registered = (
        (F.col("c.ns") == F.col("m.ns"))
        & (F.col("c.broker_name") == F.col("m.broker_name"))
        & (F.col("m._m_from") < F.col("c._from"))
        & (F.col("m._m_to").isNull() | (F.col("m._m_to") >= F.col("c._from")))
    )
    created_df = c.where(F.col("action") == "create").join(broadcast(m), registered, "left_semi")
    changes_df = c.where(F.col("action") == "queues").unionByName(created_df)
    at = F.timestamp_millis("_from")
    return changes_df.select(
        *finding_columns(
            kind="topic_route_changed",
            severity=SEVERITY["topic_route_changed"],
            subject=F.col("topic"),
            ns=F.col("ns"),
            start_ts=at,
            end_ts=at,
            detail={
                "broker_name": F.col("broker_name"),
                "action": F.col("action"),
                "read_queue_nums_before": F.col("_prev_read_queue_nums"),
                "write_queue_nums_before": F.col("_prev_write_queue_nums"),
                "read_queue_nums": F.col("read_queue_nums"),
                "write_queue_nums": F.col("write_queue_nums"),
            },
        )
    )


def _select_route_candidates(topic_route_df: DataFrame, day: dt.date) -> DataFrame:
    """The QueueData intervals that began on ``day`` and could be a change, with their ``action``
    (``queues``: they follow one with other queue numbers or flag without a gap; ``create``: they
    follow none without a gap)."""
    per_key = Window.partitionBy("ns", "topic", "broker_name").orderBy("_from")
    routes_df = topic_route_df.select(
        "ns",
        "topic",
        "broker_name",
        *QUEUE_COLUMNS,
        F.unix_millis("valid_from_ts").alias("_from"),
        F.unix_millis("valid_to_ts").alias("_to"),
    )
    for column in ("_to", *QUEUE_COLUMNS):
        routes_df = routes_df.withColumn(f"_prev_{column.lstrip('_')}", F.lag(column).over(per_key))
    follows = F.col("_prev_to") == F.col("_from")
    differs = ~F.coalesce(
        F.array(*[F.col(c) for c in QUEUE_COLUMNS]) == F.array(*[F.col(f"_prev_{c}") for c in QUEUE_COLUMNS]),
        F.lit(False),
    )
    return (
        routes_df.where(F.col("_from") >= day_start_ms(day))
        .where(~F.coalesce(follows, F.lit(False)) | differs)
        .withColumn("action", F.when(F.coalesce(follows, F.lit(False)), F.lit("queues")).otherwise(F.lit("create")))
    )
