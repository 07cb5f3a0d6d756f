"""Incidents: the day's findings grouped by root cause (docs/audit.md, "Incidents").

:mod:`jobs.analytics.incidents.causes` says what each finding is evidence of,
:mod:`jobs.analytics.incidents.grouping` makes the incidents and :mod:`jobs.analytics.incidents.stage`
runs it for a day.
"""

from jobs.analytics.incidents.causes import with_cause, with_detail_fields, with_servers, with_span_ms
from jobs.analytics.incidents.grouping import INCIDENT_GAP_MS, agg_incidents, with_incident_ids
from jobs.analytics.incidents.stage import (
    IncidentsResult,
    agg_addr_names,
    agg_server_count,
    link_findings,
    run_incidents,
)

__all__ = [
    "INCIDENT_GAP_MS",
    "IncidentsResult",
    "agg_addr_names",
    "agg_incidents",
    "agg_server_count",
    "link_findings",
    "run_incidents",
    "with_cause",
    "with_detail_fields",
    "with_incident_ids",
    "with_servers",
    "with_span_ms",
]
