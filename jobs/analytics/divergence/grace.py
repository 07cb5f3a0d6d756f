"""The grace: disagreements lasting at most this long are propagation, not episodes.

Set by ``audit.divergence_grace_ms`` (docs/interfaces.md); unless configured it is the observed
heartbeat period (median of the day's per-window median refresh gaps) + the scan interval (the
largest of the day's ``ns_start`` events) + ``audit.clock_skew_ms``. A day with observed servers
(``nsaudit collect`` streams) adds their longest poll interval to either: an observed server shows
a change up to one interval after it happened, and two servers' rounds are up to one interval
apart, so a change seen one round apart on two servers is no episode.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from common.config import Config


@dataclass(frozen=True)
class Grace:
    """The grace used for a day and where it came from.

    Attributes:
        grace_ms: disagreements lasting at most this long are not episodes.
        source: ``config`` (``audit.divergence_grace_ms``) or ``derived``.
        heartbeat_period_ms: observed median refresh gap, or the configured period when the
            day has none (derived grace only).
        scan_interval_ms: the day's largest ``ns_start`` scan interval, or the configured one.
        clock_skew_ms: ``audit.clock_skew_ms``.
        poll_interval_ms: the longest poll interval of the day's observed servers, included in
            ``grace_ms``; None without observed servers.
    """

    grace_ms: int
    source: str
    heartbeat_period_ms: int | None = None
    scan_interval_ms: int | None = None
    clock_skew_ms: int | None = None
    poll_interval_ms: int | None = None


def with_poll_interval(grace: Grace, poll_interval_ms: int | None) -> Grace:
    """``grace`` widened by the observed servers' longest poll interval (unchanged without one).

    Example:
        >>> with_poll_interval(Grace(42012, "derived", 30012, 10000, 2000), 10_000).grace_ms
        52012
    """
    if not poll_interval_ms:
        return grace
    return replace(grace, grace_ms=grace.grace_ms + int(poll_interval_ms), poll_interval_ms=int(poll_interval_ms))


def agg_grace_inputs(windows_df: DataFrame, ns_start_df: DataFrame) -> DataFrame:
    """One row: ``heartbeat_period_ms`` (median of the windows' ``p50_gap_ms``) and
    ``scan_interval_ms`` (largest of the ``ns_start`` events'); each null when the day has none."""
    period_df = windows_df.agg(F.percentile_approx("p50_gap_ms", 0.5).cast(T.LongType()).alias("heartbeat_period_ms"))
    scan_df = ns_start_df.agg(F.max("scan_interval_ms").cast(T.LongType()).alias("scan_interval_ms"))
    return period_df.crossJoin(scan_df).select("heartbeat_period_ms", "scan_interval_ms")


def derive_grace(heartbeat_period_ms: int | None, scan_interval_ms: int | None, config: Config) -> Grace:
    """The grace for a day: the configured one, else observed period + scan interval + skew.

    Args:
        heartbeat_period_ms: observed median refresh gap; None falls back to
            ``audit.heartbeat_period_ms`` (30000 by default).
        scan_interval_ms: from the day's ``ns_start`` events; None falls back to
            ``nameserver.scan_interval_ms`` (10000 by default).
        config: the loaded configuration.

    Example:
        >>> derive_grace(30_012, 10_000, Config()).grace_ms  # + clock_skew_ms 2000
        42012
    """
    audit = config.audit
    if audit.divergence_grace_ms is not None:
        return Grace(int(audit.divergence_grace_ms), "config")
    period = int(heartbeat_period_ms) if heartbeat_period_ms is not None else audit.heartbeat_period_ms
    scan = int(scan_interval_ms) if scan_interval_ms is not None else config.nameserver.scan_interval_ms
    return Grace(period + scan + audit.clock_skew_ms, "derived", period, scan, audit.clock_skew_ms)


def grace_note(grace: Grace) -> str:
    """One line saying which grace the day's divergences used.

    Example:
        >>> grace_note(Grace(42012, "derived", 30012, 10000, 2000))
        'divergence grace 42012 ms = heartbeat period 30012 + scan interval 10000 + clock skew 2000 (derived)'
    """
    poll = f" + poll interval {grace.poll_interval_ms} (observed servers)" if grace.poll_interval_ms else ""
    if grace.source == "config":
        if grace.poll_interval_ms:
            return (
                f"divergence grace {grace.grace_ms} ms = audit.divergence_grace_ms "
                f"{grace.grace_ms - grace.poll_interval_ms}{poll}"
            )
        return f"divergence grace {grace.grace_ms} ms (audit.divergence_grace_ms)"
    return (
        f"divergence grace {grace.grace_ms} ms = heartbeat period {grace.heartbeat_period_ms} + scan interval "
        f"{grace.scan_interval_ms} + clock skew {grace.clock_skew_ms}{poll} (derived)"
    )
