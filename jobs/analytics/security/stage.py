"""Security audit of one UTC day: route hijacks and suspicious admin traffic, as ``security`` findings.

A RocketMQ name server believes whatever a REGISTER_BROKER (103) says, so the log is where a
hijack shows. Findings (interfaces spec, category ``security``), all columnar over the day's
``events``:

* ``addr_host_mismatch`` (warning, subject the broker address): registrations whose advertised
  ``broker_addr`` host is not the connection's peer host (``remote``). Brokers behind NAT do this
  legitimately; a rogue advertising someone else's address does too.
* ``broker_name_takeover`` (critical, subject the broker name): a new address took a broker name +
  id slot while the slot's previous address was still live on that server. RocketMQ puts every
  103 into ``brokerAddrs[brokerId]`` (semantics §2.1 step 4), so the slot then flips at every
  re-registration of either address; one finding per slot and address pair, ``flips`` counting
  the changes. A member of the group changing id (promotion) is not a takeover, so a rogue that
  first joins as a slave and is then "promoted" shows only as its slave registration (and, for
  a foreign address, ``addr_host_mismatch`` or ``new_broker_name``).
* ``new_cluster`` / ``new_broker_name`` (info): a name registered today that no earlier day in
  the lake knows; warning when the lake has earlier days and the name came with a takeover (it
  is the takeover's cluster or broker name, or its first registration came from a host that made
  a takeover today).
* ``admin_burst`` (warning, subject the source host): more than ``admin_burst_changes`` admin
  changes (104, 205, 216, 327) from one host to one server within ``admin_burst_window_ms``.
* ``refused_requests`` (warning, subject the source host): ``rejected`` events with reason
  ``no_permission`` (access control, ``nameserver.acl``), all servers together.

"Live" follows the log: an address stays live on a server from its 103 until its ``unregister``,
``expire`` or ``channel_close``, or the server's next ``ns_start``/``ns_stop``. An address live at
00:00 registered within the last ``broker_expiry_ms`` before it (or the scan would have expired
it), so the slot analysis also reads that tail of the day before (``carry_ms``, expiry plus two
scan intervals); ``seq`` orders events across midnight.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from functools import reduce

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from jobs import lake
from jobs.lake.tables import read_table, table_exists
from jobs.lake.findings import finding_columns, write_findings
from jobs.spark.frames import CachedFrames, checkpoint_frame
from common.config import Config
from common.timeutil import day_start_ms
from schemas.events import EVENTS_TABLE_SCHEMA
from schemas.findings import FINDINGS_SCHEMA

CATEGORY = "security"
REGISTER_BROKER = 103
ADMIN_CODES = (104, 205, 216, 327)  # UNREGISTER_BROKER, WIPE/ADD write perm, DELETE_TOPIC_IN_NAMESRV
ADMIN_TYPES = ("unregister", "wipe_write_perm", "add_write_perm", "delete_topic")
REMOVALS = ("unregister", "expire", "channel_close")
RESETS = ("ns_start", "ns_stop")
NAME_COLUMNS = ("cluster", "broker_name")  # finding kinds new_cluster, new_broker_name

# what the transforms read of an event
EVENT_COLUMNS = (
    "ns", "seq", "ts_ms", "type", "request_code", "channel", "remote", "cluster", "broker_name", "broker_id",
    "broker_addr", "reason", "detail", "access_key",
)
FINDING_COLUMNS = tuple(n for n in FINDINGS_SCHEMA.names if n not in ("date", "category"))
SEEN_NAME_COLUMNS = ("kind", "name")
# a registration's grain in agg_registration_pairs: server, advertised and peer address, identity
PAIR_KEYS = ("ns", "broker_addr", "remote", "cluster", "broker_name", "broker_id")


@dataclass(frozen=True)
class SecurityParams:
    """Thresholds of the security findings (``[audit]`` in the config)."""

    admin_burst_changes: int = 10
    admin_burst_window_ms: int = 60_000
    refused_requests_min: int = 1
    carry_ms: int = 140_000  # tail of the day before read for slot holders live at 00:00

    @classmethod
    def from_config(cls, config: Config) -> "SecurityParams":
        """Take the thresholds of a loaded configuration (and the expiry timers for ``carry_ms``)."""
        audit, ns = config.audit, config.nameserver
        return cls(audit.admin_burst_changes, audit.admin_burst_window_ms, audit.refused_requests_min,
                   ns.broker_expiry_ms + 2 * ns.scan_interval_ms)


@dataclass(frozen=True)
class SecurityResult:
    """What a day's security stage wrote.

    Attributes:
        day: the UTC day.
        events: events of the day read.
        findings: findings written.
        findings_by_kind: findings per kind (kinds with none are absent).
    """

    day: dt.date
    events: int
    findings: int
    findings_by_kind: dict[str, int] = field(default_factory=dict)


# ---------------------------------------------------------------------------------- columns


def host_of(address: Column) -> Column:
    """The host of a ``host:port`` / ``[v6]:port`` column, lower case, IPv4-mapped IPv6 as IPv4;
    null for null or a text without a port.

    Example:
        ``"10.0.0.5:50112"`` -> ``"10.0.0.5"``, ``"[::ffff:10.0.0.5]:1"`` -> ``"10.0.0.5"``,
        ``"::1:5000"`` (how the server logs a v6 peer) -> ``"::1"``.
    """
    host = F.regexp_extract(address, r"^\[?(.*?)\]?:[0-9]+$", 1)
    host = F.regexp_replace(F.lower(host), r"^::ffff:([0-9]+\.[0-9]+\.[0-9]+\.[0-9]+)$", "$1")
    return F.when(host != "", host)


def _ts(ms: Column) -> Column:
    return F.timestamp_millis(ms)


def with_hosts(events_df: DataFrame) -> DataFrame:
    """Add ``remote_host`` (the peer's) and ``addr_host`` (the advertised broker address's)."""
    return events_df.withColumn("remote_host", host_of(F.col("remote"))).withColumn(
        "addr_host", host_of(F.col("broker_addr"))
    )


def filter_registrations(events_df: DataFrame) -> DataFrame:
    """REGISTER_BROKER (103) events the server applied: ``register`` and 103 ``heartbeat``."""
    return events_df.where(
        F.col("type").isin("register", "heartbeat")
        & (F.col("request_code") == REGISTER_BROKER)
        & F.col("broker_addr").isNotNull()
    )


def filter_rare_events(events_df: DataFrame) -> DataFrame:
    """The events that are neither a ``register`` nor a ``heartbeat``: the removals, resets, admin
    changes and refusals the findings read (a few hundred a day, beside millions of heartbeats)."""
    return events_df.where(~F.col("type").isin("register", "heartbeat"))


# ------------------------------------------------------------------------- addr_host_mismatch


def agg_registration_pairs(registrations_df: DataFrame) -> DataFrame:
    """Registrations reduced to one row per (ns, broker address, peer address, identity, carried):
    ``PAIR_KEYS``, ``carried``, ``start_ms`` / ``end_ms`` (first and last), ``registrations`` and
    ``first_seq`` (the earliest seq).

    A hash aggregate with fixed-width aggregates over every heartbeat, a few rows per address: the
    mismatch, new-name and slot findings derive from these rows instead of each re-reading the
    registrations. Null keys form their own groups.

    Args:
        registrations_df: :func:`filter_registrations` rows with ``carried``.
    """
    return registrations_df.groupBy(*PAIR_KEYS, "carried").agg(
        F.min("ts_ms").alias("start_ms"),
        F.max("ts_ms").alias("end_ms"),
        F.count(F.lit(1)).alias("registrations"),
        F.min("seq").alias("first_seq"),
    )


def agg_addr_host_mismatch(pairs_df: DataFrame) -> DataFrame:
    """``addr_host_mismatch`` findings: one per (ns, broker address, peer host) over the day.

    Rows without a peer or an address host are skipped: there is nothing to compare. The hosts
    are a function of the two address texts, so they are parsed on the pair rows, not on every
    heartbeat. The identity reported is that of the first mismatching registration: the pair row
    with the least ``first_seq`` (``seq`` is unique per server).

    Args:
        pairs_df: :func:`agg_registration_pairs` rows of the day (``carried`` false).
    """
    differ = F.col("remote_host").isNotNull() & F.col("addr_host").isNotNull() & (
        F.col("remote_host") != F.col("addr_host"))
    return (
        with_hosts(pairs_df)
        # One condition that also names an aggregate (always true): Spark would otherwise push a
        # condition on the grouping keys below the aggregate and parse every registration's hosts.
        .where(F.when(F.col("registrations") > 0, differ).otherwise(F.lit(False)))
        .groupBy("ns", "broker_addr", "remote_host")
        .agg(
            F.min("start_ms").alias("start_ms"),
            F.max("end_ms").alias("end_ms"),
            F.sum("registrations").alias("registrations"),
            F.first("addr_host").alias("addr_host"),  # one broker_addr: one host
            F.min(F.struct("first_seq", "cluster", "broker_name", "broker_id")).alias("first"),
        )
        .select(*finding_columns(
            kind="addr_host_mismatch", severity="warning", subject=F.col("broker_addr"), ns=F.col("ns"),
            start_ts=_ts(F.col("start_ms")), end_ts=_ts(F.col("end_ms")),
            detail={
                "broker_addr": F.col("broker_addr"), "addr_host": F.col("addr_host"),
                "remote_host": F.col("remote_host"), "cluster": F.col("first.cluster"),
                "broker_name": F.col("first.broker_name"), "broker_id": F.col("first.broker_id"),
                "registrations": F.col("registrations"),
            },
        ))
    )


# ----------------------------------------------------------------------- broker_name_takeover


def select_shared_addresses(pairs_df: DataFrame) -> DataFrame:
    """``ns``, ``broker_addr`` of the addresses that registered into a (ns, broker_name, broker_id)
    slot that another address registered into too, the day before's tail included.

    Only such a slot can change holder, and only such an address can be a slot's old holder.

    Args:
        pairs_df: :func:`agg_registration_pairs` rows, carried ones included.
    """
    slot_addrs_df = (
        pairs_df.where(F.col("broker_name").isNotNull() & F.col("broker_id").isNotNull())
        .select("ns", "broker_name", "broker_id", "broker_addr")
        .distinct()
    )
    return (
        slot_addrs_df.groupBy("ns", "broker_name", "broker_id").agg(F.count(F.lit(1)).alias("_addrs"))
        .where(F.col("_addrs") > 1)
        .join(slot_addrs_df, ["ns", "broker_name", "broker_id"])
        .select("ns", "broker_addr")
        .distinct()
    )


def filter_shared_addresses(registrations_df: DataFrame, shared_df: DataFrame) -> DataFrame:
    """The registrations of the addresses in ``shared_df`` (:func:`select_shared_addresses`, a
    broadcast of a handful of rows): every row :func:`select_slot_changes` and
    :func:`filter_old_holder_live` can use, without the day's other heartbeats."""
    return registrations_df.join(F.broadcast(shared_df), ["ns", "broker_addr"], "left_semi")


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
        F.lag("broker_id").over(address) != F.col("broker_id"))
    return (
        registrations_df.where(F.col("broker_name").isNotNull() & F.col("broker_id").isNotNull())
        .withColumn("old_addr", F.lag("broker_addr").over(slot))
        .withColumn("old_seq", F.lag("seq").over(slot))
        .withColumn("role_switch", F.coalesce(role_switch, F.lit(False)))
        .where(~F.col("carried") & ~F.col("role_switch") & F.col("old_addr").isNotNull()
               & (F.col("old_addr") != F.col("broker_addr")))
    )


def filter_old_holder_live(changes_df: DataFrame, events_df: DataFrame, registrations_df: DataFrame) -> DataFrame:
    """Keep the slot changes whose old holder was still live in the slot when the new one came:
    no removal of the old address, no server reset, and no 103 of the old address into another
    slot between its last 103 in the slot and the change.

    Slot changes are rare, so the three range joins stay small.

    Args:
        changes_df: :func:`select_slot_changes` rows.
        events_df: events, at least the removals and resets (:func:`filter_rare_events` rows will do).
        registrations_df: 103 events, at least all of the changes' old addresses (their rows
            without a slot too: a null ``broker_name`` with another ``broker_id`` is a move). An
            old holder shares its slot, so :func:`filter_shared_addresses` rows will do.
    """
    c_df = changes_df.alias("c")
    between = (F.col("o.seq") > F.col("c.old_seq")) & (F.col("o.seq") < F.col("c.seq"))
    removals_df = events_df.where(F.col("type").isin(*REMOVALS) & F.col("broker_addr").isNotNull()).select(
        "ns", "seq", "broker_addr").alias("o")
    resets_df = events_df.where(F.col("type").isin(*RESETS)).select("ns", "seq").alias("o")
    moves_df = registrations_df.select("ns", "seq", "broker_addr", "broker_name", "broker_id").alias("o")
    same_ns = F.col("o.ns") == F.col("c.ns")
    of_old = same_ns & (F.col("o.broker_addr") == F.col("c.old_addr"))
    moved = of_old & ~((F.col("o.broker_name") == F.col("c.broker_name")) & (F.col("o.broker_id") == F.col("c.broker_id")))
    return (
        c_df.join(removals_df, of_old & between, "left_anti").alias("c")
        .join(resets_df, same_ns & between, "left_anti").alias("c")
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
            F.min_by(F.struct("old_addr", "broker_addr", "remote", "remote_host", "cluster", "channel"), "seq")
            .alias("first"),
        )
        .select(
            "ns", "broker_name", "broker_id", "start_ms", "end_ms", "flips",
            F.col("first.old_addr").alias("old_addr"), F.col("first.broker_addr").alias("new_addr"),
            F.col("first.remote").alias("remote"), F.col("first.remote_host").alias("remote_host"),
            F.col("first.cluster").alias("cluster"), F.col("first.channel").alias("channel"),
        )
    )


def select_takeover_findings(takeover_rows_df: DataFrame) -> DataFrame:
    """``broker_name_takeover`` findings from :func:`agg_takeovers` rows."""
    return takeover_rows_df.select(*finding_columns(
        kind="broker_name_takeover", severity="critical", subject=F.col("broker_name"), ns=F.col("ns"),
        start_ts=_ts(F.col("start_ms")), end_ts=_ts(F.col("end_ms")),
        detail={
            "broker_id": F.col("broker_id"), "old_addr": F.col("old_addr"), "new_addr": F.col("new_addr"),
            "remote": F.col("remote"), "cluster": F.col("cluster"), "channel": F.col("channel"),
            "flips": F.col("flips"),
        },
    ))


# ------------------------------------------------------------------------------- new names


def with_names(df: DataFrame, *keep: str) -> DataFrame:
    """Two rows per input row, ``kind`` = ``cluster`` / ``broker_name`` and ``name`` its value
    (null names dropped), plus the ``keep`` columns."""
    names = F.array(*[F.struct(F.lit(kind).alias("kind"), F.col(kind).alias("name")) for kind in NAME_COLUMNS])
    return (
        df.select(F.explode(names).alias("_n"), *keep)
        .select("_n.kind", "_n.name", *keep)
        .where(F.col("name").isNotNull())
    )


def select_seen_names(registrations_df: DataFrame) -> DataFrame:
    """``kind`` (``cluster`` / ``broker_name``) and ``name`` of every registration, distinct."""
    return with_names(registrations_df).distinct()


def agg_new_names(pairs_df: DataFrame, known_df: DataFrame, has_history_df: DataFrame,
                  takeover_rows_df: DataFrame) -> DataFrame:
    """``new_cluster`` / ``new_broker_name`` findings: today's names absent from ``known_df``.

    Args:
        pairs_df: :func:`agg_registration_pairs` rows of the day (``carried`` false).
        known_df: ``kind``, ``name`` seen on earlier days.
        has_history_df: one row, ``has_history`` (the lake has events of earlier days).
        takeover_rows_df: today's :func:`agg_takeovers` rows.
    """
    # From the pair rows (a few per address): the earliest of each pair's earliest is the
    # earliest registration, and the peer's host is parsed on those rows, not per heartbeat.
    today_df = (
        with_names(pairs_df, "start_ms", "end_ms", "registrations", "ns", "broker_addr", "remote")
        .withColumn("remote_host", host_of(F.col("remote")))
        .groupBy("kind", "name")
        .agg(
            F.min("start_ms").alias("start_ms"),
            F.max("end_ms").alias("end_ms"),
            F.sum("registrations").alias("registrations"),
            # the earliest registration; ties between servers broken by ns, so reruns agree
            F.min(F.struct(F.col("start_ms").alias("ts_ms"), "ns", "broker_addr", "remote_host")).alias("first"),
        )
        .join(known_df.select(*SEEN_NAME_COLUMNS), ["kind", "name"], "left_anti")
    )
    in_takeover_df = select_seen_names(takeover_rows_df).withColumn("in_takeover", F.lit(True))
    takeover_hosts_df = (
        takeover_rows_df.where(F.col("remote_host").isNotNull()).select(F.col("remote_host").alias("t_host")).distinct()
        .withColumn("from_takeover_host", F.lit(True))
    )
    flagged_df = (
        today_df.join(in_takeover_df, ["kind", "name"], "left")
        .join(takeover_hosts_df, F.col("first.remote_host") == F.col("t_host"), "left")
        .crossJoin(F.broadcast(has_history_df))
    )
    together = F.coalesce(F.col("in_takeover"), F.col("from_takeover_host"), F.lit(False))
    return flagged_df.select(*finding_columns(
        kind=F.concat(F.lit("new_"), F.col("kind")),
        severity=F.when(F.col("has_history") & together, "warning").otherwise("info"),
        subject=F.col("name"), ns=F.col("first.ns"),
        start_ts=_ts(F.col("start_ms")), end_ts=_ts(F.col("end_ms")),
        detail={
            "first_broker_addr": F.col("first.broker_addr"), "first_remote_host": F.col("first.remote_host"),
            "registrations": F.col("registrations"), "lake_has_history": F.col("has_history"),
            "with_takeover": together,
        },
    ))


# -------------------------------------------------------------------------------- admin_burst


def agg_admin_bursts(events_df: DataFrame, params: SecurityParams) -> DataFrame:
    """``admin_burst`` findings: per (ns, source host), each run of overlapping windows of
    ``admin_burst_window_ms`` holding more than ``admin_burst_changes`` admin changes.

    A change at ``t`` counts the changes in ``[t - window, t]`` (ties included); runs of such
    windows that overlap make one finding from the first change of the first window to the last
    change, with the number of changes in it, the busiest window's count and the request codes.
    """
    window_ms = params.admin_burst_window_ms
    admin_df = events_df.where(
        F.col("type").isin(*ADMIN_TYPES) & F.col("request_code").isin(*ADMIN_CODES) & F.col("remote_host").isNotNull()
    ).select("ns", "remote_host", "seq", "ts_ms", "request_code")
    per_host = Window.partitionBy("ns", "remote_host")
    trailing = per_host.orderBy("ts_ms").rangeBetween(-window_ms, 0)
    marked_df = (
        admin_df.withColumn("in_window", F.count(F.lit(1)).over(trailing))
        .withColumn("window_start_ms", F.min("ts_ms").over(trailing))
        .where(F.col("in_window") > params.admin_burst_changes)
    )
    ordered = per_host.orderBy("ts_ms", "seq")
    bursts_df = (
        marked_df.withColumn("prev_end_ms", F.lag("ts_ms").over(ordered))
        .withColumn("new_burst", F.when(F.col("prev_end_ms").isNull() | (F.col("window_start_ms") > F.col("prev_end_ms")), 1)
                    .otherwise(0))
        .withColumn("burst", F.sum("new_burst").over(ordered.rowsBetween(Window.unboundedPreceding, 0)))
        .groupBy("ns", "remote_host", "burst")
        .agg(F.min("window_start_ms").alias("start_ms"), F.max("ts_ms").alias("end_ms"),
             F.max("in_window").alias("max_in_window"))
    )
    b_df, a_df = bursts_df.alias("b"), admin_df.alias("a")
    inside = (F.col("a.ns") == F.col("b.ns")) & (F.col("a.remote_host") == F.col("b.remote_host")) & (
        F.col("a.ts_ms").between(F.col("b.start_ms"), F.col("b.end_ms")))
    return (
        b_df.join(a_df, inside)
        .groupBy("b.ns", "b.remote_host", "b.burst", "b.start_ms", "b.end_ms", "b.max_in_window")
        .agg(F.count(F.lit(1)).alias("changes"), F.array_sort(F.collect_set("a.request_code")).alias("request_codes"))
        .select(*finding_columns(
            kind="admin_burst", severity="warning", subject=F.col("remote_host"), ns=F.col("ns"),
            start_ts=_ts(F.col("start_ms")), end_ts=_ts(F.col("end_ms")),
            detail={
                "changes": F.col("changes"), "max_in_window": F.col("max_in_window"),
                "window_ms": F.lit(window_ms), "threshold": F.lit(params.admin_burst_changes),
                "request_codes": F.col("request_codes"),
            },
        ))
    )


# --------------------------------------------------------------------------- refused_requests


def agg_refused_requests(events_df: DataFrame, params: SecurityParams) -> DataFrame:
    """``refused_requests`` findings: ``no_permission`` refusals per source host, all servers.

    A refusal without a peer address is grouped under ``unknown``.
    """
    return (
        events_df.where((F.col("type") == "rejected") & (F.col("reason") == "no_permission"))
        .withColumn("source", F.coalesce(F.col("remote_host"), F.lit("unknown")))
        .groupBy("source")
        .agg(
            F.count(F.lit(1)).alias("refused"),
            F.min("ts_ms").alias("start_ms"),
            F.max("ts_ms").alias("end_ms"),
            F.array_sort(F.collect_set("ns")).alias("ns_ids"),
            F.array_sort(F.collect_set("request_code")).alias("request_codes"),
            F.array_sort(F.collect_set("detail")).alias("details"),
            F.array_sort(F.collect_set("access_key")).alias("access_keys"),
        )
        .where(F.col("refused") >= params.refused_requests_min)
        .select(*finding_columns(
            kind="refused_requests", severity="warning", subject=F.col("source"), ns=None,
            start_ts=_ts(F.col("start_ms")), end_ts=_ts(F.col("end_ms")),
            detail={
                "refused": F.col("refused"), "ns_ids": F.col("ns_ids"), "request_codes": F.col("request_codes"),
                "details": F.col("details"), "access_keys": F.col("access_keys"),
            },
        ))
    )


# ------------------------------------------------------------------------------------ the job


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


def build_security(events_df: DataFrame, known_df: DataFrame, has_history_df: DataFrame,
                   params: SecurityParams, carried_df: DataFrame | None = None) -> SecurityFrames:
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
    shared_registrations_df = checkpoint_frame(with_hosts(
        filter_shared_addresses(registrations_df, select_shared_addresses(pairs_df))
    ))
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


def read_history(spark: SparkSession, lake_dir: str, day: dt.date,
                 carry_ms: int) -> tuple[DataFrame, DataFrame, DataFrame]:
    """From ``events`` before ``day``: the names registered, whether any earlier day exists, and
    the day before's last ``carry_ms`` of events.

    Reads only the columns needed; Spark prunes the date partitions.
    """
    path = lake.table_path(lake_dir, lake.EVENTS)
    earlier_df = read_table(spark, path, EVENTS_TABLE_SCHEMA).where(F.col("date") < F.lit(day))
    known_df = select_seen_names(filter_registrations(
        earlier_df.select("type", "request_code", "broker_addr", "cluster", "broker_name")
    ))
    has_history_df = earlier_df.select("date").limit(1).agg((F.count(F.lit(1)) > 0).alias("has_history"))
    carried_df = read_table(spark, path, EVENTS_TABLE_SCHEMA, where={"date": day - dt.timedelta(days=1)}).where(
        F.col("ts_ms") >= day_start_ms(day) - carry_ms
    )
    return known_df, has_history_df, carried_df


def run_security(spark: SparkSession, lake_dir: str, day: dt.date, config: Config) -> SecurityResult:
    """Audit ``day`` for hijacks: replaces the day's ``security`` findings (a rerun gives the same rows).

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
    findings_df = frames.findings_df.cache()
    try:
        write_findings(findings_df, lake_dir, day, CATEGORY)
        # one row per kind: the job's log line, not data
        by_kind = {r["kind"]: r["n"] for r in findings_df.groupBy("kind").agg(F.count(F.lit(1)).alias("n")).collect()}
        events = events_df.count()
    finally:
        findings_df.unpersist()
        frames.release()
    return SecurityResult(day, events, sum(by_kind.values()), by_kind)
