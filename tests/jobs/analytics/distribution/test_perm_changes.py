"""Who set a QueueData's permission (``jobs.analytics.distribution.perm_changes``): a broker's
registration is a ``topic_perm_changed``, an admin's WIPE_WRITE_PERM (205) a ``write_perm_wiped``.

A hand-built day of two own servers and two observed ones (``nsaudit collect``, a poll every 2 s)
and three broker groups: a topic made read-only by its only group's registration, the same group's
share of a topic another group still serves, a wipe on one server that a registration ends, a
topic read-only on every server since before the day; and as observed, a read-only change seen on
both servers a round apart and a wipe seen on one.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.sql import functions as F

from common.timeutil import day_start_ms
from jobs.analytics import distribution as D
from jobs.analytics import incidents as I
from jobs.analytics.distribution.perm_changes import (
    agg_perm_runs,
    agg_registered_read_only,
    select_topic_perm_changes,
    with_perm_sources,
)
from jobs.lake.findings import with_finding_keys
from jobs.snapshots import agg_broker_data_runs, agg_route_pieces
from schemas.findings import FINDINGS_SCHEMA
from schemas.routes import (
    BROKER_ADDR_HISTORY_SCHEMA,
    CLUSTER_HISTORY_SCHEMA,
    ROUTE_SNAPSHOTS_SCHEMA,
    TOPIC_ROUTE_HISTORY_SCHEMA,
)
from tests.jobs.inputs import frame

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 21)
T0 = day_start_ms(DAY)
H = 3_600_000
OWN, OBSERVED = ("ns-a", "ns-b"), ("obs-1", "obs-2")
EVENTS = "ns string, seq long, type string"
POLL_MS = 2_000
REGISTERED_AT = {"ns-a": 10 * H, "ns-b": 10 * H + 3, "obs-1": 10 * H + 1_500, "obs-2": 10 * H + 3_500}
WIPED, RESTORED = 12 * H, 12 * H + 30 * 60_000


def ts(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp((T0 + ms) / 1000, tz=dt.UTC)


def utc(collected: dt.datetime | None) -> dt.datetime | None:
    """A collected timestamp (naive, UTC: the session's time zone) as an aware one."""
    return None if collected is None else collected.replace(tzinfo=dt.UTC)


def qd(ns, topic, group, start, end, perm=6, seq=None):
    """A ``topic_route_history`` row, 8/8 queues; ``seq`` the event that set it (None: unknown)."""
    return (ns, topic, group, 8, 8, perm, 0, ts(start), ts(end), seq, None, DAY)


ROUTES = []
for n, ns in enumerate(OWN + OBSERVED):
    at = REGISTERED_AT[ns]
    ro, two, wiped = (f"{'t' if ns in OWN else 'o'}-{name}" for name in ("ro", "two", "w"))
    # broker-1 registers perm 4 for its topics (mqadmin updateTopic -p 4), a new data version
    ROUTES += [qd(ns, ro, "broker-1", 0, at, seq=1), qd(ns, ro, "broker-1", at, None, 4, 100 + n)]
    ROUTES += [
        qd(ns, two, "broker-1", 0, at, seq=1),
        qd(ns, two, "broker-1", at, None, 4, 100 + n),
        qd(ns, two, "broker-2", 0, None, seq=1),
    ]
    # broker-3's write perm wiped on the first server of each kind at 12:00, back at 12:30 with a
    # registration of a new data version
    if ns in ("ns-a", "obs-1"):
        ROUTES += [
            qd(ns, wiped, "broker-3", 0, WIPED, seq=1),
            qd(ns, wiped, "broker-3", WIPED, RESTORED, 4, 150),
            qd(ns, wiped, "broker-3", RESTORED, None, 6, 160),
        ]
    else:
        ROUTES += [qd(ns, wiped, "broker-3", 0, None, seq=1)]
# read-only on both own servers since before the day (a carried row: its event is on an earlier
# day; null row: a row whose event is unknown)
ROUTES += [qd("ns-a", "t-carried", "broker-2", 0, None, 4, 1), qd("ns-b", "t-carried", "broker-2", 0, None, 4)]
ADDRS = [
    (ns, "C1", g, 0, f"10.0.{g[-1]}.1:10911", ts(0), None, 1, None, DAY)
    for ns in OWN + OBSERVED
    for g in ("broker-1", "broker-2", "broker-3")
]
WIPE_EVENTS = [("ns-a", 150, "wipe_write_perm"), ("ns-a", 100, "register"), ("ns-b", 101, "register")]
OBSERVED_ROWS = [(ns, POLL_MS) for ns in OBSERVED]


def sourced(spark):
    routes_df = frame(spark, ROUTES, TOPIC_ROUTE_HISTORY_SCHEMA)
    runs_df = with_perm_sources(
        agg_perm_runs(routes_df),
        frame(spark, WIPE_EVENTS, EVENTS),
        frame(spark, OBSERVED_ROWS, "ns string, resolution_ms long"),
    )
    return routes_df, runs_df


def test_each_perm_run_knows_who_set_it(spark):
    _, runs_df = sourced(spark)
    got = {
        (r["ns"], r["topic"], r["from_ms"] - T0): (r["perm"], r["source"], r["prev_source"]) for r in runs_df.collect()
    }
    for ns in OWN:
        assert got[(ns, "t-ro", 0)] == (6, "registered", None)  # the same perm everywhere at 00:00
        assert got[(ns, "t-ro", REGISTERED_AT[ns])] == (4, "registered", "registered")
        assert got[(ns, "t-carried", 0)] == (4, "registered", None)
    assert got[("ns-a", "t-w", WIPED)] == (4, "admin", "registered")  # the 205
    assert got[("ns-a", "t-w", RESTORED)] == (6, "registered", "admin")  # a registration ends the wipe
    for ns in OBSERVED:  # the same change on both, a round apart: a registration
        assert got[(ns, "o-ro", REGISTERED_AT[ns])] == (4, "registered", "registered")
    assert got[("obs-1", "o-w", WIPED)] == (4, "admin", "registered")  # obs-2 kept it writable
    assert got[("obs-1", "o-w", RESTORED)][1:] == ("admin", "admin")


def test_a_registered_perm_change_is_topic_perm_changed_on_each_server_and_no_wipe(spark):
    routes_df, runs_df = sourced(spark)
    findings_df = select_topic_perm_changes(runs_df, routes_df)
    # the distribution stage's other findings have these columns (a union by name)
    assert findings_df.columns == [
        c for c in FINDINGS_SCHEMA.names if c not in ("date", "category", "finding_id", "incident_id")
    ]
    findings = {
        (r["subject"], r["ns"]): (r["severity"], utc(r["start_ts"]), json.loads(r["detail"]))
        for r in findings_df.collect()
    }
    assert sorted(findings) == sorted(
        [(t, ns) for ns in OWN for t in ("t-ro", "t-two")] + [(t, ns) for ns in OBSERVED for t in ("o-ro", "o-two")]
    )
    for ns in OWN + OBSERVED:
        prefix = "t" if ns in OWN else "o"
        severity, at, detail = findings[(f"{prefix}-ro", ns)]
        # its only group: producers get no queue any more, by the broker's configuration
        assert severity == "warning" and at == ts(REGISTERED_AT[ns])
        assert detail == {
            "broker_name": "broker-1",
            "perm_before": 6,
            "perm": 4,
            "other_groups": 0,
            "topic_writable": False,
            "write_queues": 8,
        }
        severity, _, detail = findings[(f"{prefix}-two", ns)]
        assert severity == "info" and detail["topic_writable"] and detail["other_groups"] == 1


@pytest.fixture(scope="module")
def distribution(spark):
    """The stage's frames for the day, as ``run_distribution`` composes them (built once: the
    tests only read them)."""
    routes_df, runs_df = sourced(spark)
    addr_df = frame(spark, ADDRS, BROKER_ADDR_HISTORY_SCHEMA)
    step = 300_000
    pieces_df = agg_route_pieces(routes_df, agg_broker_data_runs(addr_df, DAY, step), DAY, step)
    exact_runs_df = D.agg_exact_broker_data_runs(addr_df, DAY)
    built = D.build_distribution(
        pieces_df,
        frame(spark, [], ROUTE_SNAPSHOTS_SCHEMA),
        addr_df,
        frame(spark, [], CLUSTER_HISTORY_SCHEMA),
        DAY,
        D.DistributionParams(step),
        exact_pieces_df=D.agg_exact_pieces(routes_df, exact_runs_df, DAY),
        exact_broker_data_runs_df=exact_runs_df,
        registered_read_only_df=agg_registered_read_only(runs_df, DAY),
    )
    yield built, routes_df, runs_df
    built.release()


def test_only_the_admins_wipe_is_write_perm_wiped_and_a_configured_read_only_topic_is_no_dead_end(distribution):
    built, _, _ = distribution
    rows = built.findings_df.where(F.col("kind").isin("write_perm_wiped", "no_writable_queue")).collect()
    got = sorted((r["kind"], r["subject"], r["ns"], utc(r["start_ts"]), utc(r["end_ts"])) for r in rows)
    assert got == sorted(
        [
            ("no_writable_queue", "o-w", "obs-1", ts(WIPED), ts(RESTORED)),
            ("no_writable_queue", "t-w", "ns-a", ts(WIPED), ts(RESTORED)),
            ("write_perm_wiped", "broker-3", "ns-a", ts(WIPED), ts(RESTORED)),
            ("write_perm_wiped", "broker-3", "obs-1", ts(WIPED), ts(RESTORED)),
        ]
    )


def test_without_the_sources_the_registered_change_was_a_wipe(spark, distribution):
    """The same day composed as before perm sources existed: broker-1's read-only topics are
    ``write_perm_wiped`` and ``no_writable_queue`` (what this module corrects)."""
    _, routes_df, _ = distribution
    addr_df = frame(spark, ADDRS, BROKER_ADDR_HISTORY_SCHEMA)
    exact_runs_df = D.agg_exact_broker_data_runs(addr_df, DAY)
    built = D.build_distribution(
        agg_route_pieces(routes_df, agg_broker_data_runs(addr_df, DAY, 300_000), DAY, 300_000),
        frame(spark, [], ROUTE_SNAPSHOTS_SCHEMA),
        addr_df,
        frame(spark, [], CLUSTER_HISTORY_SCHEMA),
        DAY,
        D.DistributionParams(300_000),
        exact_pieces_df=D.agg_exact_pieces(routes_df, exact_runs_df, DAY),
        exact_broker_data_runs_df=exact_runs_df,
    )
    try:
        rows = built.findings_df.where(F.col("kind") == "write_perm_wiped").collect()
        wiped = {(r["subject"], r["ns"]) for r in rows}
        assert ("broker-1", "ns-a") in wiped and ("broker-1", "obs-2") in wiped
    finally:
        built.release()


def test_a_read_only_change_is_one_incident_with_its_impact(spark, distribution):
    _, routes_df, runs_df = distribution
    findings_df = with_finding_keys(select_topic_perm_changes(runs_df, routes_df), DAY, "distribution")
    addr_df = I.agg_addr_names(frame(spark, ADDRS, BROKER_ADDR_HISTORY_SCHEMA))
    linked_df = I.link_findings(findings_df, addr_df, DAY, 300_000)
    got = sorted(
        (
            r["root_cause"],
            r["subject"],
            r["severity"],
            r["servers"],
            r["findings"],
            r["topics_unwritable"],
            r["write_queues_unwritable"],
        )
        for r in I.agg_incidents(linked_df, frame(spark, [(4,)], "n_servers int"), DAY).collect()
    )
    assert got == [
        ("topic_perm_changed", "o-ro", "warning", list(OBSERVED), 2, 1, 8),
        ("topic_perm_changed", "o-two", "info", list(OBSERVED), 2, 0, 0),
        ("topic_perm_changed", "t-ro", "warning", list(OWN), 2, 1, 8),
        ("topic_perm_changed", "t-two", "info", list(OWN), 2, 0, 0),
    ]
