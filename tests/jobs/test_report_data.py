"""The report's headline figures (``jobs.report_data.agg_headline``) on small hand-built tables."""

from __future__ import annotations

import pytest

from jobs import report_data
from tests.jobs.inputs import frame

pytestmark = pytest.mark.spark

EVENTS_DDL = "ns string, type string, broker_addr string"
M, S, N = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"


def test_headline_counts_servers_addresses_events_and_findings(spark):
    events = frame(spark, [
        ("ns-a", "ns_start", None),  # null address (edge): an event, not an address
        ("ns-a", "register", M), ("ns-a", "heartbeat", M), ("ns-a", "heartbeat", M),
        ("ns-b", "heartbeat", M),  # M registered on ns-a only: still one registered broker
        ("ns-b", "heartbeat", S),  # carried from yesterday: an address, never registered today
        ("ns-c", "expire", N), ("ns-c", "register", N),  # registered after its expiry
        ("ns-c", "admin", None),
    ], EVENTS_DDL)
    snapshots = frame(spark, [("t1",), ("t1",), ("t2",), (None,)], "topic string")
    findings = frame(spark, [("warning",), ("info",), ("info",)], "severity string")
    quarantine = frame(spark, [(1,), (2,)], "line long")

    headline = report_data.agg_headline(events, snapshots, findings, quarantine)

    assert headline == {
        "servers": 3, "brokers_registered": 2, "broker_addresses": 3, "events": 9, "topics_at_end": 2,
        "quarantined_lines": 2, "findings_critical": 0, "findings_warning": 1, "findings_info": 2,
        "findings_by_severity": {"critical": 0, "warning": 1, "info": 2},
    }


def test_headline_of_a_day_without_tables(spark):
    empty = frame(spark, [], EVENTS_DDL)
    headline = report_data.agg_headline(empty, None, None, None)
    counts = ("servers", "brokers_registered", "broker_addresses", "events")
    assert {k: headline[k] for k in counts} == dict.fromkeys(counts, 0)
    assert headline["findings_by_severity"] == {"critical": 0, "warning": 0, "info": 0}
