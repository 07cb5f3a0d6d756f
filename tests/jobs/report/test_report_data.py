"""The report's headline and heatmap figures (``jobs.report.data``) on small hand-built tables."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pandas as pd
import pytest

from jobs.analytics.distribution import agg_end_of_day_distribution
from jobs.report import data as report_data
from jobs.report.render import ReportData
from tests.jobs.inputs import frame

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 21)
END = dt.datetime(2026, 11, 21, 23, 59, 59, 999000, tzinfo=dt.UTC)
NOON = dt.datetime(2026, 11, 21, 12, tzinfo=dt.UTC)
EVENTS_DDL = "ns string, type string, broker_addr string"
SNAPSHOTS_DDL = (
    "snapshot_ts timestamp, ns string, cluster string, broker_name string, topic string, write_queue_nums int"
)
M, S, N = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"


def test_headline_counts_servers_addresses_events_and_findings(spark):
    events = frame(
        spark,
        [
            ("ns-a", "ns_start", None),  # null address (edge): an event, not an address
            ("ns-a", "register", M),
            ("ns-a", "heartbeat", M),
            ("ns-a", "heartbeat", M),
            ("ns-b", "heartbeat", M),  # M registered on ns-a only: still one registered broker
            ("ns-b", "heartbeat", S),  # carried from yesterday: an address, never registered today
            ("ns-c", "expire", N),
            ("ns-c", "register", N),  # registered after its expiry
            ("ns-c", "admin", None),
        ],
        EVENTS_DDL,
    )
    snapshots = frame(
        spark,
        [
            (END, "ns-a", "C1", "broker-a", "t1", 8),
            (END, "ns-b", "C1", "broker-a", "t1", 8),
            (END, "ns-a", "C1", "broker-b", "t2", 4),
            (NOON, "ns-a", "C1", "broker-a", "gone-by-midnight", 8),  # not a topic at the end
        ],
        SNAPSHOTS_DDL,
    )
    headline = report_data.agg_headline(events, agg_end_of_day_distribution(snapshots, DAY))

    assert headline == {"servers": 3, "brokers_registered": 2, "broker_addresses": 3, "events": 9, "topics_at_end": 2}


def test_severity_counts_name_every_severity():
    assert report_data.severity_counts("findings", ["warning", "info", "info"]) == {
        "findings_critical": 0,
        "findings_warning": 1,
        "findings_info": 2,
        "findings_by_severity": {"critical": 0, "warning": 1, "info": 2},
    }
    assert report_data.severity_counts("incidents", [])["incidents_by_severity"] == {
        "critical": 0,
        "warning": 0,
        "info": 0,
    }


def test_headline_of_a_day_without_tables(spark):
    empty = frame(spark, [], EVENTS_DDL)
    headline = report_data.agg_headline(empty, None)
    counts = ("servers", "brokers_registered", "broker_addresses", "events")
    assert {k: headline[k] for k in counts} == dict.fromkeys(counts, 0)


def test_heatmap_is_the_end_of_the_day_with_the_largest_value_any_server_reports(spark):
    snapshots = frame(
        spark,
        [
            (END, "ns-a", "C1", "broker-a", "t1", 8),
            (END, "ns-b", "C1", "broker-a", "t1", 4),  # diverged
            (END, "ns-a", "C1", "broker-b", "t1", 2),
            (END, "ns-a", "C2", "broker-c", "t1", 1),
            (NOON, "ns-a", "C1", "broker-a", "t1", 16),  # earlier: not in the end-of-day picture
            (NOON, "ns-a", "C1", "broker-a", "t-noon", 8),
        ],
        SNAPSHOTS_DDL,
    )
    rows = report_data.agg_heatmap_rows(agg_end_of_day_distribution(snapshots, DAY), brokers=1).collect()
    # one broker per cluster: the busiest
    assert sorted(tuple(r) for r in rows) == [("C1", "broker-a", "t1", 8), ("C2", "broker-c", "t1", 1)]


def test_a_day_whose_routes_are_all_gone_at_the_end_has_no_topic_at_the_end(spark):
    snapshots = frame(spark, [(NOON, "ns-a", "C1", "broker-a", "t1", 8)], SNAPSHOTS_DDL)
    end_df = agg_end_of_day_distribution(snapshots, DAY)
    assert report_data.agg_heatmap_rows(end_df).count() == 0
    assert report_data.agg_headline(None, end_df)["topics_at_end"] == 0


# README, "The lake": the keys of summary.json, for scripts
SUMMARY_KEYS = {
    "date",
    "servers",
    "brokers_registered",
    "broker_addresses",
    "events",
    "topics_at_end",
    "quarantined_lines",
    "findings_critical",
    "findings_warning",
    "findings_info",
    "findings_by_severity",
    "incidents_critical",
    "incidents_warning",
    "incidents_info",
    "incidents_by_severity",
    "notes",
    "audited",
}


def test_summary_json_has_the_keys_the_readme_lists(spark, tmp_path):
    events = frame(spark, [("ns-a", "register", M)], EVENTS_DDL)
    snapshots = frame(spark, [(END, "ns-a", "C1", "broker-a", "t1", 8)], SNAPSHOTS_DDL)
    headline = {
        **report_data.agg_headline(events, agg_end_of_day_distribution(snapshots, DAY)),
        "quarantined_lines": 0,
        **report_data.severity_counts("findings", []),
        **report_data.severity_counts("incidents", []),
    }
    empty = pd.DataFrame()
    data = ReportData(
        day=DAY,
        headline=headline,
        liveness=empty,
        divergences=empty,
        distribution=empty,
        findings=empty,
        notes=["a note"],
    )
    _, summary_path = report_data.write_day_report(str(tmp_path), data)
    summary = json.loads(Path(summary_path).read_text())
    assert set(summary) == SUMMARY_KEYS
    assert (summary["date"], summary["servers"], summary["topics_at_end"], summary["notes"]) == (
        "2026-11-21",
        1,
        1,
        ["a note"],
    )


def test_the_report_opens_with_the_days_incidents_worst_first(tmp_path):
    from jobs.report.incidents import INCIDENT_COLUMNS

    def incident(iid, severity, cause, subject, servers, start_h, end_h, topics, share, live=None):
        start = dt.datetime(2026, 11, 21, start_h, tzinfo=dt.UTC)
        return (
            iid,
            severity,
            cause,
            subject,
            servers,
            start,
            dt.datetime(2026, 11, 21, end_h, tzinfo=dt.UTC),
            (end_h - start_h) * 3_600_000,
            4,
            topics,
            8 * topics,
            0,
            share,
            live and start + dt.timedelta(seconds=live),
        )

    incidents = pd.DataFrame(
        [
            incident("inc-1", "critical", "master_lost", "broker-2", ["ns-a", "ns-b"], 10, 11, 9, 1.0),
            incident("inc-2", "warning", "write_perm_wiped", "broker-1", ["ns-c"], 3, 4, 0, 1 / 3, live=12),
            incident("inc-3", "info", "single_broker_topic", "single_broker_topic", [], 0, 0, 0, 0.0),  # empty servers
        ],
        columns=INCIDENT_COLUMNS,
    )
    empty = pd.DataFrame()
    data = ReportData(
        day=DAY,
        headline={"servers": 2},
        liveness=empty,
        divergences=empty,
        distribution=empty,
        findings=empty,
        incidents=incidents,
    )
    html_path, _ = report_data.write_day_report(str(tmp_path), data)
    page = Path(html_path).read_text()
    first = page.index('<h2 id="incidents">')
    assert first < page.index("<h2", first + 1) and first == page.index("<h2")  # the first section
    assert "1 critical, 1 warning and 1 info incidents" in page
    rows = page[page.index('id="incidents-table"') :].split("<tr>")[2:]
    assert ["master_lost" in rows[0], "write_perm_wiped" in rows[1], "33%" in rows[1]] == [True] * 3
    assert "<td>03:00:12</td>" in rows[1] and "<td></td>" in rows[0]  # seen live 12 s after it began; not seen
    assert 'data-plot="incidents"' in page  # the timeline of the two above info
