"""The security stage: a UTC day's route hijacks and suspicious admin traffic, as ``security``
findings (docs/interfaces.md), all columnar over the day's ``events``.

A RocketMQ name server believes whatever a REGISTER_BROKER (103) says, so the log is where a
hijack shows. An address live at 00:00 registered within the last ``broker_expiry_ms`` before it
(or the scan would have expired it), so the slot analysis also reads that tail of the day before
(``carry_ms``, expiry plus two scan intervals); ``seq`` orders events across midnight.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from common.config import Config
from common.timeutil import day_start_ms
from jobs import lake
from jobs.analytics.security.addr_host_mismatch import agg_addr_host_mismatch
from jobs.analytics.security.admin_burst import agg_admin_bursts
from jobs.analytics.security.columns import (
    EVENT_COLUMNS,
    FINDING_COLUMNS,
    agg_registration_pairs,
    filter_rare_events,
    filter_registrations,
    with_hosts,
)
from jobs.analytics.security.new_names import agg_new_names, select_seen_names
from jobs.analytics.security.params import SecurityParams
from jobs.analytics.security.refused_requests import agg_refused_requests
from jobs.analytics.security.takeover import (
    agg_takeovers,
    filter_old_holder_live,
    filter_shared_addresses,
    select_shared_addresses,
    select_slot_changes,
    select_takeover_findings,
)
from jobs.lake.findings import DayFindings
from jobs.lake.tables import read_table, table_exists
from jobs.spark.frames import CachedFrames, checkpoint_frame
from schemas.events import EVENTS_TABLE_SCHEMA

CATEGORY = "security"


@dataclass(frozen=True)
class SecurityResult:
    """What a day's security stage wrote.

    Attributes:
        day: the UTC day.
        findings: findings written (0 in the nightly audit, which writes every stage's findings
            at its end).
        findings_by_kind: findings per kind (kinds with none are absent).
    """

    day: dt.date
    findings: int
    findings_by_kind: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class SecurityFrames(CachedFrames):
    """A day's security findings, as a lazy DataFrame, and the small intermediates it shares.

    The registration pairs, the registrations of slot-sharing addresses and the rare events are
    read by several findings, so they are computed once, when the frames are built, and
    checkpointed; :meth:`release` frees them, after the last read.

    Attributes:
        findings_df: ``FINDING_COLUMNS`` rows (category ``security``).
        cached: the checkpointed intermediates.
    """

    findings_df: DataFrame


def build_security(
    events_df: DataFrame,
    known_df: DataFrame,
    has_history_df: DataFrame,
    params: SecurityParams,
    carried_df: DataFrame | None = None,
) -> SecurityFrames:
    """Every security finding of a day (without ``date`` / ``category``).

    Args:
        events_df: the day's events (at least :data:`EVENT_COLUMNS`, ``ts_ms`` in epoch ms).
        known_df: ``kind``, ``name`` registered on earlier days (:func:`select_seen_names`).
        has_history_df: one row, boolean ``has_history``.
        params: thresholds.
        carried_df: the day before's last ``carry_ms`` of events (same columns), for the slot
            holders live at 00:00; None for none.
    """
    # Every finding reads one of three small checkpointed sets (computed here, and cut from their
    # plans, so later plans read their rows), so the day is scanned three times:
    # the registrations' pairs (one aggregate), the registrations of the addresses that share a
    # slot (a broadcast semi-join), and the rare events. Hosts are parsed on those rows only.
    stream_df = events_df.select(*EVENT_COLUMNS).withColumn("carried", F.lit(False))
    if carried_df is not None:
        stream_df = carried_df.select(*EVENT_COLUMNS).withColumn("carried", F.lit(True)).unionByName(stream_df)
    registrations_df = filter_registrations(stream_df)
    pairs_df = checkpoint_frame(agg_registration_pairs(registrations_df))
    shared_registrations_df = checkpoint_frame(
        with_hosts(filter_shared_addresses(registrations_df, select_shared_addresses(pairs_df)))
    )
    rare_df = checkpoint_frame(with_hosts(filter_rare_events(stream_df)))
    day_pairs_df, day_rare_df = pairs_df.where(~F.col("carried")), rare_df.where(~F.col("carried"))
    takeovers_df = agg_takeovers(
        filter_old_holder_live(select_slot_changes(shared_registrations_df), rare_df, shared_registrations_df)
    )
    parts = [
        agg_addr_host_mismatch(day_pairs_df),
        select_takeover_findings(takeovers_df),
        agg_new_names(day_pairs_df, known_df, has_history_df, takeovers_df),
        agg_admin_bursts(day_rare_df, params),
        agg_refused_requests(day_rare_df, params),
    ]
    findings_df = reduce(DataFrame.unionByName, parts).select(*FINDING_COLUMNS)
    return SecurityFrames(findings_df, cached=(pairs_df, shared_registrations_df, rare_df))


def read_history(
    spark: SparkSession, lake_dir: str, day: dt.date, carry_ms: int
) -> tuple[DataFrame, DataFrame, DataFrame]:
    """From ``events`` before ``day``: the names registered, whether any earlier day exists, and
    the day before's last ``carry_ms`` of events.

    Reads only the columns needed; Spark prunes the date partitions.
    """
    path = lake.table_path(lake_dir, lake.EVENTS)
    earlier_df = read_table(spark, path, EVENTS_TABLE_SCHEMA).where(F.col("date") < F.lit(day))
    known_df = select_seen_names(
        filter_registrations(earlier_df.select("type", "request_code", "broker_addr", "cluster", "broker_name"))
    )
    has_history_df = earlier_df.select("date").limit(1).agg((F.count(F.lit(1)) > 0).alias("has_history"))
    carried_df = read_table(spark, path, EVENTS_TABLE_SCHEMA, where={"date": day - dt.timedelta(days=1)}).where(
        F.col("ts_ms") >= day_start_ms(day) - carry_ms
    )
    return known_df, has_history_df, carried_df


def run_security(
    spark: SparkSession, lake_dir: str, day: dt.date, config: Config, findings: DayFindings | None = None
) -> SecurityResult:
    """Audit ``day`` for hijacks: replaces the day's ``security`` findings (a rerun gives the same rows).

    Args:
        findings: the audit's findings of the day, which this stage's join (written by the
            incidents stage); None: they are written now.

    Raises:
        FileNotFoundError: the lake has no ``events`` table.
    """
    path = lake.table_path(lake_dir, lake.EVENTS)
    if not table_exists(path):
        raise FileNotFoundError(f"no events table in {lake_dir}")
    params = SecurityParams.from_config(config)
    events_df = read_table(spark, path, EVENTS_TABLE_SCHEMA, where={"date": day})
    known_df, has_history_df, carried_df = read_history(spark, lake_dir, day, params.carry_ms)
    frames = build_security(events_df, known_df, has_history_df, params, carried_df)
    if findings is not None:
        findings.add(CATEGORY, frames.findings_df, keep=frames)
        return SecurityResult(day, 0)
    own = DayFindings(day)
    try:
        own.add(CATEGORY, frames.findings_df)
        by_kind = own.write_category(lake_dir, CATEGORY)
    finally:
        frames.release()
    return SecurityResult(day, sum(by_kind.values()), by_kind)
