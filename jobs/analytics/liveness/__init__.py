"""Liveness of broker addresses per name server: windows, expiry timing, availability, findings.

A *liveness window* is one live entry of an address in one server's ``broker_live_table``
(docs/nameserver-semantics.md §1.1): it opens with a ``register`` (the address had no live entry)
and ends with the first later ``unregister``, ``expire`` or ``channel_close`` of the address, or
when the server's tables vanish (``ns_stop``; ``ns_start`` = a crash restart, end reason
``ns_restart``). A window still live when a new ``register`` of the address arrives can only come
from lost log lines; it ends there with end reason ``unknown``, so windows never overlap.

Before the day's first event of an address: a window open at the end of the day before enters
as a ``_carry`` row at 00:00 (``carried_in`` = ``previous_day``); without one, an address whose
first events prove a live entry (a 103 ``heartbeat``, an ``expire`` or a ``channel_close``; a 904
or 322 proves nothing, §2.6, §2.7) gets a window from 00:00 with ``carried_in`` = ``unknown``.

Refreshes (what sets ``last_update``): every 103; a 904 inside a window; a 322 inside a window
whose ``data_version`` equals the stored one, the latest 103's in the window (before the day's
first 103 of a carried window the stored version is unknown, so such a 322 is not counted).
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
