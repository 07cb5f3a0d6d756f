"""Security audit of one UTC day: route hijacks and suspicious admin traffic, as ``security`` findings.

One module per finding kind (``addr_host_mismatch``, ``broker_name_takeover``, ``new_cluster`` /
``new_broker_name``, ``admin_burst``, ``refused_requests``); :mod:`jobs.analytics.security.stage`
runs them for a day.
"""

from jobs.analytics.security.columns import FINDING_COLUMNS, host_of
from jobs.analytics.security.params import SecurityParams
from jobs.analytics.security.stage import (
    CATEGORY,
    SecurityFrames,
    SecurityResult,
    build_security,
    read_history,
    run_security,
)

__all__ = [
    "CATEGORY",
    "FINDING_COLUMNS",
    "SecurityFrames",
    "SecurityParams",
    "SecurityResult",
    "build_security",
    "host_of",
    "read_history",
    "run_security",
]
