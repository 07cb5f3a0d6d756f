"""The report's rows from the day's small tables, ordered and capped in the driver
(:mod:`jobs.report.small`), as the report shows them; the page they make on an audited day is
checked by the report's other tests."""

from __future__ import annotations

import datetime as dt

import pandas as pd

from jobs.report import small

DAY = dt.date(2026, 11, 21)
T0 = pd.Timestamp("2026-11-21 01:00:00")


def _windows(rows: list[tuple[str, str, str | None]]) -> pd.DataFrame:
    return pd.DataFrame(
        [(ns, addr, "broker-a", T0, T0, reason) for ns, addr, reason in rows], columns=small.LIVENESS_COLUMNS
    )


def test_liveness_keeps_the_addresses_with_most_closed_windows_per_server():
    windows = _windows(
        [
            ("ns-a", "10.0.0.1:10911", "open"),
            ("ns-a", "10.0.0.2:10911", "expired"),
            ("ns-a", "10.0.0.2:10911", "open"),
            ("ns-a", "10.0.0.3:10911", "unregistered"),
            ("ns-a", "10.0.0.4:10911", None),  # no reason is not a closed window
            ("ns-a", "10.0.0.4:10911", None),
            ("ns-b", "10.0.0.9:10911", "open"),
        ]
    )
    rows = small.liveness_rows(windows, per_server=2)
    # ns-a: .2 (1 closed, 2 windows) before .3 (1 closed, 1 window); .4 has 2 windows, none closed
    assert sorted(set(zip(rows["ns"], rows["broker_addr"], strict=True))) == [
        ("ns-a", "10.0.0.2:10911"),
        ("ns-a", "10.0.0.3:10911"),
        ("ns-b", "10.0.0.9:10911"),
    ]
    assert len(rows) == 4 and list(rows.columns) == small.LIVENESS_COLUMNS


def test_divergences_are_the_longest_with_their_subject_and_views_as_json():
    episodes = pd.DataFrame(
        [
            ("topic_missing", "t1", None, None, T0, T0, 5_000, [("ns-a", "absent"), ("ns-b", "2 queues")]),
            ("queue_data_mismatch", "t2", None, "broker-b", T0, T0, 9_000, [("ns-é", "w=4")]),
            ("broker_addr_mismatch", None, "10.0.0.1:10911", "broker-c", T0, None, None, None),
            ("queue_data_mismatch", None, None, "broker-d", T0, T0, 1_000, []),
        ],
        columns=small._EPISODE_COLUMNS,
    )
    rows = small.divergence_rows(episodes)
    assert list(rows.columns) == small.DIVERGENCE_COLUMNS
    # longest first, an episode without a duration last
    assert list(rows["subject"]) == ["t2 @ broker-b", "t1", "broker-d", "10.0.0.1:10911"]
    assert list(rows["ns_views"]) == ['{"ns-é":"w=4"}', '{"ns-a":"absent","ns-b":"2 queues"}', "{}", None]
    assert list(small.divergence_rows(episodes, limit=2)["subject"]) == ["t2 @ broker-b", "t1"]


def test_findings_are_listed_by_severity_then_category_kind_and_subject_up_to_the_cap():
    def finding(severity: str, category: str, kind: str, subject: str | None) -> tuple:
        return (severity, category, kind, subject, "ns-a", T0, None, "{}", None)

    findings = pd.DataFrame(
        [
            finding("info", "liveness", "flapping", "b"),
            finding("critical", "security", "takeover", "x"),
            finding("warning", "liveness", "late_expiry", "a"),
            finding("info", "liveness", "flapping", None),
            finding("info", "consistency", "topic_missing", "z"),
        ],
        columns=small.FINDING_COLUMNS,
    )
    rows = small.finding_rows(findings, limit=4)
    assert list(zip(rows["severity"], rows["kind"], rows["subject"], strict=True)) == [
        ("critical", "takeover", "x"),
        ("warning", "late_expiry", "a"),
        ("info", "topic_missing", "z"),
        ("info", "flapping", None),  # a null subject first, as Spark orders it
    ]


def test_a_lake_without_the_tables_gives_empty_rows(tmp_path):
    rows = small.read_report_rows(str(tmp_path / "lake"), DAY)
    assert {name: (len(frame), list(frame.columns)) for name, frame in rows.items()} == {
        "liveness": (0, small.LIVENESS_COLUMNS),
        "divergences": (0, small.DIVERGENCE_COLUMNS),
        "findings": (0, small.FINDING_COLUMNS),
    }
