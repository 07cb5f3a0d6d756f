"""Liveness as observed: what the polls of a real name server (``nsaudit collect``) show of its
brokers and of the server itself, where no heartbeat, expiry or restart is logged.

From outside, a broker killed with ``kill -9``, one shut down cleanly and one expired all look the
same: the server stopped listing the address. A server that stopped answering and came back with
fewer brokers than it had emptied its tables: it restarted. Both are read from the rebuild's
tables of the observed servers (docs/audit.md, "Observed servers"): ``broker_addr_history``
(the cluster info) and ``ns_runs`` (the known periods).
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from common.timeutil import DAY_MS, day_start_ms
from jobs.analytics.liveness.findings import FINDING_COLUMNS, liveness_finding
from jobs.spark.profile import broadcast

OBSERVED_BROKER_GONE = "observed_broker_gone"
OBSERVED_SERVER_DOWN = "observed_server_down"


def _ms(ts: str) -> Column:
    return F.unix_millis(F.col(ts))


def _known_periods(runs_df: DataFrame, day: dt.date) -> DataFrame:
    """``ns``, ``_run_start_ms``, ``_run_end_ms``: each known period, an open one up to midnight."""
    day_end = F.lit(day_start_ms(day) + DAY_MS).cast("long")
    return runs_df.select(
        "ns", _ms("start_ts").alias("_run_start_ms"), F.coalesce(_ms("stop_ts"), day_end).alias("_run_end_ms")
    )


def agg_observed_broker_gone_findings(addr_df: DataFrame, runs_df: DataFrame, day: dt.date) -> DataFrame:
    """``observed_broker_gone`` (warning): an observed server stopped listing a broker address in
    its cluster info inside a known period.

    It begins at the round that no longer listed the address and ends at the round that listed it
    again, or at the end of the known period (after it nothing is known: ``returned`` false) or of
    the day (``still_gone``). An address whose entry ends where a new one of it begins (its broker
    name's addresses changed, a snapshot) never left; one whose entry ends with the known period
    left the record, not the server.

    Args:
        addr_df: ``broker_addr_history`` rows of the observed servers of the day.
        runs_df: ``ns_runs`` rows of the observed servers of the day.
        day: the UTC day.

    Example:
        ``127.0.0.1:10911`` (``scn-k``, id 0) listed by ``nsA`` until the round of 10:00:02, never
        again: one finding 10:00:02 to the end of nsA's known period, ``returned`` false.
    """
    entries = Window.partitionBy("ns", "broker_addr").orderBy("valid_from_ts")
    ends_df = (
        addr_df.withColumn("_next_ms", F.lead(_ms("valid_from_ts")).over(entries))
        .withColumn("_gone_ms", _ms("valid_to_ts"))
        .where(F.col("_gone_ms").isNotNull() & (F.col("_next_ms").isNull() | (F.col("_next_ms") > F.col("_gone_ms"))))
    )
    runs = _known_periods(runs_df, day)
    inside = (
        (ends_df["ns"] == runs["ns"])
        & (F.col("_gone_ms") >= F.col("_run_start_ms"))
        & (F.col("_gone_ms") < F.col("_run_end_ms"))
    )
    returned = F.col("_next_ms").isNotNull() & (F.col("_next_ms") <= F.col("_run_end_ms"))
    end_ms = F.when(returned, F.col("_next_ms")).otherwise(F.col("_run_end_ms"))
    day_end = day_start_ms(day) + DAY_MS
    return (
        ends_df.join(broadcast(runs), inside)
        .drop(runs["ns"])
        .withColumn("_returned", returned)
        .withColumn("_end_ms", end_ms)
        .select(
            liveness_finding(
                OBSERVED_BROKER_GONE,
                "warning",
                F.col("broker_addr"),
                F.col("_gone_ms"),
                F.col("_end_ms"),
                F.struct(
                    "cluster",
                    "broker_name",
                    "broker_id",
                    F.col("valid_from_ts").alias("listed_since"),
                    (F.col("_end_ms") - F.col("_gone_ms")).alias("duration_ms"),
                    F.col("_returned").alias("returned"),
                    (~F.col("_returned") & (F.col("_run_end_ms") == day_end)).alias("still_gone"),
                ),
            )
        )
        .select(*FINDING_COLUMNS)
    )


def agg_observed_server_down_findings(runs_df: DataFrame, addr_df: DataFrame, day: dt.date) -> DataFrame:
    """``observed_server_down`` (warning): an observed server stopped answering the collector.

    It spans the ``observe_error`` that ended a known period to the snapshot that began the next
    one, or midnight. ``brokers_before`` are the addresses it listed when it failed and
    ``brokers_after`` those of its first answer back; fewer after than before means the server
    emptied its tables, that is, restarted (``tables_emptied``); as many means it was cut off or
    stalled with its tables kept. A collector stopped or restarted (``observe_stop``,
    ``observe_start``) is no server down.

    Args:
        runs_df: ``ns_runs`` rows of the observed servers of the day.
        addr_df: ``broker_addr_history`` rows of the observed servers of the day.
        day: the UTC day.
    """
    day_end = day_start_ms(day) + DAY_MS
    after_run = Window.partitionBy("ns").orderBy("start_ts")
    down_df = (
        runs_df.withColumn("_back_ms", F.lead(_ms("start_ts")).over(after_run))
        .where(F.col("stop_reason") == "observe_error")
        .withColumn("_down_ms", _ms("stop_ts"))
    )
    listed = addr_df.select("ns", "broker_addr", _ms("valid_from_ts").alias("_from"), _ms("valid_to_ts").alias("_to"))
    before_df = listed.groupBy("ns", F.col("_to").alias("_down_ms")).agg(
        F.count_distinct("broker_addr").alias("_before")
    )
    after_df = listed.groupBy("ns", F.col("_from").alias("_back_ms")).agg(
        F.count_distinct("broker_addr").alias("_after")
    )
    back = F.col("_back_ms").isNotNull()
    before = F.coalesce(F.col("_before"), F.lit(0)).cast("long")
    after = F.when(back, F.coalesce(F.col("_after"), F.lit(0))).cast("long")
    end_ms = F.coalesce(F.col("_back_ms"), F.lit(day_end).cast("long"))
    return (
        down_df.join(before_df, ["ns", "_down_ms"], "left")
        .join(after_df, ["ns", "_back_ms"], "left")
        .select(
            liveness_finding(
                OBSERVED_SERVER_DOWN,
                "warning",
                F.col("ns"),
                F.col("_down_ms"),
                end_ms,
                F.struct(
                    (end_ms - F.col("_down_ms")).alias("duration_ms"),
                    back.alias("came_back"),
                    before.alias("brokers_before"),
                    after.alias("brokers_after"),
                    (back & (after < before)).alias("tables_emptied"),
                    "resolution_ms",
                ),
            )
        )
        .select(*FINDING_COLUMNS)
    )
