"""``broker_name_takeover`` (critical, subject the broker name): a new address took a broker name +
id slot while the slot's previous address was still live on that server.

Why the slot flips, why a promotion is not a takeover, and what "live" means here:
docs/audit.md, "Security".
"""

from __future__ import annotations

from pyspark.sql import DataFrame, Window
from pyspark.sql import functions as F

from jobs.analytics.security.columns import to_ts
from jobs.lake.findings import finding_columns
from jobs.spark.profile import broadcast
from schemas.events import REMOVAL_TYPES, RESET_TYPES


def select_shared_addresses(pairs_df: DataFrame) -> DataFrame:
    """``ns``, ``broker_addr`` of the addresses that registered into a (ns, broker_name, broker_id)
    slot that another address registered into too, the day before's tail included.

    Only such a slot can change holder, and only such an address can be a slot's old holder.

    Args:
        pairs_df: :func:`jobs.analytics.security.columns.agg_registration_pairs` rows, carried ones included.
    """
    slot_addrs_df = (
        pairs_df.where(F.col("broker_name").isNotNull() & F.col("broker_id").isNotNull())
        .select("ns", "broker_name", "broker_id", "broker_addr")
        .distinct()
    )
    return (
        slot_addrs_df.groupBy("ns", "broker_name", "broker_id")
        .agg(F.count(F.lit(1)).alias("_addrs"))
        .where(F.col("_addrs") > 1)
        .join(slot_addrs_df, ["ns", "broker_name", "broker_id"])
        .select("ns", "broker_addr")
        .distinct()
    )


def filter_shared_addresses(registrations_df: DataFrame, shared_df: DataFrame) -> DataFrame:
    """The registrations of the addresses in ``shared_df`` (:func:`select_shared_addresses`, a
    broadcast of a handful of rows): every row :func:`select_slot_changes` and
    :func:`filter_old_holder_live` can use, without the day's other heartbeats."""
    return registrations_df.join(broadcast(shared_df), ["ns", "broker_addr"], "left_semi")


def select_slot_changes(registrations_df: DataFrame) -> DataFrame:
    """103 events of the day (``carried`` false) whose (ns, broker_name, broker_id) slot was last
    held by another address, perhaps before midnight, except role switches.

    A role switch is a group member changing id: its previous 103 was in the same broker name
    with another id (a slave promoted to master, DLedger style, while the old master is still up).
    Adds ``old_addr`` and ``old_seq`` (the previous holder's latest 103 in the slot).

    Args:
        registrations_df: 103 events with ``carried``. Only the rows of addresses that share a
            slot (:func:`filter_shared_addresses`) matter: a slot that one address registered into
            has no change, and a change is judged by its address's own previous registration. So
            that filter leaves the result as it is, and the two windows sort a handful of rows.
    """
    slot = Window.partitionBy("ns", "broker_name", "broker_id").orderBy("seq")
    address = Window.partitionBy("ns", "broker_addr").orderBy("seq")
    role_switch = (F.lag("broker_name").over(address) == F.col("broker_name")) & (
        F.lag("broker_id").over(address) != F.col("broker_id")
    )
    return (
        registrations_df.where(F.col("broker_name").isNotNull() & F.col("broker_id").isNotNull())
        .withColumn("old_addr", F.lag("broker_addr").over(slot))
        .withColumn("old_seq", F.lag("seq").over(slot))
        .withColumn("role_switch", F.coalesce(role_switch, F.lit(False)))
        .where(
            ~F.col("carried")
            & ~F.col("role_switch")
            & F.col("old_addr").isNotNull()
            & (F.col("old_addr") != F.col("broker_addr"))
        )
    )


def filter_old_holder_live(changes_df: DataFrame, events_df: DataFrame, registrations_df: DataFrame) -> DataFrame:
    """Keep the slot changes whose old holder was still live in the slot when the new one came:
    no removal of the old address, no server reset, and no 103 of the old address into another
    slot between its last 103 in the slot and the change.

    Slot changes are rare, so the three range joins stay small.

    Args:
        changes_df: :func:`select_slot_changes` rows.
        events_df: events, at least the removals and resets
            (:func:`jobs.analytics.security.columns.filter_rare_events` rows will do).
        registrations_df: 103 events, at least all of the changes' old addresses (their rows
            without a slot too: a null ``broker_name`` with another ``broker_id`` is a move). An
            old holder shares its slot, so :func:`filter_shared_addresses` rows will do.
    """
    c_df = changes_df.alias("c")
    between = (F.col("o.seq") > F.col("c.old_seq")) & (F.col("o.seq") < F.col("c.seq"))
    removals_df = (
        events_df.where(F.col("type").isin(*REMOVAL_TYPES) & F.col("broker_addr").isNotNull())
        .select("ns", "seq", "broker_addr")
        .alias("o")
    )
    resets_df = events_df.where(F.col("type").isin(*RESET_TYPES)).select("ns", "seq").alias("o")
    moves_df = registrations_df.select("ns", "seq", "broker_addr", "broker_name", "broker_id").alias("o")
    same_ns = F.col("o.ns") == F.col("c.ns")
    of_old = same_ns & (F.col("o.broker_addr") == F.col("c.old_addr"))
    moved = of_old & ~(
        (F.col("o.broker_name") == F.col("c.broker_name")) & (F.col("o.broker_id") == F.col("c.broker_id"))
    )
    return (
        c_df.join(removals_df, of_old & between, "left_anti")
        .alias("c")
        .join(resets_df, same_ns & between, "left_anti")
        .alias("c")
        .join(moves_df, moved & between, "left_anti")
    )


def agg_takeovers(takeovers_df: DataFrame) -> DataFrame:
    """One row per (ns, slot, address pair): the first takeover's addresses, peer and cluster,
    the time of the first and last change and the number of changes (``flips``)."""
    pair = F.array_sort(F.array("old_addr", "broker_addr"))
    return (
        takeovers_df.withColumn("pair", pair)
        .groupBy("ns", "broker_name", "broker_id", "pair")
        .agg(
            F.min("ts_ms").alias("start_ms"),
            F.max("ts_ms").alias("end_ms"),
            F.count(F.lit(1)).alias("flips"),
            F.min_by(F.struct("old_addr", "broker_addr", "remote", "remote_host", "cluster", "channel"), "seq").alias(
                "first"
            ),
        )
        .select(
            "ns",
            "broker_name",
            "broker_id",
            "start_ms",
            "end_ms",
            "flips",
            F.col("first.old_addr").alias("old_addr"),
            F.col("first.broker_addr").alias("new_addr"),
            F.col("first.remote").alias("remote"),
            F.col("first.remote_host").alias("remote_host"),
            F.col("first.cluster").alias("cluster"),
            F.col("first.channel").alias("channel"),
        )
    )


def select_takeover_findings(takeover_rows_df: DataFrame) -> DataFrame:
    """``broker_name_takeover`` findings from :func:`agg_takeovers` rows."""
    return takeover_rows_df.select(
        *finding_columns(
            kind="broker_name_takeover",
            severity="critical",
            subject=F.col("broker_name"),
            ns=F.col("ns"),
            start_ts=to_ts(F.col("start_ms")),
            end_ts=to_ts(F.col("end_ms")),
            detail={
                "broker_id": F.col("broker_id"),
                "old_addr": F.col("old_addr"),
                "new_addr": F.col("new_addr"),
                "remote": F.col("remote"),
                "cluster": F.col("cluster"),
                "channel": F.col("channel"),
                "flips": F.col("flips"),
            },
        )
    )
