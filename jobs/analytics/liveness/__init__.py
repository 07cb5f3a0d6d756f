"""Liveness of broker addresses per name server: windows, expiry timing, availability, findings.

A *liveness window* is one live entry of an address in one server's ``broker_live_table``
(docs/nameserver-semantics.md §1.1). What opens, refreshes and ends one, how windows carry over
midnight, and how expiry is checked: docs/audit.md, "Liveness". :mod:`jobs.analytics.liveness.stage`
runs it for a day.
"""

from jobs.analytics.liveness.availability import agg_broker_availability
from jobs.analytics.liveness.expiry import with_expected_removal, with_never_expired
from jobs.analytics.liveness.params import LivenessParams
from jobs.analytics.liveness.runs import (
    DATA_VERSION_TYPE,
    agg_carried_runs,
    agg_previous_day_up,
    agg_resets,
    agg_run_intervals,
    agg_runs,
    with_event_ms,
    with_run,
)
from jobs.analytics.liveness.stage import LivenessFrames, LivenessResult, build_liveness, run_liveness

__all__ = [
    "DATA_VERSION_TYPE",
    "LivenessFrames",
    "LivenessParams",
    "LivenessResult",
    "agg_broker_availability",
    "agg_carried_runs",
    "agg_previous_day_up",
    "agg_resets",
    "agg_run_intervals",
    "agg_runs",
    "build_liveness",
    "run_liveness",
    "with_event_ms",
    "with_expected_removal",
    "with_never_expired",
    "with_run",
]
