"""Each key of every kind as one row holding its *facts*: per-server intervals of a value.

A key has a few dozen facts at most, so the later steps work on that array without a shuffle.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.analytics.divergence.kinds import BROKER_ADDRS_MISMATCH, BROKER_MISSING, QUEUE_DATA_MISMATCH, ROUTE_MISSING
from jobs.analytics.divergence.span import Span, with_interval_ms
from jobs.spark.profile import broadcast

# parts of a composite key; RocketMQ topic and broker names never hold control characters
_KEY_SEP = "\u0001"

# one interval of a value on one server; ``layer`` says what it is (see the ``agg_*_facts``)
FACT_TYPE = T.StructType(
    [
        T.StructField("ns", T.StringType()),
        T.StructField("from_ms", T.LongType()),
        T.StructField("to_ms", T.LongType()),
        T.StructField("layer", T.StringType()),
        T.StructField("sub", T.LongType()),
        T.StructField("value", T.StringType()),
    ]
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
        F.col("ns").alias("ns"),
        F.col("from_ms").alias("from_ms"),
        F.col("to_ms").alias("to_ms"),
        F.lit(layer).alias("layer"),
        (sub if sub is not None else F.lit(None)).cast(T.LongType()).alias("sub"),
        (value if value is not None else F.lit(None)).cast(T.StringType()).alias("value"),
    )


def _keyed(df: DataFrame, kind: str, key_cols: tuple[str, ...]) -> DataFrame:
    """:data:`KEYED_COLUMNS` from a frame with the kind's key columns and ``facts``."""

    def key_part(name: str) -> Column:
        return (F.col(name) if name in key_cols else F.lit(None)).cast(T.StringType()).alias(name)

    return df.select(
        F.lit(kind).alias("kind"),
        F.concat_ws(_KEY_SEP, *key_cols).alias("key"),
        key_part("topic"),
        key_part("broker_name"),
        key_part("broker_addr"),
        "facts",
    )


def agg_topic_facts(queue_df: DataFrame) -> DataFrame:
    """Per topic, the islands in which each server has any QueueData of it (a route,
    docs/nameserver-semantics.md §2.10), as ``facts`` of layer ``topic``."""
    presence_df = agg_union_intervals(queue_df.select("topic", "ns", "from_ms", "to_ms"), ["topic", "ns"])
    return presence_df.groupBy("topic").agg(F.collect_list(_fact("topic")).alias("facts"))


def agg_broker_data_facts(addr_df: DataFrame) -> DataFrame:
    """Per broker name, the islands in which each server has a BrokerData of it (some id in
    ``brokerAddrs``, docs/nameserver-semantics.md I2), as ``facts`` of layer ``broker``."""
    presence_df = agg_union_intervals(addr_df.select("broker_name", "ns", "from_ms", "to_ms"), ["broker_name", "ns"])
    return presence_df.groupBy("broker_name").agg(F.collect_list(_fact("broker")).alias("facts"))


def agg_broker_live_facts(windows_df: DataFrame) -> DataFrame:
    """``broker_missing`` keys: per address, its liveness windows on each server (layer ``live``)."""
    return _keyed(
        windows_df.groupBy("broker_addr").agg(F.collect_list(_fact("live")).alias("facts")),
        BROKER_MISSING,
        ("broker_addr",),
    )


def agg_queue_data_facts(queue_df: DataFrame, topic_facts_df: DataFrame, broker_facts_df: DataFrame) -> DataFrame:
    """``queue_data_mismatch`` keys: per (topic, broker name) of the history, its QueueData on each
    server (layer ``qd``, value ``read/write/perm/sysflag``), with the topic's presence and the
    broker name's BrokerData presence, which make a missing QueueData ``absent`` rather than not
    compared. Both are one small row per topic / broker name, so they are broadcast."""
    value = F.concat_ws("/", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag")
    empty = F.array().cast(T.ArrayType(FACT_TYPE))
    keyed_df = (
        queue_df.groupBy("topic", "broker_name")
        .agg(F.collect_list(_fact("qd", value)).alias("_qd"))
        .join(broadcast(topic_facts_df.withColumnRenamed("facts", "_topic")), "topic", "left")
        .join(broadcast(broker_facts_df.withColumnRenamed("facts", "_broker")), "broker_name", "left")
        .withColumn("facts", F.concat("_qd", F.coalesce("_topic", empty), F.coalesce("_broker", empty)))
    )
    return _keyed(keyed_df, QUEUE_DATA_MISMATCH, ("topic", "broker_name"))


def agg_broker_addrs_facts(addr_df: DataFrame) -> DataFrame:
    """``broker_addrs_mismatch`` keys: per broker name, each ``brokerAddrs[id]`` cell on each server
    (layer ``addr``, ``sub`` the id, value the address)."""
    facts = F.collect_list(_fact("addr", F.col("broker_addr"), F.col("broker_id")))
    return _keyed(addr_df.groupBy("broker_name").agg(facts.alias("facts")), BROKER_ADDRS_MISMATCH, ("broker_name",))


# what ``broker_missing`` needs of a liveness window
LIVE_WINDOW_COLUMNS = ("date", "ns", "broker_addr", "start_ts", "end_ts")


def select_observed_live_windows(addr_df: DataFrame, state_df: DataFrame) -> DataFrame:
    """Liveness as observed: an observed server has no heartbeats to see, so a broker address is
    live on it while the address is in its observed cluster info (its ``broker_addr_history``
    intervals; ``state_df``: ``ns_state`` rows, whose ``observed`` marks those servers)."""
    observed_df = state_df.where(F.col("observed")).select("ns").distinct()
    return addr_df.join(broadcast(observed_df), "ns", "left_semi").select(
        "date", "ns", "broker_addr", F.col("valid_from_ts").alias("start_ts"), F.col("valid_to_ts").alias("end_ts")
    )


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
