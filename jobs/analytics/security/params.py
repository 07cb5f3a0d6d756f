"""Thresholds of the security findings (``[audit]`` in the config)."""

from __future__ import annotations

from dataclasses import dataclass

from common.config import Config


@dataclass(frozen=True)
class SecurityParams:
    """Thresholds of the security findings (``[audit]`` in the config)."""

    admin_burst_changes: int = 10
    admin_burst_window_ms: int = 60_000
    refused_requests_min: int = 1
    carry_ms: int = 140_000  # tail of the day before read for slot holders live at 00:00

    @classmethod
    def from_config(cls, config: Config) -> SecurityParams:
        """Take the thresholds of a loaded configuration (and the expiry timers for ``carry_ms``)."""
        audit, ns = config.audit, config.nameserver
        return cls(
            audit.admin_burst_changes,
            audit.admin_burst_window_ms,
            audit.refused_requests_min,
            ns.broker_expiry_ms + 2 * ns.scan_interval_ms,
        )
