"""The columns the security findings share: hosts of addresses, and the slices of the day's events
they read (the registrations and their pairs, and the rare events beside millions of heartbeats)."""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from nameserver.codec import RequestCode
from schemas.findings import FINDINGS_SCHEMA, LINK_COLUMNS

# what the transforms read of an event
EVENT_COLUMNS = (
    "ns",
    "seq",
    "ts_ms",
    "type",
    "request_code",
    "channel",
    "remote",
    "cluster",
    "broker_name",
    "broker_id",
    "broker_addr",
    "reason",
    "detail",
    "access_key",
)
FINDING_COLUMNS = tuple(n for n in FINDINGS_SCHEMA.names if n not in ("date", "category", *LINK_COLUMNS))
# a registration's grain in agg_registration_pairs: server, advertised and peer address, identity
PAIR_KEYS = ("ns", "broker_addr", "remote", "cluster", "broker_name", "broker_id")


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


def to_ts(ms: Column) -> Column:
    """Epoch ms as a timestamp (ISO-8601 UTC in the findings' detail JSON)."""
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
        & (F.col("request_code") == int(RequestCode.REGISTER_BROKER))
        & F.col("broker_addr").isNotNull()
    )


def filter_rare_events(events_df: DataFrame) -> DataFrame:
    """The events that are neither a ``register`` nor a ``heartbeat``: the removals, resets, admin
    changes and refusals the findings read (a few hundred a day, beside millions of heartbeats)."""
    return events_df.where(~F.col("type").isin("register", "heartbeat"))


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
