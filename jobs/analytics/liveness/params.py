"""The timers and thresholds the liveness transforms use."""

from __future__ import annotations

from dataclasses import dataclass

from common.config import Config


@dataclass(frozen=True)
class LivenessParams:
    """Timer defaults and audit thresholds the transforms use (from :class:`Config`).

    The timers are fallbacks: a run's own ``ns_start`` values win when known.
    """

    broker_expiry_ms: int = 120_000
    scan_interval_ms: int = 10_000
    first_scan_delay_ms: int = 5_000
    late_expiry_tolerance_ms: int = 2_000
    heartbeat_period_ms: int = 30_000
    late_heartbeat_slack_ms: int = 15_000
    flapping_windows_per_day: int = 6

    @classmethod
    def from_config(cls, config: Config) -> LivenessParams:
        """Take the name-server timers and the audit thresholds of a loaded configuration."""
        ns, audit = config.nameserver, config.audit
        return cls(
            broker_expiry_ms=ns.broker_expiry_ms,
            scan_interval_ms=ns.scan_interval_ms,
            first_scan_delay_ms=ns.first_scan_delay_ms,
            late_expiry_tolerance_ms=audit.late_expiry_tolerance_ms,
            heartbeat_period_ms=audit.heartbeat_period_ms,
            late_heartbeat_slack_ms=audit.late_heartbeat_slack_ms,
            flapping_windows_per_day=audit.flapping_windows_per_day,
        )
