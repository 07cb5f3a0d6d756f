"""Liveness windows from the address stream: the one sort of the liveness stage.

Every address event of a day is ordered by ``seq`` within its *stream* (ns, address, run), which
is the stage's cost, so the rows that go through that sort carry numbers only (:func:`with_stream_id`)
and a window's strings are looked up afterwards for its few rows. What opens, refreshes and ends a
window: docs/audit.md, "Liveness".
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame, Window, WindowSpec
from pyspark.sql import functions as F
from pyspark.sql import types as T

from common.timeutil import day_start_ms
from jobs.spark.profile import broadcast
from nameserver.codec import RequestCode
from schemas.events import REMOVAL_TYPES

REGISTER_BROKER = int(RequestCode.REGISTER_BROKER)  # a plain int: Spark makes a literal of it

# Stream row kinds. The removals come last, in REMOVAL_TYPES order, so ``kind >= UNREGISTER`` is
# a removal and ``kind - UNREGISTER`` indexes REMOVAL_TYPES.
CARRY = 0  # synthetic row: a window open at the end of the previous day
REGISTER_103, REGISTER_OTHER = 1, 2  # a register (REGISTER_BROKER, or a request code that is not)
HEARTBEAT_103, HEARTBEAT_904, HEARTBEAT_322, HEARTBEAT_OTHER = 3, 4, 5, 6
UNREGISTER, EXPIRE, CHANNEL_CLOSE = 7, 8, 9

# an address event or _carry row, before its stream is numbered; ts_ms of a CARRY row is the
# previous day's last refresh
ADDRESS_COLUMNS = ("ns", "broker_addr", "seq", "ts_ms", "kind", "dv_ts", "dv_counter")
STREAM_KEYS = ("ns", "broker_addr", "run")  # one stream: what `sid` numbers
STREAM_COLUMNS = ("sid", "seq", "ts_ms", "kind", "dv_ts", "dv_counter")  # what the sort carries
WINDOW_KEYS = ("sid", "wkey")  # one liveness window
MAX_SEQ = 2**63 - 1


def _kind() -> Column:
    return F.col("kind")


def _is_register() -> Column:
    return _kind().isin(REGISTER_103, REGISTER_OTHER)


def _is_103() -> Column:
    return _kind().isin(REGISTER_103, HEARTBEAT_103)


def _is_removal() -> Column:
    return _kind() >= UNREGISTER


def _is_carry() -> Column:
    return _kind() == CARRY


def _proves_live() -> Column:
    # events the server writes only for a live address: they prove a window the log began inside
    return _is_103() | _kind().isin(EXPIRE, CHANNEL_CLOSE)


def event_kind() -> Column:
    """The stream ``kind`` of an address event, from its ``type`` and ``request_code``."""
    type_, code = F.col("type"), F.col("request_code")
    return (
        F.when(type_ == "register", F.when(code == REGISTER_BROKER, REGISTER_103).otherwise(REGISTER_OTHER))
        .when(
            type_ == "heartbeat",
            F.when(code == REGISTER_BROKER, HEARTBEAT_103)
            .when(code == int(RequestCode.BROKER_HEARTBEAT), HEARTBEAT_904)
            .when(code == int(RequestCode.QUERY_DATA_VERSION), HEARTBEAT_322)
            .otherwise(HEARTBEAT_OTHER),
        )
        .when(type_ == "unregister", UNREGISTER)
        .when(type_ == "expire", EXPIRE)
        .when(type_ == "channel_close", CHANNEL_CLOSE)
        .cast(T.ByteType())
    )


def removal_type(kind: Column) -> Column:
    """The event type of a removal ``kind`` (null for any other kind)."""
    return F.when(kind >= UNREGISTER, F.get(F.array(*[F.lit(r) for r in REMOVAL_TYPES]), kind - UNREGISTER))


def select_address_stream(events_df: DataFrame) -> DataFrame:
    """The events that touch a live entry, with an address, as ``ADDRESS_COLUMNS`` rows."""
    dv = F.col("data_version")
    return events_df.where(
        F.col("type").isin("register", "heartbeat", *REMOVAL_TYPES) & F.col("broker_addr").isNotNull()
    ).select(
        "ns",
        "broker_addr",
        "seq",
        "ts_ms",
        event_kind().alias("kind"),
        dv["timestamp"].alias("dv_ts"),
        dv["counter"].alias("dv_counter"),
    )


def select_carry_stream(carry_df: DataFrame) -> DataFrame:
    """``ADDRESS_COLUMNS`` rows of the ``_carry`` rows (``ns``, ``broker_addr``, ``last_update_ms``).

    ``seq`` 0 puts the row before every event (seqs start at 1); its ``ts_ms`` is the window's last
    refresh, so the first gap of the day and the expiry check see across midnight.
    """
    return carry_df.select(
        "ns",
        "broker_addr",
        F.lit(0).cast(T.LongType()).alias("seq"),
        F.col("last_update_ms").alias("ts_ms"),
        F.lit(CARRY).cast(T.ByteType()).alias("kind"),
        F.lit(None).cast(T.LongType()).alias("dv_ts"),
        F.lit(None).cast(T.LongType()).alias("dv_counter"),
    )


def number_streams(streams_df: DataFrame, run_intervals_df: DataFrame) -> DataFrame:
    """Number the day's streams: ``sid``, ``STREAM_KEYS``, and the run's seq range ``[lo_seq, hi_seq)``.

    The numbers count from 0 in (ns, broker_addr, run) order, so a recomputation gives the same
    ones. The streams are few (a row per address and server run), so they are numbered in one
    sorted partition, where ``monotonically_increasing_id`` is the row's position (a window
    without partition keys would do the same, and log a warning each time).

    Args:
        streams_df: ``STREAM_KEYS`` of the day's streams, duplicates allowed.
        run_intervals_df: :func:`jobs.analytics.liveness.runs.agg_run_intervals`; a server without
            resets today is in run 0 all day.
    """
    ranges_df = run_intervals_df.select("ns", "run", "lo_seq", "hi_seq")
    return (
        streams_df.select(*STREAM_KEYS)
        .distinct()
        .join(broadcast(ranges_df), ["ns", "run"], "left")
        .repartition(1)
        .sortWithinPartitions(*STREAM_KEYS)
        .select(
            F.monotonically_increasing_id().cast(T.IntegerType()).alias("sid"),
            *STREAM_KEYS,
            F.coalesce(F.col("lo_seq"), F.lit(0).cast(T.LongType())).alias("lo_seq"),
            F.coalesce(F.col("hi_seq"), F.lit(MAX_SEQ)).alias("hi_seq"),
        )
    )


def with_stream_id(address_df: DataFrame, numbered_df: DataFrame) -> DataFrame:
    """``STREAM_COLUMNS`` of ``ADDRESS_COLUMNS`` rows: their stream's ``sid`` instead of its strings.

    The rows that go through the stage's sort carry numbers only: the stream as one int ``sid``
    (:func:`number_streams` numbers the day's few streams), the event's ``kind`` (its type and
    request code as one small int), ``seq``, ``ts_ms`` and the data version as two longs. The strings
    a window reports are looked up afterwards for its few rows: the stream's ``ns`` and
    ``broker_addr`` by ``sid``, and its identity by the seq of the event that names the window
    (:func:`agg_windows` keeps it as ``id_seq``; :mod:`jobs.analytics.liveness.identity` fetches that
    event's ``cluster``, ``broker_name`` and ``broker_id``).

    A broadcast join on (ns, broker_addr) whose seq range picks the run, as
    :func:`jobs.analytics.liveness.runs.with_run` does; every row must have its stream in ``numbered_df``
    (:func:`number_streams`), or it is dropped.
    """
    keys_df = numbered_df.select(
        F.col("ns").alias("_s_ns"), F.col("broker_addr").alias("_s_addr"), "sid", "lo_seq", "hi_seq"
    )
    inside = (
        (F.col("ns") == F.col("_s_ns"))
        & (F.col("broker_addr") == F.col("_s_addr"))
        & (F.col("seq") >= F.col("lo_seq"))
        & (F.col("seq") < F.col("hi_seq"))
    )
    return address_df.join(broadcast(keys_df), inside, "inner").select(*STREAM_COLUMNS)


def with_window_keys(stream_df: DataFrame) -> DataFrame:
    """Assign every stream row (``STREAM_COLUMNS``) to its liveness window.

    Adds, over the stream (``sid``) ordered by seq:

    * ``wkey``: seq of the ``register`` that opened the row's window; 0 for the leading segment
      (events before the run's first register, which may continue a window from before 00:00);
    * ``in_window``: the row lies inside the window: no removal since its start (the removal
      that ends the window is inside);
    * ``is_refresh``: it sets ``last_update`` (docs/audit.md, "Liveness"); ``gap_ms``: time since
      the previous refresh point of the same window, null on the row that opens it.

    A refresh point is a refresh, or a ``_carry`` row with a last refresh (its ``ts_ms``).
    Because every window starts with a refresh (its ``register``, or the ``_carry`` row), the
    latest refresh or 103 before a row inside a window always lies in that window, so plain
    running values suffice. All frames run from the partition's start (one pass each); a frame
    reaching the partition's end would be recomputed per row, quadratic in a day's heartbeats.

    Example:
        register@1 (wkey 1, no gap), heartbeat@2 (wkey 1, gap), expire@3 (in_window, ends it),
        a 904@4 after it is in no window (``in_window`` false), register@5 opens wkey 5.
    """
    # an int partition key: the sort compares rows of different streams by their prefix alone
    by_addr = Window.partitionBy("sid").orderBy("seq")
    upto = by_addr.rowsBetween(Window.unboundedPreceding, Window.currentRow)
    before = by_addr.rowsBetween(Window.unboundedPreceding, -1)
    is_103 = _is_103()

    def running_last(value: Column, frame: WindowSpec) -> Column:
        # longs, not structs: the window buffers stay primitive
        return F.last(value, ignorenulls=True).over(frame)

    # one select per pass: Spark then evaluates its window columns in one Window operator, which
    # buffers each partition once (one withColumn per window column would buffer it per column)
    keyed_df = stream_df.select(
        "*",
        running_last(F.when(_is_register(), F.col("seq")), upto).alias("_start_seq"),
        running_last(F.when(_is_removal(), F.col("seq")), before).alias("_removal_before"),
        running_last(F.when(is_103, F.col("dv_ts")), before).alias("_stored_ts"),
        running_last(F.when(is_103, F.col("dv_counter")), before).alias("_stored_counter"),
    )
    in_window = F.col("_removal_before").isNull() | (F.col("_removal_before") < F.col("_start_seq"))
    same_version = (F.col("dv_ts") == F.col("_stored_ts")) & (F.col("dv_counter") == F.col("_stored_counter"))
    refresh = in_window & (
        is_103 | (_kind() == HEARTBEAT_904) | ((_kind() == HEARTBEAT_322) & F.coalesce(same_version, F.lit(False)))
    )
    point = F.col("is_refresh") | (_is_carry() & F.col("ts_ms").isNotNull())
    refreshed_df = keyed_df.select(
        *STREAM_COLUMNS,
        F.coalesce(F.col("_start_seq"), F.lit(0).cast(T.LongType())).alias("wkey"),
        in_window.alias("in_window"),
        F.coalesce(refresh, F.lit(False)).alias("is_refresh"),
    )
    return (
        refreshed_df.withColumn("refresh_point", point)
        .withColumn("_prev_ms", running_last(F.when(F.col("refresh_point"), F.col("ts_ms")), before))
        .withColumn("gap_ms", F.when(F.col("is_refresh") & ~_is_register(), F.col("ts_ms") - F.col("_prev_ms")))
        .drop("_prev_ms")
    )


def agg_gap_counts(keyed_df: DataFrame) -> DataFrame:
    """The rows inside windows per (window, ``gap_ms``): fixed-width aggregates and ``_gaps``, the
    number of non-null gaps of that length.

    The first step of :func:`agg_windows`, which composes these rows per window (mins of mins,
    sums of counts) and reads its exact gap percentiles off the counts. Being fixed-width, the
    aggregate is hashed; a quantile summary or a list of gaps per window would make Spark sort
    every row for it. Heartbeat gaps repeat (a period plus some jitter), so a window of thousands
    of heartbeats has a few hundred rows here.

    Returns:
        ``WINDOW_KEYS``, ``gap_ms`` (null for the rows without a gap), ``_carried``, ``_proof``,
        ``_start_ms``, ``_removal_ms``, ``_removal_kind``, ``id_seq``, ``heartbeats``, ``_gaps``,
        ``_last_update_ms``.
    """
    removal = _is_removal()
    return (
        keyed_df.where("in_window")
        .groupBy(*WINDOW_KEYS, "gap_ms")
        .agg(
            F.max(_is_carry()).alias("_carried"),
            F.max(_proves_live()).alias("_proof"),
            F.min(F.when(_is_register(), F.col("ts_ms"))).alias("_start_ms"),
            F.min(F.when(removal, F.col("ts_ms"))).alias("_removal_ms"),
            F.max(F.when(removal, _kind())).alias("_removal_kind"),
            F.max(F.when(_proves_live() | _is_carry(), F.col("seq"))).alias("id_seq"),
            F.count(F.when(F.col("is_refresh"), 1)).alias("heartbeats"),
            F.count("gap_ms").alias("_gaps"),
            F.max(F.when(F.col("refresh_point"), F.col("ts_ms"))).alias("_last_update_ms"),
        )
    )


def agg_windows(
    keyed_df: DataFrame, numbered_df: DataFrame, run_intervals_df: DataFrame, day: dt.date, late_gap_ms: int
) -> DataFrame:
    """One row per liveness window: ``LIVENESS_WINDOWS_SCHEMA`` columns but the identity, plus
    ``run`` and ``id_seq`` (the seq of the event that names the window, see
    :func:`jobs.analytics.liveness.identity.with_window_identity`).

    A leading segment (``wkey`` 0) is a window only when it continues one from the day before
    (``_carry`` row) or its events prove a live entry; it then starts at 00:00. A window holds at
    most one removal (the first ends it), so its time and kind come from separate aggregates.

    ``p50_gap_ms`` and ``p99_gap_ms`` are exact: of a window's ``n`` gaps, the one at rank
    ``max(1, ceil(p * n))`` in ascending order (null without gaps). That is what
    ``percentile_approx`` returns while its summary keeps every value, as it does for the few
    thousand gaps of a window of 30 s heartbeats.

    Args:
        keyed_df: :func:`with_window_keys` output.
        numbered_df: :func:`number_streams` (each window's ``ns``, ``broker_addr`` and ``run``).
        run_intervals_df: :func:`jobs.analytics.liveness.runs.agg_run_intervals` (the reset that
            ends a run ends its windows).
        day: the UTC day (``date`` and the 00:00 start of carried windows).
        late_gap_ms: a longer gap between refreshes is a late heartbeat.
    """
    windows_df = _agg_window_rows(_with_gap_ranks(keyed_df), numbered_df, run_intervals_df, late_gap_ms)
    end_ms, end_reason = _window_end()
    leading = F.col("wkey") == 0
    start_ms = F.when(leading, F.lit(day_start_ms(day))).otherwise(F.col("_start_ms"))
    return (
        windows_df.withColumn("_end_ms", end_ms)
        .withColumn("_begin_ms", start_ms)
        .select(
            F.lit(day).alias("date"),
            "ns",
            "broker_addr",
            F.timestamp_millis("_begin_ms").alias("start_ts"),
            F.timestamp_millis("_end_ms").alias("end_ts"),
            end_reason.alias("end_reason"),
            F.when(leading, F.when(F.col("_carried"), F.lit("previous_day")).otherwise(F.lit("unknown"))).alias(
                "carried_in"
            ),
            "heartbeats",
            "max_gap_ms",
            F.col("_p50_ms").alias("p50_gap_ms"),
            F.col("_p99_ms").alias("p99_gap_ms"),
            "late_heartbeats",
            F.timestamp_millis("_last_update_ms").alias("last_update_ts"),
            (F.col("_end_ms") - F.col("_begin_ms")).alias("duration_ms"),
            "run",
            "id_seq",
        )
    )


def _with_gap_ranks(keyed_df: DataFrame) -> DataFrame:
    """:func:`agg_gap_counts` rows with ``_at_or_below`` (the window's gaps up to this length) and
    ``_n`` (all its gaps)."""
    ordered = Window.partitionBy(*WINDOW_KEYS).orderBy(F.col("gap_ms").asc_nulls_last())
    return agg_gap_counts(keyed_df).select(
        "*",
        F.sum("_gaps").over(ordered.rowsBetween(Window.unboundedPreceding, Window.currentRow)).alias("_at_or_below"),
        F.sum("_gaps").over(ordered.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)).alias("_n"),
    )


def _gap_percentile(p: float) -> Column:
    # exact: the least gap with at least max(1, ceil(p * n)) of the window's n gaps at or below it
    rank = F.greatest(F.lit(1), F.ceil(F.lit(float(p)) * F.col("_n")))
    return F.min(F.when(F.col("gap_ms").isNotNull() & (F.col("_at_or_below") >= rank), F.col("gap_ms")))


def _agg_window_rows(
    gaps_df: DataFrame, numbered_df: DataFrame, run_intervals_df: DataFrame, late_gap_ms: int
) -> DataFrame:
    """One row per window from :func:`_with_gap_ranks` rows, with its stream's keys, the next
    window's start (``_next_register``) and the reset that ends its run (``_next_reset``)."""
    return (
        gaps_df.groupBy(*WINDOW_KEYS)
        .agg(
            F.max("_carried").alias("_carried"),
            F.max("_proof").alias("_proof"),
            F.min("_start_ms").alias("_start_ms"),
            F.min("_removal_ms").alias("_removal_ms"),
            F.max("_removal_kind").alias("_removal_kind"),
            F.max("id_seq").alias("id_seq"),
            F.sum("heartbeats").alias("heartbeats"),
            F.max("gap_ms").alias("max_gap_ms"),
            _gap_percentile(0.5).alias("_p50_ms"),
            _gap_percentile(0.99).alias("_p99_ms"),
            F.sum(F.when(F.col("gap_ms") > late_gap_ms, F.col("_gaps")).otherwise(0)).alias("late_heartbeats"),
            F.max("_last_update_ms").alias("_last_update_ms"),
        )
        # the next window's register ends a window that saw no removal (lost lines, see the
        # package docstring)
        .withColumn("_next_register", F.lead("_start_ms").over(Window.partitionBy("sid").orderBy("wkey")))
        .where((F.col("wkey") > 0) | F.col("_carried") | F.col("_proof"))
        .join(broadcast(numbered_df.select("sid", *STREAM_KEYS)), ["sid"], "inner")
        .join(
            broadcast(run_intervals_df.select("ns", "run", F.col("next_reset").alias("_next_reset"))),
            ["ns", "run"],
            "left",
        )
    )


def _window_end() -> tuple[Column, Column]:
    """A window's end (epoch ms) and end reason: its removal, else the next window's register
    (lost lines), else the reset that ends its run; ``open`` without any."""
    removal_ms, next_register, reset = F.col("_removal_ms"), F.col("_next_register"), F.col("_next_reset")
    end_ms = (
        F.when(removal_ms.isNotNull(), removal_ms)
        .when(next_register.isNotNull(), next_register)
        .otherwise(reset["ts_ms"])
    )
    end_reason = (
        F.when(removal_ms.isNotNull(), removal_type(F.col("_removal_kind")))
        .when(next_register.isNotNull(), F.lit("unknown"))
        .when(reset["type"] == "ns_stop", F.lit("ns_stop"))
        .when(reset["type"] == "ns_start", F.lit("ns_restart"))
        .otherwise(F.lit("open"))
    )
    return end_ms, end_reason
