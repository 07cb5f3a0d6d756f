"""Rebuild every name server's route tables for one UTC day, as validity intervals (interfaces spec,
"The lake"; semantics spec §6).

Heartbeats are nearly all of a log and change nothing but liveness, so the heavy path is columnar:
:func:`with_interesting` marks, with window functions, the events that can change a route table
(or the end-of-day state), and only those are walked one by one, per server in parallel on the
executors, with the server's own ``RouteReplayer`` (:mod:`jobs.rebuild_walk`). A day starts from
the previous day's ``ns_state`` (:mod:`jobs.rebuild_state`).

Why skipping an unchanged 103 ``heartbeat`` is exact: while an address A stays live, its entry in
``brokerAddrs`` can only be displaced by another address registering into the same
(broker name, id) slot (the slot rule below); everything else that could remove it (unregister,
channel close, expiry of A, a restart) also removes A's live entry and is in A's own event stream.
So when A's previous register/removal event is a 103 with the same cluster, name, id, HA address,
connection, data version and topic digest, and nobody registered into the slot since, §2.1 runs
with registerFirst false and an unchanged data version: no topics are applied, steps 1-4 and 7 set
what is already there, and step 6 only moves ``last_update``. ``last_update`` matters only for the
end-of-day state, so the last event of each kind (request code, data version) per address is
walked anyway. Anything the rules cannot vouch for (a null address, a first event of the day, an
event after a seq gap whose predecessor was a removal) is walked: walking is always safe.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs import lake
from jobs.delta_io import read_table, table_exists, write_table
from jobs.rebuild_walk import walk_rows
from schemas.events import EVENTS_TABLE_SCHEMA
from schemas.routes import (
    BROKER_ADDR_HISTORY_SCHEMA,
    CLUSTER_HISTORY_SCHEMA,
    FILTER_SERVER_HISTORY_SCHEMA,
    NS_RUNS_SCHEMA,
    NS_STATE_SCHEMA,
    PARTITION_BY,
    TOPIC_ROUTE_HISTORY_SCHEMA,
)

REGISTER_BROKER, BROKER_HEARTBEAT, QUERY_DATA_VERSION = 103, 904, 322

# the event keys the walk applies (semantics spec §6), ``ts`` as epoch ms
WALK_EVENT_COLUMNS = (
    "ns", "seq", "ts", "type", "request_code", "channel", "remote", "cluster", "broker_name", "broker_id",
    "broker_addr", "ha_addr", "data_version", "topics_digest", "topics", "filter_servers", "request_version",
    "broker_expiry_ms", "topic",
)

WALK_OUTPUT_SCHEMA = T.StructType(
    [
        T.StructField("kind", T.StringType()),  # queue | addr | cluster | filter | run | state
        T.StructField("ns", T.StringType()),
        T.StructField("topic", T.StringType()),
        T.StructField("broker_name", T.StringType()),
        T.StructField("cluster", T.StringType()),
        T.StructField("broker_id", T.LongType()),
        T.StructField("broker_addr", T.StringType()),
        T.StructField("read_queue_nums", T.IntegerType()),
        T.StructField("write_queue_nums", T.IntegerType()),
        T.StructField("perm", T.IntegerType()),
        T.StructField("topic_sys_flag", T.IntegerType()),
        T.StructField("filter_servers", T.ArrayType(T.StringType(), False)),
        T.StructField("valid_from_ms", T.LongType()),
        T.StructField("valid_to_ms", T.LongType()),
        T.StructField("from_seq", T.LongType()),
        T.StructField("to_seq", T.LongType()),
        T.StructField("stop_reason", T.StringType()),
        T.StructField("up", T.BooleanType()),
        T.StructField("up_at_start", T.BooleanType()),
        T.StructField("last_seq", T.LongType()),
        T.StructField("last_ts_ms", T.LongType()),
        T.StructField("events", T.LongType()),
        T.StructField("interesting_events", T.LongType()),
        T.StructField("started_without_state", T.BooleanType()),
        T.StructField("unresolved_topics", T.LongType()),
        T.StructField("state_json", T.StringType()),
    ]
)


@dataclass(frozen=True)
class RebuildResult:
    """What a day's rebuild did.

    Attributes:
        day: the UTC day.
        servers: name servers rebuilt (with events that day, or carried from the day before).
        events: events read.
        interesting_events: events walked one by one.
        started_without_state: servers with no previous-day state whose day did not begin with
            ``ns_start``: their tables start empty, so routes registered before the lake began are
            missing until re-registered (a finding for the lead's report).
        unresolved_topics: 103 events whose topic list was never logged (applied with no topics).
    """

    day: dt.date
    servers: tuple[str, ...]
    events: int
    interesting_events: int
    started_without_state: tuple[str, ...]
    unresolved_topics: int


# ---------------------------------------------------------------------------- marking


def _is_103() -> Column:
    """A REGISTER_BROKER: ``register``, or ``heartbeat`` with request code 103."""
    return F.col("type").isin("register", "heartbeat") & (F.col("request_code") == REGISTER_BROKER)


def _is_removal() -> Column:
    """An event that removes ``broker_addr``'s live entry (and its BrokerData entries)."""
    return F.col("type").isin("unregister", "channel_close", "expire")


def with_ts_ms(events_df: DataFrame) -> DataFrame:
    """Replace ``ts`` by its epoch milliseconds (the walk's clock), whatever type the table keeps."""
    if "ts_ms" in events_df.columns:
        return events_df.withColumn("ts", F.col("ts_ms")).drop("ts_ms")
    if isinstance(events_df.schema["ts"].dataType, T.TimestampType):
        return events_df.withColumn("ts", F.unix_millis("ts"))
    return events_df


def with_run(events_df: DataFrame) -> DataFrame:
    """Add ``run``: how many ``ns_start``/``ns_stop`` events of the server precede or are this event.

    Each server has a handful of those a day, so they travel to the events as a small sorted array
    (a broadcast join) instead of a window over the whole server, which would sort it in one task.
    """
    resets_df = (
        events_df.where(F.col("type").isin("ns_start", "ns_stop"))
        .groupBy("ns")
        .agg(F.array_sort(F.collect_list("seq")).alias("_resets"))
    )
    return (
        events_df.join(F.broadcast(resets_df), "ns", "left")
        .withColumn(
            "run",
            F.when(F.col("_resets").isNull(), F.lit(0)).otherwise(
                F.size(F.filter("_resets", lambda s: s <= F.col("seq")))
            ),
        )
        .drop("_resets")
    )


def _fingerprint() -> Column:
    """What a 103 leaves behind besides ``last_update``: equal fingerprints, equal tables (docstring)."""
    return F.struct("cluster", "broker_name", "broker_id", "ha_addr", "channel", "data_version", "topics_digest")


def _in_stream() -> Column:
    """Events of an address's stream: its registrations and removals."""
    return F.coalesce(_is_103() | _is_removal(), F.lit(False))


def agg_contested_slots(runs_df: DataFrame) -> DataFrame:
    """(ns, run, broker_name, broker_id) slots that more than one address registered into (W8).

    Distinct addresses first, then a count: both hash aggregates (``min``/``max`` of a string would
    sort the whole day).
    """
    return (
        runs_df.where(_is_103())
        .select("ns", "run", "broker_name", "broker_id", "broker_addr")
        .distinct()
        .groupBy("ns", "run", "broker_name", "broker_id")
        .count()
        .where(F.col("count") > 1)
        .select("ns", "run", "broker_name", "broker_id", F.lit(True).alias("_contested"))
    )


def agg_address_streams(runs_df: DataFrame, contested_df: DataFrame) -> DataFrame:
    """Per (ns, run, broker_addr) stream: the seqs where its blocks start, and whether it is *slow*.

    A block is the stream's 103s with one fingerprint and filter list (each removal is a block of
    its own). When the blocks follow each other without interleaving in seq order and none of
    them registers into a contested slot, every 103 of a block but its first leaves the tables as
    they were: no window is needed to say so. Other streams (an address that went back to an
    earlier fingerprint, or was removed and came back unchanged, or shares a slot) are slow and go
    through the windows of :func:`with_interesting`. Blocks are few, so everything after the first
    hash aggregate works on small data.
    """
    carried = F.when(_is_103(), F.struct(_fingerprint().alias("fp"), F.col("filter_servers").alias("fs")))
    blocks_df = (
        runs_df.where(_in_stream())
        .groupBy(
            "ns", "run", "broker_addr", carried.alias("_carried"),
            F.when(_is_removal(), F.col("seq")).alias("_removal"),
            F.when(_is_103(), F.col("broker_name")).alias("broker_name"),
            F.when(_is_103(), F.col("broker_id")).alias("broker_id"),
        )
        .agg(F.min("seq").alias("_lo"), F.max("seq").alias("_hi"))
        .join(F.broadcast(contested_df), ["ns", "run", "broker_name", "broker_id"], "left")
    )
    earlier = Window.partitionBy("ns", "run", "broker_addr").orderBy("_lo").rowsBetween(Window.unboundedPreceding, -1)
    return (
        blocks_df.withColumn("_interleaved", F.coalesce(F.col("_lo") < F.max("_hi").over(earlier), F.lit(False)))
        .groupBy("ns", "run", "broker_addr")
        .agg(
            F.collect_list("_lo").alias("_block_starts"),
            (F.max("_interleaved") | F.max(F.col("_contested").isNotNull())).alias("_slow"),
        )
    )


def agg_last_of_kind(runs_df: DataFrame) -> DataFrame:
    """(ns, seq) of the last heartbeat of each (address, request code, data version) in a run."""
    return (
        runs_df.where(F.col("type") == "heartbeat")
        .groupBy("ns", "run", "broker_addr", "request_code", "data_version")
        .agg(F.max("seq").alias("seq"))
        .select("ns", "seq", F.lit(True).alias("_last_of_kind"))
    )


def with_interesting(events_df: DataFrame) -> DataFrame:
    """Add ``run`` (unless present) and ``interesting``: whether the walk must apply the event.

    * not a ``heartbeat``: interesting, except ``rejected`` (it changes nothing, §6);
    * ``heartbeat`` 904 or 322: only the last of its (address, request code, data version) in the
      run, which fixes ``last_update`` of the end-of-day state;
    * ``heartbeat`` 103: unless the previous register/removal event of the same address in the run
      is a 103 with equal cluster, name, id, HA address, channel, data version and topic digest,
      its filter list is null or equal to the previous one, and the previous 103 on the same
      (name, id) slot came from the same address (W8: another address took the slot); the last
      103 of its (address, data version) in the run is interesting too;
    * a heartbeat with no address or another request code: interesting.

    The bulk (streams whose blocks do not interleave, :func:`agg_address_streams`) is decided by
    aggregates joined back; only slow streams go through the windows by address and by slot.

    Example:
        Two unchanged 103s of one address: the first of the day and the last are interesting,
        those between are not; after a 103 from another address into the same slot, the next
        unchanged 103 of the first address is interesting again.
    """
    runs_df = events_df if "run" in events_df.columns else with_run(events_df)
    contested_df = agg_contested_slots(runs_df)
    keyed_df = runs_df.join(F.broadcast(agg_address_streams(runs_df, contested_df)), ["ns", "run", "broker_addr"],
                            "left")

    by_addr = Window.partitionBy("ns", "run", "broker_addr").orderBy("seq")
    previous = F.last(
        F.struct(_is_103().alias("is_103"), _fingerprint().alias("fp"), F.col("filter_servers").alias("fs")),
        ignorenulls=True,
    ).over(by_addr.rowsBetween(Window.unboundedPreceding, -1))
    # only the 103s of contested slots need the slot order; the rest share one null-keyed partition
    by_slot = Window.partitionBy("ns", "run", "_slot", "broker_name", "broker_id").orderBy("seq")
    prev = F.col("_prev")
    slot_ok = ~F.coalesce(F.col("_contested"), F.lit(False)) | F.lag("broker_addr").over(by_slot).eqNullSafe(
        F.col("broker_addr"))
    slow_df = (
        keyed_df.where(F.col("_slow") & _in_stream())
        .join(F.broadcast(contested_df), ["ns", "run", "broker_name", "broker_id"], "left")
        .withColumn("_prev", previous)
        .withColumn("_slot", F.when(_is_103() & F.col("_contested"), F.lit(True)))
        .withColumn(
            "_unchanged",
            prev.isNotNull()
            & prev["is_103"]
            & prev["fp"].eqNullSafe(_fingerprint())
            & (F.col("filter_servers").isNull() | (prev["fs"].isNotNull() & (prev["fs"] == F.col("filter_servers"))))
            & slot_ok,
        )
        .drop("_prev", "_slot", "_contested")
    )
    fast_df = keyed_df.where(~F.col("_slow") & _in_stream()).withColumn(
        "_unchanged", ~F.array_contains("_block_starts", F.col("seq")))
    rest_df = keyed_df.where(F.col("_slow").isNull() | ~_in_stream()).withColumn("_unchanged", F.lit(None).cast("boolean"))
    marked_df = (
        slow_df.unionByName(fast_df).unionByName(rest_df)
        .join(F.broadcast(agg_last_of_kind(runs_df)), ["ns", "seq"], "left")
    )

    last_of_kind = F.coalesce(F.col("_last_of_kind"), F.lit(False))
    code = F.col("request_code")
    interesting = (
        F.when(F.col("type") == "rejected", F.lit(False))
        .when(F.col("type") != "heartbeat", F.lit(True))
        .when(F.col("broker_addr").isNull() | code.isNull(), F.lit(True))
        .when(code.isin(BROKER_HEARTBEAT, QUERY_DATA_VERSION), last_of_kind)
        .when(code == REGISTER_BROKER, ~F.coalesce(F.col("_unchanged"), F.lit(False)) | last_of_kind)
        .otherwise(F.lit(True))
    )
    return marked_df.withColumn("interesting", interesting).drop("_block_starts", "_slow", "_unchanged", "_last_of_kind")


def with_topics(interesting_df: DataFrame, events_df: DataFrame) -> DataFrame:
    """Add ``topics`` to 103 events: the list logged with their ``topics_digest`` by any event of the
    day (content-addressed, so any server's copy is the event's own), null when never logged.

    Only the few events carrying a list are read for it; the walk input itself never carries the
    day's heaviest column through a join.
    """
    lists_df = (
        events_df.where(F.col("topics").isNotNull() & F.col("topics_digest").isNotNull())
        .groupBy("topics_digest")
        .agg(F.min_by("topics", "seq").alias("_topics"))
    )
    return (
        interesting_df.join(lists_df, "topics_digest", "left")
        .withColumn("topics", F.when(_is_103(), F.col("_topics")))
        .drop("_topics")
    )


# ---------------------------------------------------------------------------- the walk


def agg_walk_meta(marks_df: DataFrame, prev_state_df: DataFrame) -> DataFrame:
    """One row per server to walk: the previous day's ``state_json`` and the day's event counts.

    Servers with no event today but a state from yesterday are included: their tables carry on.
    """
    day_df = marks_df.groupBy("ns").agg(
        F.count(F.lit(1)).alias("day_events"),
        F.max("seq").alias("day_last_seq"),
        F.max_by("ts", "seq").alias("day_last_ts"),
        F.min_by("type", "seq").alias("day_first_type"),
    )
    return (
        day_df.join(prev_state_df.select("ns", F.col("state_json").alias("prev_state_json")), "ns", "full")
        .withColumn("is_meta", F.lit(True))
        .select("ns", "is_meta", "prev_state_json", "day_events", "day_last_seq", "day_last_ts", "day_first_type")
    )


def agg_walk(events_df: DataFrame, marks_df: DataFrame, prev_state_df: DataFrame, day: dt.date) -> DataFrame:
    """Walk each server's interesting events from its previous state (``WALK_OUTPUT_SCHEMA`` rows).

    Args:
        events_df: the day's events, ``ts`` in epoch ms (:func:`with_ts_ms`).
        marks_df: ``with_run(events_df.drop("topics"))``; read several times, so the caller
            caches it.
        prev_state_df: ``ns_state`` rows of the day before (``ns``, ``state_json``).
        day: the UTC day.
    """
    keys_df = with_interesting(marks_df).where("interesting").select("ns", "seq")
    # a few thousand keys per server-day: broadcast them rather than shuffle the day again
    interesting_df = (
        marks_df.join(F.broadcast(keys_df), ["ns", "seq"])
        .transform(lambda df: with_topics(df, events_df))
        .select(*WALK_EVENT_COLUMNS)
        .withColumn("is_meta", F.lit(False))
    )
    walk_input_df = interesting_df.unionByName(agg_walk_meta(marks_df, prev_state_df), allowMissingColumns=True)
    return walk_input_df.groupBy("ns").applyInArrow(_arrow_walker(day), WALK_OUTPUT_SCHEMA)


def _arrow_walker(day: dt.date):
    """The function Spark runs per server (``applyInArrow``); plain data only in its closure."""
    schema = WALK_OUTPUT_SCHEMA

    def walk(table):
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_schema

        return pa.Table.from_pydict(walk_rows(table.to_pylist(), day), schema=to_arrow_schema(schema))

    return walk


# ---------------------------------------------------------------------------- tables


def _interval() -> list[Column | str]:
    """The interval columns of every history table, from the walk's epoch-ms columns."""
    return [
        F.timestamp_millis("valid_from_ms").alias("valid_from_ts"),
        F.timestamp_millis("valid_to_ms").alias("valid_to_ts"),
        "from_seq",
        "to_seq",
    ]


def select_topic_route_history(walk_df: DataFrame, day: dt.date) -> DataFrame:
    """``topic_route_history`` rows of a walk."""
    return walk_df.where(F.col("kind") == "queue").select(
        "ns", "topic", "broker_name", "read_queue_nums", "write_queue_nums", "perm", "topic_sys_flag", *_interval(),
        F.lit(day).alias("date"),
    )


def select_broker_addr_history(walk_df: DataFrame, day: dt.date) -> DataFrame:
    """``broker_addr_history`` rows of a walk."""
    return walk_df.where(F.col("kind") == "addr").select(
        "ns", "cluster", "broker_name", "broker_id", "broker_addr", *_interval(), F.lit(day).alias("date")
    )


def select_cluster_history(walk_df: DataFrame, day: dt.date) -> DataFrame:
    """``cluster_history`` rows of a walk."""
    return walk_df.where(F.col("kind") == "cluster").select("ns", "cluster", "broker_name", *_interval(),
                                                            F.lit(day).alias("date"))


def select_filter_server_history(walk_df: DataFrame, day: dt.date) -> DataFrame:
    """``filter_server_history`` rows of a walk."""
    return walk_df.where(F.col("kind") == "filter").select("ns", "broker_addr", "filter_servers", *_interval(),
                                                           F.lit(day).alias("date"))


def select_ns_runs(walk_df: DataFrame, day: dt.date) -> DataFrame:
    """``ns_runs`` rows of a walk."""
    return walk_df.where(F.col("kind") == "run").select(
        "ns",
        F.timestamp_millis("valid_from_ms").alias("start_ts"),
        F.timestamp_millis("valid_to_ms").alias("stop_ts"),
        F.col("from_seq").alias("start_seq"),
        F.col("to_seq").alias("stop_seq"),
        "stop_reason",
        F.lit(day).alias("date"),
    )


def select_ns_state(walk_df: DataFrame, day: dt.date) -> DataFrame:
    """``ns_state`` rows of a walk."""
    return walk_df.where(F.col("kind") == "state").select(
        F.lit(day).alias("date"), "ns", "up", "up_at_start", "last_seq",
        F.timestamp_millis("last_ts_ms").alias("last_ts"), "events", "interesting_events",
        "started_without_state", "unresolved_topics", "state_json",
    )


# ---------------------------------------------------------------------------- the job


def run_rebuild(spark: SparkSession, lake_dir: str, day: dt.date, snapshot_interval_ms: int = 300_000) -> RebuildResult:
    """Rebuild ``day`` from the lake's ``events`` and the day before's ``ns_state``; replaces the
    day in every rebuilt table (a rerun gives identical rows). ``route_snapshots`` is the next stage,
    :func:`jobs.snapshots.run_snapshots`, which reads what this wrote.

    Args:
        snapshot_interval_ms: unused here; accepted so every stage takes the same arguments.

    Raises:
        FileNotFoundError: the lake has no ``events`` table.
    """
    events_df = with_ts_ms(
        read_table(spark, lake.table_path(lake_dir, lake.EVENTS), EVENTS_TABLE_SCHEMA, where={"date": day})
    ).select(*WALK_EVENT_COLUMNS)
    return rebuild_day(events_df, read_previous_state(spark, lake_dir, day), lake_dir, day)


def read_previous_state(spark: SparkSession, lake_dir: str, day: dt.date) -> DataFrame:
    """``ns_state`` rows of the day before ``day`` (none when the lake has no such table yet)."""
    path = lake.table_path(lake_dir, lake.NS_STATE)
    if not table_exists(path):
        return spark.createDataFrame([], NS_STATE_SCHEMA)
    return read_table(spark, path, NS_STATE_SCHEMA, where={"date": day - dt.timedelta(days=1)})


def rebuild_day(events_df: DataFrame, prev_state_df: DataFrame, lake_dir: str, day: dt.date) -> RebuildResult:
    """Walk one day's events (``WALK_EVENT_COLUMNS``, ``ts`` in ms) from the previous states and
    replace the day in the rebuilt tables."""
    marks_df = with_run(events_df.drop("topics")).persist()
    walk_df = agg_walk(events_df, marks_df, prev_state_df, day).persist()
    try:
        # Fill the cache before the walk's plan runs: its broadcast sub-jobs start concurrently and
        # would each scan the whole day again while the cache is still being built.
        marks_df.count()
        walk_df.count()  # walk once; the writes read the walk's cache
        marks_df.unpersist()
        tables = (
            (lake.TOPIC_ROUTE_HISTORY, select_topic_route_history, TOPIC_ROUTE_HISTORY_SCHEMA),
            (lake.BROKER_ADDR_HISTORY, select_broker_addr_history, BROKER_ADDR_HISTORY_SCHEMA),
            (lake.CLUSTER_HISTORY, select_cluster_history, CLUSTER_HISTORY_SCHEMA),
            (lake.FILTER_SERVER_HISTORY, select_filter_server_history, FILTER_SERVER_HISTORY_SCHEMA),
            (lake.NS_RUNS, select_ns_runs, NS_RUNS_SCHEMA),
            (lake.NS_STATE, select_ns_state, NS_STATE_SCHEMA),
        )
        for name, select, schema in tables:
            _replace_day(select(walk_df, day), lake.table_path(lake_dir, name), schema, day)
        states = select_ns_state(walk_df, day).select(
            "ns", "events", "interesting_events", "started_without_state", "unresolved_topics"
        ).collect()  # one small row per server: the job's report, not data
    finally:
        marks_df.unpersist()
        walk_df.unpersist()
    return RebuildResult(
        day=day,
        servers=tuple(sorted(r["ns"] for r in states)),
        events=sum(r["events"] for r in states),
        interesting_events=sum(r["interesting_events"] for r in states),
        started_without_state=tuple(sorted(r["ns"] for r in states if r["started_without_state"])),
        unresolved_topics=sum(r["unresolved_topics"] for r in states),
    )


def _replace_day(df: DataFrame, path: str, schema: T.StructType, day: dt.date) -> None:
    write_table(df, path, mode="overwrite", partition_by=PARTITION_BY, replace_where={"date": day}, schema=schema)
