"""What each finding is evidence of: its *cause key* (a family and a key within it), the servers it
concerns and its span in epoch ms, all read from its columns and its JSON ``detail``.

Families (docs/audit.md, "Incidents"):

- ``broker`` (key: broker name): liveness of the group's addresses (as observed too), their
  ``ns_divergence`` episodes (``broker_missing``, ``broker_addrs_mismatch``, ``queue_data_mismatch``)
  and ``observed_broker_missing``, ``no_master``, ``write_perm_wiped``, and a ``no_writable_queue``
  whose topic lost its queues on that group (no master there, or no write perm);
- ``topic`` (key: topic): a ``route_missing`` episode, a ``no_writable_queue`` of no group's doing,
  ``topic_deleted``, ``topic_route_changed``, ``topic_perm_changed``, and a ``topic_unroutable``
  that a delete of the topic caused (:func:`with_unroutable_causes`); one that the loss of the
  topic's last broker group caused is that group's (``broker``), one that a restart caused the
  server's;
- ``server`` (key: server id): ``ns_restart``, ``observed_server_down`` and the telemetry findings,
  and what the server lacked just after its restart (:func:`with_restart_causes`);
- ``layout`` (key: ``read_lt_write:<topic>``, ``queue_skew:<cluster>``, ``single_broker_topic``):
  configuration present all day;
- anything else is its own family (the kind), keyed by subject; the first-day name findings
  (``new_cluster``, ``new_broker_name``) are one key each.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from common.timeutil import day_start_ms
from jobs.spark.profile import broadcast
from nameserver.model import PERM_WRITE

# the fields of the details that say what a finding is about (absent fields parse as null)
DETAIL_FIELDS = T.StructType(
    [
        T.StructField("broker_name", T.StringType()),
        T.StructField("broker_id", T.LongType()),
        T.StructField("kind", T.StringType()),
        T.StructField("key", T.MapType(T.StringType(), T.StringType())),
        T.StructField("ns_views", T.MapType(T.StringType(), T.StringType())),
        T.StructField("majority", T.StringType()),
        T.StructField("write_queues", T.LongType()),
        T.StructField("tables_emptied", T.BooleanType()),
        T.StructField("up_servers", T.ArrayType(T.StringType())),
        T.StructField(
            "queue_datas",
            T.ArrayType(
                T.StructType(
                    [
                        T.StructField("broker_name", T.StringType()),
                        T.StructField("perm", T.IntegerType()),
                        T.StructField("has_master", T.BooleanType()),
                    ]
                )
            ),
        ),
    ]
)

# liveness findings about a broker address (subject), whose detail names its broker
ADDRESS_KINDS = ("broker_expired", "broker_unregistered", "late_expiry", "broker_flapping", "observed_broker_gone")
# about a broker name (the subject)
NAME_KINDS = (
    "no_master",
    "write_perm_wiped",
    "queue_data_without_broker",
    "broker_in_two_clusters",
    "observed_broker_missing",
)
BROKER_KINDS = ADDRESS_KINDS + NAME_KINDS
TOPIC_KINDS = ("topic_deleted", "topic_route_changed", "topic_perm_changed")
UNROUTABLE = "topic_unroutable"  # a topic no live server routes: see with_unroutable_causes
RESTART_KINDS = ("ns_restart", "observed_server_down")
SERVER_KINDS = RESTART_KINDS + ("seq_gap", "clock_step_back", "quarantined_lines", "duplicate_events")
FLEET_KINDS = ("new_cluster", "new_broker_name")  # the first day names every group: one key each


def with_detail_fields(findings_df: DataFrame) -> DataFrame:
    """Add ``_d``: :data:`DETAIL_FIELDS` parsed from ``detail``."""
    return findings_df.withColumn("_d", F.from_json("detail", DETAIL_FIELDS))


def _culprit_group() -> Column:
    """The group a ``no_writable_queue`` topic lost its queues on: the first (by name) of its
    QueueData without a master or without write perm; null when every one has both (then the
    queues are 0)."""
    lost = F.filter(
        "_d.queue_datas",
        lambda q: (
            ~F.coalesce(q["has_master"], F.lit(False)) | (F.coalesce(q["perm"], F.lit(0)).bitwiseAND(PERM_WRITE) == 0)
        ),
    )
    return F.array_min(F.transform(lost, lambda q: q["broker_name"]))


def with_cause(findings_df: DataFrame, addr_names_df: DataFrame) -> DataFrame:
    """Add ``family`` and ``cause_key`` (both never null).

    Args:
        findings_df: :func:`with_detail_fields` rows.
        addr_names_df: ``broker_addr``, ``addr_broker_name``: the broker name of each address of
            the day (one per address), for the findings that name an address only.

    Example:
        A ``broker_expired`` of ``10.0.3.1:10911`` whose detail says ``broker-003``: ``broker`` /
        ``broker-003``. A ``route_missing`` episode of ``topic-0014``: ``topic`` / ``topic-0014``.
    """
    kind, subject, d = F.col("kind"), F.col("subject"), F.col("_d")
    episode = d["kind"]
    named = F.coalesce(d["broker_name"], F.col("addr_broker_name"))
    culprit = _culprit_group()
    family = (
        # the group whose QueueData went last, when the divergence stage could name it
        F.when(kind == UNROUTABLE, F.when(d["broker_name"].isNotNull(), F.lit("broker")).otherwise(F.lit("topic")))
        .when(kind.isin(*BROKER_KINDS), F.lit("broker"))
        .when((kind == "ns_divergence") & (episode == "route_missing"), F.lit("topic"))
        .when(kind.isin(*TOPIC_KINDS), F.lit("topic"))
        .when(kind == "ns_divergence", F.lit("broker"))
        .when(kind == "no_writable_queue", F.when(culprit.isNotNull(), F.lit("broker")).otherwise(F.lit("topic")))
        .when(kind.isin(*SERVER_KINDS), F.lit("server"))
        .when(kind.isin("read_write_mismatch", "queue_skew", "single_broker_topic"), F.lit("layout"))
        .otherwise(kind)
    )
    key = (
        F.when(kind == UNROUTABLE, F.coalesce(d["broker_name"], subject))
        .when(kind == "observed_broker_missing", F.coalesce(d["broker_name"], subject))
        .when(kind.isin(*NAME_KINDS), subject)
        .when(kind.isin(*ADDRESS_KINDS), named)
        .when((kind == "ns_divergence") & (episode == "route_missing"), subject)
        .when(kind.isin(*TOPIC_KINDS), subject)
        .when((kind == "ns_divergence") & (episode == "broker_missing"), F.col("addr_broker_name"))
        .when(kind == "ns_divergence", d["key"]["broker_name"])
        .when(kind == "no_writable_queue", F.coalesce(culprit, subject))
        .when(kind == "read_write_mismatch", F.concat(F.lit("read_lt_write:"), subject))
        .when(kind == "queue_skew", F.concat(F.lit("queue_skew:"), subject))
        .when(kind == "single_broker_topic", F.lit("single_broker_topic"))
        .when(kind.isin(*FLEET_KINDS), F.lit("fleet"))
    )
    addr = F.coalesce(d["key"]["broker_addr"], F.when(kind.isin(*ADDRESS_KINDS), subject))
    names_df = broadcast(addr_names_df.withColumnRenamed("broker_addr", "_addr"))
    return (
        findings_df.withColumn("_addr", addr)
        .join(names_df, "_addr", "left")
        # a name the day's history does not know (a stray address): the address is the key
        .withColumn("family", family)
        .withColumn("cause_key", F.coalesce(key, F.col("_addr"), subject))
        .drop("_addr", "addr_broker_name")
    )


def with_servers(findings_df: DataFrame) -> DataFrame:
    """Add ``servers``: the finding's ``ns``; for a divergence episode (no ``ns``), the servers
    whose view was not the majority's (all compared servers when none stands out); for a
    ``topic_unroutable``, every server up then (each answered TOPIC_NOT_EXIST)."""
    views = F.col("_d")["ns_views"]
    minority = F.map_keys(F.map_filter(views, lambda _, v: v != F.col("_d")["majority"]))
    compared = F.coalesce(F.map_keys(views), F.array().cast("array<string>"))
    return findings_df.withColumn(
        "servers",
        F.when(F.col("ns").isNotNull(), F.array("ns"))
        .when(F.col("kind") == UNROUTABLE, F.coalesce(F.col("_d")["up_servers"], compared))
        .when(F.size(minority) > 0, minority)
        .otherwise(compared),
    )


# kinds checked at the snapshot instants: the condition may have begun up to one interval earlier
SAMPLED_KINDS = ("queue_skew", "queue_data_without_broker", "broker_in_two_clusters", "addr_in_two_groups")
# kinds whose evidence is the event at their end: a clean unregister ends a window that began
# with the registration, and a flapping address's last window end is its latest trouble
AT_END_KINDS = ("broker_unregistered", "broker_flapping")


def with_span_ms(findings_df: DataFrame, day: dt.date, snapshot_interval_ms: int) -> DataFrame:
    """Add ``start_ms`` and ``end_ms``: when the finding is evidence of its cause; and
    ``event_ms``, when what it saw began (``start_ms`` but for the widening below).

    That is its span, a point when it has one end only and 00:00 of the day when it has none (a
    finding about the day as a whole); the end alone for :data:`AT_END_KINDS`; and from one
    snapshot interval before its first instant for :data:`SAMPLED_KINDS`.

    Example:
        A ``broker_unregistered`` of a window 00:00-10:00: 10:00-10:00. A ``queue_skew`` at the
        instants 10:05-10:20 with a 5-minute interval: 10:00-10:20.
    """
    start, end = F.unix_millis("start_ts"), F.unix_millis("end_ts")
    midnight = F.lit(day_start_ms(day)).cast("long")
    first, last = F.coalesce(start, end, midnight), F.coalesce(end, start, midnight)
    kind = F.col("kind")
    first = F.when(kind.isin(*AT_END_KINDS), last).otherwise(first)
    widened = F.when(kind.isin(*SAMPLED_KINDS), F.greatest(F.col("event_ms") - snapshot_interval_ms, midnight))
    return (
        findings_df.withColumn("event_ms", first)
        .withColumn("start_ms", F.coalesce(widened, F.col("event_ms")))
        .withColumn("end_ms", F.greatest(last, first))
    )


# what a restarted server lacks until the brokers register with it again: episodes of that server
# alone; and findings of it: what the shadow has that it lacks, a group's QueueData shown before
# its master's BrokerData (the live judge's are nameserver.collect.live.returns.RESTART_LOSSES)
RESTART_EPISODES = ("route_missing", "broker_missing")
RESTART_FINDINGS = ("observed_broker_missing", "no_writable_queue", "no_master")


def with_restart_causes(findings_df: DataFrame, gap_ms: int) -> DataFrame:
    """Move what a server lacked after its restart to the ``server`` family of that server: a
    ``route_missing`` or ``broker_missing`` episode of that server alone, or its
    ``observed_broker_missing``, ``no_writable_queue`` or ``no_master`` (a group's QueueData shown
    before its master's BrokerData), that began within ``gap_ms`` of its restart (the end of an
    ``ns_restart``, or of an ``observed_server_down``: an observed server back from an outage),
    unless the server already lacked the same topic or broker when the restart began: then it goes
    on as that one began (a partition that goes on stays with its cause; what a restart left
    lacking, after a later restart too, with the restarts).

    A restart empties the server's tables and every broker registers again at its next period; a
    group whose master is gone at that moment registers its slave only, which carries no routes,
    while the other servers keep the group's QueueData: the topic or broker is missing on the
    restarted server alone until it registers. That is the restart's impact, not a fault of the
    topic or the broker.

    Args:
        findings_df: :func:`with_servers` and :func:`with_span_ms` rows with their cause.
        gap_ms: how long after the restart an episode may begin.

    Example:
        ``ns-a`` back at 14:50:53 after a restart, ``topic-0010`` missing on ``ns-a`` alone from
        14:50:53 to midnight: the episode is ``server`` / ``ns-a``, in the restart's incident. A
        broker missing on ``ns-a`` from 14:00 until its stop at 14:50 and again after: its own.
        Missing from a restart at 15:00 and again after another at 17:00: both the restarts'.
    """
    kind, episode = F.col("kind"), F.col("_d")["kind"]
    lost = ((kind == "ns_divergence") & episode.isin(*RESTART_EPISODES) & (F.size("servers") == 1)) | (
        kind.isin(*RESTART_FINDINGS) & F.col("ns").isNotNull()
    )
    # one condition of one server: the kind, the episode's kind, the subject and the server
    condition = [kind, F.coalesce(episode, F.lit("")), F.col("subject"), F.col("servers")[0]]
    losses_df = findings_df.where(lost).select(
        "finding_id", "event_ms", "end_ms", *(c.alias(f"_l{i}") for i, c in enumerate(condition))
    )
    restarts_df = broadcast(
        findings_df.where(kind.isin(*RESTART_KINDS)).select(
            F.col("ns").alias("_r_ns"), F.col("start_ms").alias("_r_start"), F.col("end_ms").alias("_r_end")
        )
    )
    moved_df = _losses_to_move(losses_df, restarts_df, len(condition), gap_ms)
    moved = F.coalesce(F.col("_after_restart"), F.lit(False))
    return (
        findings_df.join(moved_df, "finding_id", "left")
        .withColumn("family", F.when(moved, F.lit("server")).otherwise(F.col("family")))
        .withColumn("cause_key", F.when(moved, F.col("servers")[0]).otherwise(F.col("cause_key")))
        .drop("_after_restart")
    )


def _losses_to_move(losses_df: DataFrame, restarts_df: DataFrame, width: int, gap_ms: int) -> DataFrame:
    """``finding_id``, ``_after_restart`` (true) of the losses :func:`with_restart_causes` moves.

    Args:
        losses_df: ``finding_id``, ``event_ms``, ``end_ms`` and the condition ``_l0`` ..
            ``_l{width - 1}`` (its last: the server).
        restarts_df: ``_r_ns``, ``_r_start``, ``_r_end`` of every restart.
    """
    # per loss: the latest restart of its server it began within gap_ms after, if any
    after_df = (
        losses_df.join(
            restarts_df,
            (F.col(f"_l{width - 1}") == F.col("_r_ns"))
            & F.col("event_ms").between(F.col("_r_end"), F.col("_r_end") + gap_ms),
        )
        .groupBy("finding_id")
        .agg(F.max_by("_r_start", "_r_end").alias("_r_start"))
    )
    # A loss that goes on from one lacking the same before that restart continues it, and is moved
    # as the first of the run was: a partition's stays with it, a restart's (restart after
    # restart) with the restarts.
    ordered = Window.partitionBy(*(f"_l{i}" for i in range(width))).orderBy("event_ms", "finding_id")
    before_start, before_end = F.lag("event_ms").over(ordered), F.lag("end_ms").over(ordered)
    after = F.col("_r_start").isNotNull()
    continues = after & (before_start < F.col("_r_start")) & (before_end >= F.col("_r_start"))
    first_of_run = F.when(~F.coalesce(continues, F.lit(False)), after)
    run = ordered.rowsBetween(Window.unboundedPreceding, 0)
    return (
        losses_df.join(after_df, "finding_id", "left")
        .withColumn("_head", F.last(first_of_run, ignorenulls=True).over(run))
        .where(F.col("_head"))
        .select("finding_id", F.lit(True).alias("_after_restart"))
    )


def with_unroutable_causes(findings_df: DataFrame, gap_ms: int) -> DataFrame:
    """Move a ``topic_unroutable`` to the incident of what made it: the ``topic`` family of its
    topic when a server applied a ``topic_deleted`` of it within ``gap_ms`` before (an admin
    deleted it everywhere), or the ``server`` family of a server whose restart (``ns_restart``,
    ``observed_server_down``) was under way when it began, from its stop to its start (a lone
    server restarting empties its tables); otherwise it stays with the broker group whose
    QueueData went last.

    Args:
        findings_df: :func:`with_span_ms` rows with their cause and ``servers``.
        gap_ms: how long before the topic became unroutable the delete may have come.

    Example:
        ``t-del`` deleted on ns-a, ns-b and ns-c at 10:00:00.001-.003, unroutable from
        10:00:00.003: ``topic`` / ``t-del``, with the three ``topic_deleted``.
    """
    kind = F.col("kind")
    causes_df = broadcast(
        findings_df.where((kind == "topic_deleted") | kind.isin(*RESTART_KINDS)).select(
            F.col("kind").alias("_c_kind"),
            F.col("subject").alias("_c_subject"),
            F.col("ns").alias("_c_ns"),
            F.col("start_ms").alias("_c_start"),
            F.col("end_ms").alias("_c_end"),
        )
    )
    deleted = (
        (F.col("_c_kind") == "topic_deleted")
        & (F.col("_c_subject") == F.col("subject"))
        & F.col("_c_start").between(F.col("event_ms") - gap_ms, F.col("event_ms"))
    )
    # the tables were emptied within the restart: at the stop (its start) or the start (its end)
    restarting = F.col("_c_kind").isin(*RESTART_KINDS) & F.col("event_ms").between(F.col("_c_start"), F.col("_c_end"))
    moved_df = (
        findings_df.where(kind == UNROUTABLE)
        .select("finding_id", "subject", "event_ms")
        .join(causes_df, deleted | restarting)
        .groupBy("finding_id")
        .agg(
            F.max(F.when(F.col("_c_kind") == "topic_deleted", F.col("_c_subject"))).alias("_deleted"),
            F.min(F.when(F.col("_c_kind") != "topic_deleted", F.col("_c_ns"))).alias("_restarted"),
        )
    )
    family = (
        F.when(F.col("_deleted").isNotNull(), F.lit("topic"))
        .when(F.col("_restarted").isNotNull(), F.lit("server"))
        .otherwise(F.col("family"))
    )
    key = F.coalesce(F.col("_deleted"), F.col("_restarted"), F.col("cause_key"))
    return (
        findings_df.join(moved_df, "finding_id", "left")
        .withColumn("family", family)
        .withColumn("cause_key", key)
        .drop("_deleted", "_restarted")
    )
