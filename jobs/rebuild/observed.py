"""The route tables of observed name servers (``nsaudit collect`` streams) as step functions of
their observations (docs/event-log.md, "Observations"; docs/audit.md, "Observed servers").

An observation stream is cut into *epochs*: each ``observe_snapshot`` starts one, which lasts until
the stream's next boundary event (``observe_snapshot``, ``observe_error``, ``observe_stop`` or
``observe_start``) or the end of the day. Inside an epoch every ``observed_broker`` and
``observed_route`` holds its entry until the next event of the same entry or the epoch's end, so
an entry a snapshot no longer lists ends at that snapshot. Outside every epoch nothing is known of
the server: no rows, and no ``ns_runs`` run. Everything is column expressions over windows per
stream (``seq`` order); no row is walked in Python.

The resolution of these tables is the collector's poll interval (``interval_ms`` of the run's
``observe_start``, or the day before's when the run began earlier): a change is seen up to one
interval after it happened. It is written to ``ns_runs.resolution_ms`` and
``ns_state.resolution_ms`` (null for nsaudit's own servers).
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs.spark.profile import broadcast

OBSERVED_EVENT_COLUMNS = (
    "ns",
    "seq",
    "ts",
    "type",
    "interval_ms",
    "cluster",
    "broker_name",
    "broker_addrs",
    "topic",
    "queue_datas",
    "filter_server_table",
)

# ``ns_state.state_json`` of an observed server (``observed`` true): each day's observations begin
# with a snapshot, so nothing carries to the next day's rebuild (it skips these rows).
OBSERVED_STATE_JSON = '{"observed":true}'

_BOUNDARIES = ("observe_snapshot", "observe_error", "observe_stop", "observe_start")


def _stream() -> WindowSpec:
    """A stream's events in ``seq`` order (built on call: a window needs the active session)."""
    return Window.partitionBy("ns").orderBy("seq")


def _before() -> WindowSpec:
    return _stream().rowsBetween(Window.unboundedPreceding, Window.currentRow)


def _after() -> WindowSpec:
    return _stream().rowsBetween(1, Window.unboundedFollowing)


def _is_boundary() -> Column:
    return F.col("type").isin(*_BOUNDARIES)


def with_epochs(obs_df: DataFrame, prev_resolution_df: DataFrame) -> DataFrame:
    """Add to every observation event its epoch (``epoch_seq``, ``epoch_type``: the last boundary at
    or before it), the epoch's end (``end_ts``, ``end_seq``, ``end_type``: the next boundary, null
    at the end of the day) and ``resolution_ms``.

    Args:
        obs_df: one day's observation events (``OBSERVED_EVENT_COLUMNS``, ``ts`` in ms).
        prev_resolution_df: ``ns``, ``prev_resolution_ms``: the day before's resolution per stream.
    """
    boundary = _is_boundary()
    nxt = F.first(F.when(boundary, F.struct("ts", "seq", "type")), ignorenulls=True).over(_after())
    return (
        obs_df.join(broadcast(prev_resolution_df), "ns", "left")
        .withColumn("epoch_seq", F.last(F.when(boundary, F.col("seq")), ignorenulls=True).over(_before()))
        .withColumn("epoch_type", F.last(F.when(boundary, F.col("type")), ignorenulls=True).over(_before()))
        .withColumn(
            "resolution_ms",
            F.coalesce(
                F.last(F.when(F.col("type") == "observe_start", F.col("interval_ms")), ignorenulls=True).over(
                    _before()
                ),
                F.col("prev_resolution_ms"),
            ),
        )
        .withColumn("next", nxt)
        .select(
            "*",
            F.col("next.ts").alias("end_ts"),
            F.col("next.seq").alias("end_seq"),
            F.col("next.type").alias("end_type"),
        )
        .drop("next", "prev_resolution_ms")
    )


def select_observed_runs(epochs_df: DataFrame, day: dt.date) -> DataFrame:
    """``ns_runs`` rows: the periods in which the server's state is known, from a snapshot that
    follows no other snapshot to the next ``observe_error``/``observe_stop``/``observe_start``
    (its type is the ``stop_reason``) or the end of the day (``open``)."""
    snapshot = F.col("type") == "observe_snapshot"
    ending = F.first(F.when(~snapshot, F.struct("ts", "seq", "type")), ignorenulls=True).over(_after())
    bounds_df = (
        epochs_df.where(_is_boundary())
        .withColumn("prev_type", F.lag("type").over(_stream()))
        .withColumn("ending", ending)
    )
    return bounds_df.where(snapshot & F.coalesce(F.col("prev_type") != "observe_snapshot", F.lit(True))).select(
        "ns",
        F.timestamp_millis("ts").alias("start_ts"),
        F.timestamp_millis(F.col("ending.ts")).alias("stop_ts"),
        F.col("seq").alias("start_seq"),
        F.col("ending.seq").alias("stop_seq"),
        F.coalesce(F.col("ending.type"), F.lit("open")).alias("stop_reason"),
        F.col("resolution_ms").cast(T.LongType()).alias("resolution_ms"),
        F.lit(day).alias("date"),
    )


def with_entry_intervals(epochs_df: DataFrame) -> DataFrame:
    """The ``observed_broker`` and ``observed_route`` events inside an epoch, each with the interval
    its value holds (``valid_from_ms`` .. ``valid_to_ms``, ``from_seq`` .. ``to_seq``): up to the
    next event of the same entry in the epoch, else the epoch's end (null: open at the end of the
    day). Removals (null values) and empty intervals are dropped."""
    entry = Window.partitionBy("ns", "epoch_seq", "type", "key").orderBy("seq")
    present = F.when(F.col("type") == "observed_broker", F.col("broker_addrs").isNotNull()).otherwise(
        F.col("queue_datas").isNotNull()
    )
    valid_to = F.coalesce(F.lead("ts").over(entry), F.col("end_ts"))
    return (
        epochs_df.where(
            F.col("type").isin("observed_broker", "observed_route") & (F.col("epoch_type") == "observe_snapshot")
        )
        .withColumn("key", F.coalesce("topic", "broker_name"))
        .withColumn("valid_to_ms", valid_to)
        .withColumn("to_seq", F.coalesce(F.lead("seq").over(entry), F.col("end_seq")))
        .where(present & (F.col("valid_to_ms").isNull() | (F.col("valid_to_ms") > F.col("ts"))))
        .withColumn("valid_from_ms", F.col("ts"))
        .withColumn("from_seq", F.col("seq"))
    )


def _interval(day: dt.date) -> list[Column]:
    return [
        F.timestamp_millis("valid_from_ms").alias("valid_from_ts"),
        F.timestamp_millis("valid_to_ms").alias("valid_to_ts"),
        F.col("from_seq"),
        F.col("to_seq"),
        F.lit(day).alias("date"),
    ]


def select_observed_topic_routes(entries_df: DataFrame, day: dt.date) -> DataFrame:
    """``topic_route_history`` rows: one per queue data of each observed route."""
    return (
        entries_df.where(F.col("type") == "observed_route")
        .select("*", F.explode("queue_datas").alias("q"))
        .select(
            "ns",
            "topic",
            F.col("q.broker_name").alias("broker_name"),
            F.col("q.read_queue_nums").alias("read_queue_nums"),
            F.col("q.write_queue_nums").alias("write_queue_nums"),
            F.col("q.perm").alias("perm"),
            F.col("q.topic_sys_flag").alias("topic_sys_flag"),
            *_interval(day),
        )
    )


def select_observed_broker_addrs(entries_df: DataFrame, day: dt.date) -> DataFrame:
    """``broker_addr_history`` rows: one per address of each broker name of the cluster info."""
    return (
        entries_df.where(F.col("type") == "observed_broker")
        .select("*", F.explode("broker_addrs").alias("a"))
        .select(
            "ns",
            F.coalesce("cluster", F.lit("")).alias("cluster"),
            "broker_name",
            F.col("a.broker_id").alias("broker_id"),
            F.col("a.broker_addr").alias("broker_addr"),
            *_interval(day),
        )
    )


def select_observed_clusters(entries_df: DataFrame, day: dt.date) -> DataFrame:
    """``cluster_history`` rows: each broker name of the cluster info in its cluster."""
    return entries_df.where(F.col("type") == "observed_broker").select(
        "ns", F.coalesce("cluster", F.lit("")).alias("cluster"), "broker_name", *_interval(day)
    )


def select_observed_filter_servers(entries_df: DataFrame, day: dt.date) -> DataFrame:
    """``filter_server_history`` rows: the filter servers each route answer listed. Every route of a
    broker carries the same server-wide list, so rows repeat across topics; distinct rows are kept,
    and intervals of one address may overlap (each topic's answer has its own)."""
    return (
        entries_df.where(F.col("type") == "observed_route")
        .select("*", F.explode("filter_server_table").alias("f"))
        .where(F.size("f.filter_servers") > 0)
        .select(
            "ns",
            F.col("f.broker_addr").alias("broker_addr"),
            F.col("f.filter_servers").alias("filter_servers"),
            *_interval(day),
        )
        .distinct()
    )


def select_observed_state(epochs_df: DataFrame, runs_df: DataFrame, day: dt.date) -> DataFrame:
    """``ns_state`` rows: one per observed stream; ``up`` when its state is known at the end of the
    day, ``up_at_start`` false (nothing is known before the day's first snapshot)."""
    open_df = runs_df.groupBy("ns").agg(F.max(F.col("stop_reason") == "open").alias("up"))
    return (
        epochs_df.groupBy("ns")
        .agg(
            F.max("seq").alias("last_seq"),
            F.max("ts").alias("last_ts_ms"),
            F.count(F.lit(1)).alias("events"),
            F.max_by("resolution_ms", "seq").alias("resolution_ms"),
        )
        .join(open_df, "ns", "left")
        .select(
            F.lit(day).alias("date"),
            "ns",
            F.coalesce("up", F.lit(False)).alias("up"),
            F.lit(False).alias("up_at_start"),
            "last_seq",
            F.timestamp_millis("last_ts_ms").alias("last_ts"),
            "events",
            F.lit(0).cast(T.LongType()).alias("interesting_events"),
            F.lit(False).alias("started_without_state"),
            F.lit(0).cast(T.LongType()).alias("unresolved_topics"),
            F.lit(OBSERVED_STATE_JSON).alias("state_json"),
            F.lit(True).alias("observed"),
            F.col("resolution_ms").cast(T.LongType()),
        )
    )
