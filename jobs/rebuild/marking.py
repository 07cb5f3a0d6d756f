"""Marking the events the rebuild walks: :func:`select_interesting_keys` picks the events that can
change a route table (or the end-of-day state); heartbeats that change nothing but liveness are
skipped (docs/nameserver-semantics.md §2.1, §6).

Why skipping an unchanged REGISTER_BROKER (103) is exact, and how blocks of a stream's events
find the changes in one pass: docs/audit.md, "Rebuild".
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.spark.profile import broadcast
from nameserver.codec import RequestCode
from schemas.events import REMOVAL_TYPES, RESET_TYPES

REGISTER_BROKER = int(RequestCode.REGISTER_BROKER)
BROKER_HEARTBEAT = int(RequestCode.BROKER_HEARTBEAT)
QUERY_DATA_VERSION = int(RequestCode.QUERY_DATA_VERSION)

# block kinds: an address's registrations, its removals, its 904/322 heartbeats, everything else
REGISTRATION, REMOVAL, BEAT, OTHER = "103", "removal", "beat", "other"


def _is_103() -> Column:
    """A REGISTER_BROKER: ``register``, or ``heartbeat`` with request code 103."""
    return F.col("type").isin("register", "heartbeat") & (F.col("request_code") == REGISTER_BROKER)


def _is_removal() -> Column:
    """An event that removes ``broker_addr``'s live entry (and its BrokerData entries)."""
    return F.col("type").isin(*REMOVAL_TYPES)


def _fingerprint() -> Column:
    """What a 103 leaves in the tables besides ``last_update`` (docs/audit.md, "Rebuild")."""
    return F.struct("cluster", "broker_name", "broker_id", "ha_addr", "channel", "data_version", "topics_digest")


def with_ts_ms(events_df: DataFrame) -> DataFrame:
    """Replace ``ts`` by its epoch milliseconds (the walk's clock), whatever type the table keeps."""
    if "ts_ms" in events_df.columns:
        return events_df.withColumn("ts", F.col("ts_ms")).drop("ts_ms")
    if isinstance(events_df.schema["ts"].dataType, T.TimestampType):
        return events_df.withColumn("ts", F.unix_millis("ts"))
    return events_df


def with_run(events_df: DataFrame) -> DataFrame:
    """Add ``run``: how many ``ns_start``/``ns_stop`` events of the server precede or are this event.

    Each server has a handful of those a day: they become a small table of seq ranges, joined to
    the events by broadcast (a window over the whole server would sort it in one task).

    Example:
        events 1..9 with ns_stop@3 and ns_start@5: runs 0,0,1,1,2,2,2,2,2.
    """
    order = Window.partitionBy("_ns").orderBy("_from")
    runs_df = (
        events_df.where(F.col("type").isin(*RESET_TYPES))
        .select(F.col("ns").alias("_ns"), F.col("seq").alias("_from"))
        .select("_ns", "_from", F.lead("_from").over(order).alias("_to"), F.row_number().over(order).alias("run"))
    )
    in_run = (
        (F.col("ns") == F.col("_ns"))
        & (F.col("seq") >= F.col("_from"))
        & (F.col("_to").isNull() | (F.col("seq") < F.col("_to")))
    )
    return (
        events_df.join(broadcast(runs_df), in_run, "left")
        .withColumn("run", F.coalesce(F.col("run"), F.lit(0)))
        .drop("_ns", "_from", "_to")
    )


def agg_blocks(events_df: DataFrame) -> DataFrame:
    """The day as blocks: (ns, run, broker_addr, kind, ...) with ``lo``/``hi`` seq, ``n`` and ``last_ts``.

    One hash aggregate (every aggregate is fixed-width: ``min``/``max`` of a string would sort the day).

    * ``103`` blocks: an address's 103s (``register`` or ``heartbeat``) with one fingerprint and
      filter list; ``broker_name``/``broker_id``/``data_version`` are the fingerprint's;
    * ``removal``: one unregister/channel close/expiry of an address each;
    * ``beat``: an address's 904s or 322s with one data version (only their last one matters);
    * ``other``: one event each (ns_start/stop, wipe, add, delete, rejected, and anything without
      an address or request code); ``type`` is set for these only.

    Example:
        register@2 and heartbeats@3..5 of M with one fingerprint are one ``103`` block lo=2, hi=5.
    """
    addr = F.col("broker_addr").isNotNull()
    code = F.col("request_code")
    kind = (
        F.when(_is_103() & addr, F.lit(REGISTRATION))
        .when(_is_removal() & addr, F.lit(REMOVAL))
        .when((F.col("type") == "heartbeat") & addr & code.isin(BROKER_HEARTBEAT, QUERY_DATA_VERSION), F.lit(BEAT))
        .otherwise(F.lit(OTHER))
    )
    carried = F.struct(_fingerprint().alias("fp"), F.col("filter_servers").alias("fs"))
    registration, beat = F.col("_kind") == REGISTRATION, F.col("_kind") == BEAT
    return (
        with_run(events_df)
        .withColumn("_kind", kind)
        .groupBy(
            "ns",
            "run",
            "broker_addr",
            F.col("_kind").alias("kind"),
            F.when(registration, carried).alias("_carried"),
            F.when(~(registration | beat), F.col("seq")).alias("_single"),
            F.when(beat, F.col("request_code")).alias("request_code"),
            F.when(registration | beat, F.col("data_version")).alias("data_version"),
            F.when(registration, F.col("broker_name")).alias("broker_name"),
            F.when(registration, F.col("broker_id")).alias("broker_id"),
            F.when(F.col("_kind") == OTHER, F.col("type")).alias("type"),
        )
        .agg(
            F.min("seq").alias("lo"),
            F.max("seq").alias("hi"),
            F.count(F.lit(1)).alias("n"),
            F.max_by("ts", "seq").alias("last_ts"),
        )
        .drop("_carried", "_single")
    )


def agg_contested_slots(blocks_df: DataFrame) -> DataFrame:
    """(ns, run, broker_name, broker_id) slots that more than one address registered into (W8)."""
    return (
        blocks_df.where(F.col("kind") == REGISTRATION)
        .select("ns", "run", "broker_name", "broker_id", "broker_addr")
        .distinct()
        .groupBy("ns", "run", "broker_name", "broker_id")
        .count()
        .where(F.col("count") > 1)
        .select("ns", "run", "broker_name", "broker_id", F.lit(True).alias("contested"))
    )


def agg_slow_streams(blocks_df: DataFrame, contested_df: DataFrame) -> DataFrame:
    """Streams (ns, run, broker_addr) whose blocks interleave in seq order or that register into a
    contested slot, with the seq range ``lo``..``hi`` of the stream."""
    earlier = Window.partitionBy("ns", "run", "broker_addr").orderBy("lo").rowsBetween(Window.unboundedPreceding, -1)
    return (
        blocks_df.where(F.col("kind").isin(REGISTRATION, REMOVAL))
        .join(broadcast(contested_df), ["ns", "run", "broker_name", "broker_id"], "left")
        .withColumn("_back", F.coalesce(F.col("lo") < F.max("hi").over(earlier), F.lit(False)))
        .groupBy("ns", "run", "broker_addr")
        .agg(
            F.min("lo").alias("lo"),
            F.max("hi").alias("hi"),
            (F.max("_back") | F.max(F.col("contested").isNotNull())).alias("_slow"),
        )
        .where("_slow")
        .drop("_slow")
    )


def select_block_keys(blocks_df: DataFrame, slow_df: DataFrame) -> DataFrame:
    """(ns, seq) of the events the blocks alone show to be interesting: the first event of every
    block of a fast stream, every removal and every other event but a ``rejected``, the last 904/322
    of each kind and the last 103 of each (address, data version). Slow streams' 103s are decided by
    :func:`select_slow_keys`."""
    fast_df = blocks_df.where(F.col("kind") == REGISTRATION).join(
        broadcast(slow_df.select("ns", "run", "broker_addr")), ["ns", "run", "broker_addr"], "left_anti"
    )
    starts_df = fast_df.select("ns", F.col("lo").alias("seq")).unionByName(
        blocks_df.where((F.col("kind") == REMOVAL) | ((F.col("kind") == OTHER) & (F.col("type") != "rejected"))).select(
            "ns", F.col("lo").alias("seq")
        )
    )
    beats_df = blocks_df.where(F.col("kind") == BEAT).select("ns", F.col("hi").alias("seq"))
    last_103_df = (
        blocks_df.where(F.col("kind") == REGISTRATION)
        .groupBy("ns", "run", "broker_addr", "data_version")
        .agg(F.max("hi").alias("seq"))
        .select("ns", "seq")
    )
    return starts_df.unionByName(beats_df).unionByName(last_103_df)


def select_slow_keys(events_df: DataFrame, slow_df: DataFrame, contested_df: DataFrame) -> DataFrame:
    """(ns, seq) of the changing 103s of slow streams, by the rule itself: the previous stream event
    is not a 103 with the same fingerprint and filter list, or another address used the slot."""
    # renamed keys: slow_df derives from events_df, so events_df["ns"] == slow_df["ns"] would
    # resolve to one attribute and be trivially true (every server's streams joined to every server)
    stream = broadcast(slow_df.select(F.col("ns").alias("_ns"), "run", F.col("broker_addr").alias("_addr"), "lo", "hi"))
    by_addr = Window.partitionBy("ns", "run", "broker_addr").orderBy("seq")
    by_slot = Window.partitionBy("ns", "run", "_slot", "broker_name", "broker_id").orderBy("seq")
    previous = F.last(
        F.struct(_is_103().alias("is_103"), _fingerprint().alias("fp"), F.col("filter_servers").alias("fs")),
        ignorenulls=True,
    ).over(by_addr.rowsBetween(Window.unboundedPreceding, -1))
    prev = F.col("_prev")
    unchanged = (
        prev.isNotNull()
        & prev["is_103"]
        & prev["fp"].eqNullSafe(_fingerprint())
        & (F.col("filter_servers").isNull() | (prev["fs"].isNotNull() & (prev["fs"] == F.col("filter_servers"))))
        & (F.col("contested").isNull() | F.col("_slot_prev").eqNullSafe(F.col("broker_addr")))
    )
    return (
        events_df.join(
            stream,
            (F.col("ns") == F.col("_ns"))
            & (F.col("broker_addr") == F.col("_addr"))
            & F.col("seq").between(F.col("lo"), F.col("hi")),
        )
        .drop("_ns", "_addr", "lo", "hi")
        .where(_is_103() | _is_removal())
        .join(broadcast(contested_df), ["ns", "run", "broker_name", "broker_id"], "left")
        .withColumn("_prev", previous)
        # only 103s of contested slots need the slot order; the rest share a null-keyed partition
        .withColumn("_slot", F.when(_is_103() & F.col("contested"), F.lit(True)))
        .withColumn("_slot_prev", F.lag("broker_addr").over(by_slot))
        .where(_is_103() & ~F.coalesce(unchanged, F.lit(False)))
        .select("ns", "seq")
    )


def select_interesting_keys(events_df: DataFrame, blocks_df: DataFrame) -> DataFrame:
    """(ns, seq) of every event the walk must apply (docs/audit.md, "Rebuild"), each once.

    Args:
        events_df: the day's events (the marking reads the stream columns only).
        blocks_df: :func:`agg_blocks` of ``events_df``; used several times, so callers cache it.
    """
    contested_df = agg_contested_slots(blocks_df)
    slow_df = agg_slow_streams(blocks_df, contested_df)
    return (
        select_block_keys(blocks_df, slow_df).unionByName(select_slow_keys(events_df, slow_df, contested_df)).distinct()
    )


def with_interesting(events_df: DataFrame) -> DataFrame:
    """Add ``interesting``: whether the walk must apply the event (:func:`select_interesting_keys`).

    Example:
        Two unchanged 103s of one address: the first of the day and the last are interesting,
        those between are not; after a 103 from another address into the same slot, the next
        unchanged 103 of the first address is interesting again.
    """
    keys_df = select_interesting_keys(events_df, agg_blocks(events_df)).withColumn("interesting", F.lit(True))
    return events_df.join(keys_df, ["ns", "seq"], "left").withColumn(
        "interesting", F.coalesce(F.col("interesting"), F.lit(False))
    )


def with_topics(interesting_df: DataFrame, events_df: DataFrame, first_only: bool = False) -> DataFrame:
    """Add ``topics`` to 103 events: the list logged with their ``topics_digest`` by any event of the
    day (content-addressed, so any server's copy is the event's own), null when never logged.

    Only the few events carrying a list are read for it; the walk input never carries the day's
    heaviest column through a join.

    Args:
        first_only: give the list to the first 103 (by ``seq``) of each server and digest only.
            The walk keeps every list it has seen by digest (``DayWalk``, ``RouteReplayer``), so
            the later 103s of a server resolve theirs from it; on the reference day this ships
            about 540 lists per server instead of 8,100.
    """
    lists_df = (
        events_df.where(F.col("topics").isNotNull() & F.col("topics_digest").isNotNull())
        .groupBy("topics_digest")
        .agg(F.min_by("topics", "seq").alias("_topics"))
    )
    wanted = _is_103()
    if first_only:
        first = Window.partitionBy("ns", "topics_digest", _is_103()).orderBy("seq")
        wanted = wanted & (F.row_number().over(first) == 1)
    return (
        interesting_df.withColumn("_wanted", wanted)
        .join(lists_df, "topics_digest", "left")
        .withColumn("topics", F.when(F.col("_wanted"), F.col("_topics")))
        .drop("_topics", "_wanted")
    )
