"""What the distribution transforms need of the configuration."""

from __future__ import annotations

from dataclasses import dataclass

from common.config import Config


@dataclass(frozen=True)
class DistributionParams:
    """What the transforms need of the configuration.

    Attributes:
        snapshot_interval_ms: spacing of the snapshot instants (must be the one ``route_snapshots``
            was made with, so that instants ``k`` and ``k + 1`` are consecutive).
        queue_skew_cv: a cluster is skewed above this coefficient of variation...
        queue_skew_max_over_mean: ...or above this ratio of its busiest group to the mean.
    """

    snapshot_interval_ms: int = 300_000
    queue_skew_cv: float = 0.5
    queue_skew_max_over_mean: float = 2.0

    @classmethod
    def from_config(cls, config: Config) -> DistributionParams:
        """Take the audit settings of a loaded configuration."""
        audit = config.audit
        return cls(audit.snapshot_interval_ms, audit.queue_skew_cv, audit.queue_skew_max_over_mean)
