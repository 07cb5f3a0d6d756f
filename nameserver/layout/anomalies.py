"""The layout faults present in a layout, as the audit should report them."""

from __future__ import annotations

import math
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from common.config import AuditConfig
from nameserver.layout.fleet_layout import FleetLayout


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One layout fault present in a layout: what the audit should find, and where.

    Attributes:
        kind: ``read_lt_write`` (subject: a topic) or ``queue_skew`` (subject: a cluster).
        detail: JSON-ready facts: the topic's queue numbers and groups, or the cluster's write
            queues per group, its coefficient of variation and max/mean, and the thresholds.
    """

    kind: str
    subject: str
    detail: dict[str, Any] = field(default_factory=dict)


def cluster_write_queues(layout: FleetLayout) -> dict[str, dict[str, int]]:
    """Write queues per broker group of each cluster, every group counted (0 without topics),
    as the audit's ``queue_distribution`` counts them."""
    return {
        cluster: {
            g.broker_name: sum(t.write_queue_nums for t in g.topics) for g in layout.groups if g.cluster == cluster
        }
        for cluster in layout.clusters
    }


def skew(write_queues: Collection[int]) -> tuple[float, float] | None:
    """``(cv, max_over_mean)`` of write queues per group: population standard deviation over the
    mean, and the busiest group over the mean; None without queues (the audit's measures)."""
    if not write_queues:
        return None
    mean = sum(write_queues) / len(write_queues)
    if mean <= 0:
        return None
    std = math.sqrt(sum((q - mean) ** 2 for q in write_queues) / len(write_queues))
    return std / mean, max(write_queues) / mean


def layout_anomalies(
    layout: FleetLayout,
    max_cv: float = AuditConfig.queue_skew_cv,
    max_over_mean: float = AuditConfig.queue_skew_max_over_mean,
) -> tuple[Anomaly, ...]:
    """The layout faults present in ``layout``, as the audit should report them.

    Each ``read_lt_write`` topic (detail: ``queue_nums``, ``[read, write]`` per group), then,
    when the layout was built with ``queue_skew``, each cluster of two or more groups over
    either threshold (the audit's defaults unless given; detail: ``write_queues`` per group,
    ``cv``, ``max_over_mean``, the thresholds and the ``scaled_up`` group). A cluster that a
    balanced layout leaves over a threshold (too few topics for its groups) is no fault and is
    not listed.
    """
    queue_nums = {
        (t.topic, g.broker_name): [t.read_queue_nums, t.write_queue_nums] for g in layout.groups for t in g.topics
    }
    found = [
        Anomaly("read_lt_write", t.topic, {"queue_nums": {b: queue_nums[t.topic, b] for b in t.broker_names}})
        for t in layout.topics
        if t.read_queue_nums < t.write_queue_nums
    ]
    if "queue_skew" in layout.faults:
        for cluster, by_group in cluster_write_queues(layout).items():
            measured = skew(list(by_group.values())) if len(by_group) >= 2 else None
            if measured is None or (measured[0] <= max_cv and measured[1] <= max_over_mean):
                continue
            scaled = [name for name in layout.scaled_up if name in by_group]
            found.append(
                Anomaly(
                    "queue_skew",
                    cluster,
                    {
                        "write_queues": by_group,
                        "cv": round(measured[0], 4),
                        "max_over_mean": round(measured[1], 4),
                        "cv_threshold": max_cv,
                        "max_over_mean_threshold": max_over_mean,
                        "scaled_up": scaled[0] if scaled else None,
                    },
                )
            )
    return tuple(found)
