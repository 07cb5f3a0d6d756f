"""Findings into incidents: the findings of one cause key whose spans overlap or nearly touch are
one incident; its root cause is named from the kinds it holds, its impact from their details.
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from jobs.spark.profile import broadcast
from schemas.findings import SEVERITIES
from schemas.incidents import INCIDENTS_SCHEMA

# Two findings of one cause key more than this apart (end of one to start of the next) are two
# incidents. Expiry (120 s) plus a scan interval (10 s) and some slack: a broker's removal on the
# last server comes that long after its unregister (or death) on the others.
INCIDENT_GAP_MS = 180_000


def with_incident_ids(findings_df: DataFrame, day: dt.date, gap_ms: int = INCIDENT_GAP_MS) -> DataFrame:
    """Add ``incident_id``: per (``family``, ``cause_key``), findings ordered by start whose start
    is at most ``gap_ms`` after the latest end before them share one incident.

    The id is ``inc-`` and 12 hex digits of the SHA-256 of the day, the cause key and the
    incident's first start, so a rerun gives the same ids.

    Example:
        Findings of ``broker``/``broker-003`` at 10:00-10:02, 10:01-10:05 and 10:06-10:07 make one
        incident (each starts within 3 minutes of the latest end before it); one at 12:00, another.
    """
    key = ["family", "cause_key"]
    ordered = Window.partitionBy(*key).orderBy("start_ms", "end_ms", "finding_id")
    before = F.max("end_ms").over(ordered.rowsBetween(Window.unboundedPreceding, -1))
    new = F.when(before.isNull() | (F.col("start_ms") > before + gap_ms), 1).otherwise(0)
    session = Window.partitionBy(*key, "_session")
    return (
        findings_df.withColumn("_new", new)
        .withColumn("_session", F.sum("_new").over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)))
        .withColumn("_first_ms", F.min("start_ms").over(session))
        .withColumn(
            "incident_id",
            F.concat(
                F.lit("inc-"),
                F.substring(
                    F.sha2(
                        F.concat_ws(
                            "|",
                            F.lit(day.isoformat()),
                            F.col("family"),
                            F.col("cause_key"),
                            F.col("_first_ms").cast("string"),
                        ),
                        256,
                    ),
                    1,
                    12,
                ),
            ),
        )
        .drop("_new", "_session", "_first_ms")
    )


def _severity_rank(severity: Column) -> Column:
    rank = F.lit(None).cast("int")
    for i, name in enumerate(SEVERITIES):
        rank = F.when(severity == name, F.lit(i)).otherwise(rank)
    return rank


def _root_cause(n_servers: Column) -> Column:
    """The incident's root cause, from the kinds of its findings (``kinds``), the servers on which
    its broker addresses expired (``expired_on``), whether an observed server stopped listing a
    master (``master_gone``) and whether one came back from an outage with its tables emptied
    (``tables_emptied``)."""
    family, kinds = F.col("family"), F.col("kinds")

    def has(kind: str) -> Column:
        return F.array_contains(kinds, kind)

    expired_everywhere = F.size("expired_on") >= n_servers
    broker = (
        F.when(has("write_perm_wiped"), F.lit("write_perm_wiped"))
        .when(has("broker_unregistered") & (has("broker_expired") | has("late_expiry")), F.lit("lost_unregister"))
        .when(has("broker_expired") & expired_everywhere & F.col("master_expired"), F.lit("master_lost"))
        .when(has("broker_expired") & expired_everywhere, F.lit("broker_dead"))
        .when(has("broker_expired"), F.lit("broker_cut_off"))
        .when(has("broker_unregistered"), F.lit("broker_shutdown"))
        # as observed: a kill, a crash and a clean shutdown look the same from outside
        .when(has("observed_broker_gone") & F.col("broker_missing"), F.lit("broker_cut_off"))
        .when(has("observed_broker_gone") & F.col("master_gone"), F.lit("master_lost"))
        .when(has("observed_broker_gone"), F.lit("broker_dead"))
        # a group gone from every server without a liveness finding (its connections closed:
        # killed) is its master lost too
        .when(has("no_master") | has("no_writable_queue") | has("topic_unroutable"), F.lit("master_lost"))
        .when(F.col("broker_missing"), F.lit("broker_cut_off"))
        .when(has("broker_flapping"), F.lit("broker_flapping"))
        .otherwise(F.lit("broker_divergence"))
    )
    return (
        F.when(family == "broker", broker)
        .when(
            family == "topic",
            F.when(has("topic_deleted"), F.lit("topic_deleted"))
            .when(has("topic_unroutable"), F.lit("topic_unroutable"))
            .when(F.col("topics_unroutable") > 0, F.lit("topic_divergence"))
            .when(has("no_writable_queue"), F.lit("no_writable_queue"))
            .when(has("topic_perm_changed"), F.lit("topic_perm_changed"))
            .otherwise(F.lit("topic_route_changed")),
        )
        .when(
            family == "server",
            F.when(has("ns_restart") | F.col("tables_emptied"), F.lit("server_restart"))
            .when(has("observed_server_down"), F.lit("server_unreachable"))
            .otherwise(F.lit("telemetry")),
        )
        .when(family == "layout", F.split(F.col("cause_key"), ":").getItem(0))
        .otherwise(family)
    )


def _agg_unwritable(linked_df: DataFrame) -> DataFrame:
    """Per incident with any: ``topics_unwritable`` and ``write_queues_unwritable`` (see
    :func:`agg_incidents`)."""
    kind = F.col("kind")
    unwritable = (kind == "no_writable_queue") | ((kind == "topic_perm_changed") & (F.col("severity") == "warning"))
    return (
        linked_df.where(unwritable)
        .groupBy("incident_id", "subject")
        .agg(F.max(F.coalesce(F.col("_d")["write_queues"], F.lit(0))).alias("_queues"))
        .groupBy("incident_id")
        .agg(
            F.count(F.lit(1)).cast("int").alias("topics_unwritable"),
            F.sum("_queues").cast("long").alias("write_queues_unwritable"),
        )
    )


def _cause_flags() -> list[Column]:
    """The aggregates of an incident's findings that :func:`_root_cause` reads: the servers a broker
    expired on, and whether a master expired, a broker was missing, an observed master was gone or an
    observed server's tables were emptied."""
    kind, detail = F.col("kind"), F.col("_d")
    return [
        F.array_distinct(F.collect_list(F.when(kind == "broker_expired", F.col("ns")))).alias("expired_on"),
        F.coalesce(F.max(F.when(kind == "broker_expired", detail["broker_id"] == 0)), F.lit(False)).alias(
            "master_expired"
        ),
        F.coalesce(F.max((kind == "ns_divergence") & (detail["kind"] == "broker_missing")), F.lit(False)).alias(
            "broker_missing"
        ),
        F.coalesce(F.max(F.when(kind == "observed_broker_gone", detail["broker_id"] == 0)), F.lit(False)).alias(
            "master_gone"
        ),
        F.coalesce(F.max(F.when(kind == "observed_server_down", detail["tables_emptied"])), F.lit(False)).alias(
            "tables_emptied"
        ),
    ]


def _incident_aggregates() -> list[Column]:
    """The per-incident aggregates of its findings: servers, span, worst severity, counts, topics, flags."""
    kind = F.col("kind")
    is_episode = kind == "ns_divergence"
    return [
        F.array_sort(F.array_distinct(F.flatten(F.collect_list("servers")))).alias("servers"),
        F.min("event_ms").alias("start_ms"),
        F.max("end_ms").alias("end_ms"),
        F.max(_severity_rank(F.col("severity"))).alias("_rank"),
        F.count(F.lit(1)).cast("int").alias("findings"),
        F.array_sort(F.collect_set("kind")).alias("kinds"),
        F.array_sort(F.collect_list("finding_id")).alias("finding_ids"),
        F.count_distinct(
            F.when(
                (is_episode & (F.col("_d")["kind"] == "route_missing")) | (kind == "topic_unroutable"), F.col("subject")
            )
        )
        .cast("int")
        .alias("topics_unroutable"),
        *_cause_flags(),
    ]


def agg_incidents(linked_df: DataFrame, n_servers_df: DataFrame, day: dt.date) -> DataFrame:
    """One row per incident: ``INCIDENTS_SCHEMA``.

    Args:
        linked_df: findings with ``incident_id`` (:func:`with_incident_ids`), ``family``,
            ``cause_key``, ``servers``, ``event_ms``, ``end_ms`` and ``_d`` (parsed detail).
        n_servers_df: one row, ``n_servers``: the servers of the day (at least 1).
        day: the UTC day.

    The incident starts at the earliest ``event_ms`` of its findings and ends at their latest
    ``end_ms``. ``topics_unwritable`` counts the topics of its ``no_writable_queue`` findings and
    ``write_queues_unwritable`` their configured write queues (the most any server had), a
    ``topic_perm_changed`` warning (read-only now by its broker's configuration) counting as one;
    ``topics_unroutable`` the topics of its ``route_missing`` episodes and ``topic_unroutable``
    findings; ``client_share`` is the
    servers concerned over the servers of the day: a client asks one server, so a fault on k of n
    servers reaches about k/n of them.
    """
    incidents_df = (
        linked_df.groupBy("incident_id", "family", "cause_key")
        .agg(*_incident_aggregates())
        .join(_agg_unwritable(linked_df), "incident_id", "left")
        .crossJoin(broadcast(n_servers_df))
    )
    severity = F.element_at(F.array(*[F.lit(s) for s in SEVERITIES]), F.col("_rank") + 1)
    after_colon = F.regexp_extract("cause_key", r"^[^:]*:(.+)$", 1)  # "" without one
    subject = F.when((F.col("family") == "layout") & (after_colon != ""), after_colon).otherwise(F.col("cause_key"))
    return (
        incidents_df.withColumn("topics_unroutable", F.coalesce("topics_unroutable", F.lit(0)))
        .withColumn("root_cause", _root_cause(F.col("n_servers")))
        .select(
            F.lit(day).alias("date"),
            "incident_id",
            "root_cause",
            subject.alias("subject"),
            "servers",
            F.timestamp_millis("start_ms").alias("start_ts"),
            F.timestamp_millis("end_ms").alias("end_ts"),
            (F.col("end_ms") - F.col("start_ms")).alias("duration_ms"),
            severity.alias("severity"),
            "findings",
            "kinds",
            F.coalesce("topics_unwritable", F.lit(0)).cast("int").alias("topics_unwritable"),
            F.coalesce("write_queues_unwritable", F.lit(0)).cast("long").alias("write_queues_unwritable"),
            "topics_unroutable",
            F.least(F.lit(1.0), F.size("servers") / F.col("n_servers")).alias("client_share"),
            "finding_ids",
        )
        .select(*INCIDENTS_SCHEMA.names)
    )
