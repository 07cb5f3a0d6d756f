"""Topic deletes and route changes (``jobs.analytics.distribution.topic_changes``), and the
incidents they make.

A hand-built day of three servers and three broker groups: a topic deleted on every server, a
cluster's share of a topic another cluster still serves deleted, a topic created and a topic's
queues changed by their masters; and what is no change: a master that comes back after an expiry
with the routes it had, and a wipe of a write perm.
"""

from __future__ import annotations

import datetime as dt

import pytest

from common.timeutil import day_start_ms
from jobs.analytics import incidents as I
from jobs.analytics.distribution.topic_changes import select_topic_deletes, select_topic_route_changes
from jobs.lake.findings import with_finding_keys
from schemas.routes import BROKER_ADDR_HISTORY_SCHEMA, TOPIC_ROUTE_HISTORY_SCHEMA
from tests.jobs.inputs import frame

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 21)
T0 = day_start_ms(DAY)
H = 3_600_000
SERVERS = ("ns-a", "ns-b", "ns-c")
EVENTS = "ns string, ts_ms long, type string, topic string, cluster string, remote string"


def ts(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp((T0 + ms) / 1000, tz=dt.UTC)


def route(ns, topic, group, start, end, queues=8, perm=6, write=None):
    return (ns, topic, group, queues, queues if write is None else write, perm, 0, ts(start), ts(end), None, None, DAY)


def master(ns, cluster, group, start, end):
    return (ns, cluster, group, 0, f"10.0.{group[-1]}.1:10911", ts(start), ts(end), None, None, DAY)


GROUPS = {"broker-001": "C1", "broker-002": "C1", "broker-009": "C2"}
DELETED = 10 * H  # the admin deletes t-del (every cluster) and C1's share of t-keep, one server a millisecond later
ADDRS = [master(ns, c, g, 0, None) for ns in SERVERS for g, c in GROUPS.items() if (ns, g) != ("ns-c", "broker-002")]
# broker-002's master expires on ns-c at 15:00 and registers again at 15:05 with the routes it had
ADDRS += [master("ns-c", "C1", "broker-002", 0, 15 * H), master("ns-c", "C1", "broker-002", 15 * H + 300_000, None)]
ROUTES = []
for i, ns in enumerate(SERVERS):
    ROUTES += [route(ns, "t-del", g, 0, DELETED + 1 + i) for g in ("broker-001", "broker-002")]
    ROUTES += [route(ns, "t-keep", "broker-001", 0, DELETED + 1 + i), route(ns, "t-keep", "broker-009", 0, None)]
    # t-new: created on broker-002 at 12:00; t-q: broker-001 from 8 to 16 queues at 13:00
    ROUTES += [route(ns, "t-new", "broker-002", 12 * H + i, None if ns != "ns-c" else 15 * H)]
    ROUTES += [
        route(ns, "t-q", "broker-001", 0, 13 * H + i),
        route(ns, "t-q", "broker-001", 13 * H + i, None if ns != "ns-a" else 16 * H, queues=16),
    ]
# the wipe of broker-001's write perm on ns-a at 16:00, and broker-002's return on ns-c
ROUTES += [
    route("ns-a", "t-q", "broker-001", 16 * H, None, queues=16, perm=4),
    route("ns-c", "t-new", "broker-002", 15 * H + 300_000, None),
]
DELETES = [
    (ns, T0 + DELETED + 1 + i, "delete_topic", t, c, "10.0.9.9:50000")
    for i, ns in enumerate(SERVERS)
    for t, c in (("t-del", None), ("t-keep", "C1"))
]


def findings(spark):
    routes_df = frame(spark, ROUTES, TOPIC_ROUTE_HISTORY_SCHEMA)
    addr_df = frame(spark, ADDRS, BROKER_ADDR_HISTORY_SCHEMA)
    return select_topic_deletes(frame(spark, DELETES, EVENTS), routes_df).unionByName(
        select_topic_route_changes(routes_df, addr_df, DAY)
    ), addr_df


def test_deletes_and_changes_are_findings_at_the_instant_each_server_applied_them(spark):
    findings_df, _ = findings(spark)
    got = sorted(
        (r["kind"], r["subject"], r["ns"], r["severity"], r["start_ts"] == r["end_ts"]) for r in findings_df.collect()
    )
    assert got == sorted(
        [("topic_deleted", "t-del", ns, "warning", True) for ns in SERVERS]  # no route left: producers lose it
        + [("topic_deleted", "t-keep", ns, "info", True) for ns in SERVERS]  # broker-009 still serves it
        + [("topic_route_changed", "t-new", ns, "info", True) for ns in SERVERS]
        + [("topic_route_changed", "t-q", ns, "info", True) for ns in SERVERS]
    )  # broker-002's return on ns-c and the perm wipe on ns-a are no route change


def test_a_topic_deleted_on_all_servers_is_one_incident_naming_the_topic_and_the_servers(spark):
    findings_df, addr_df = findings(spark)
    keyed_df = with_finding_keys(findings_df, DAY, "distribution")
    linked_df = I.link_findings(keyed_df, I.agg_addr_names(addr_df), DAY, 300_000)
    incidents = I.agg_incidents(linked_df, frame(spark, [(3,)], "n_servers int"), DAY).collect()
    got = sorted((r["root_cause"], r["subject"], r["servers"], r["severity"], r["findings"]) for r in incidents)
    assert got == [
        ("topic_deleted", "t-del", list(SERVERS), "warning", 3),
        ("topic_deleted", "t-keep", list(SERVERS), "info", 3),
        ("topic_route_changed", "t-new", list(SERVERS), "info", 3),
        ("topic_route_changed", "t-q", list(SERVERS), "info", 3),
    ]
    deleted = next(r for r in incidents if r["subject"] == "t-del")
    assert (deleted["start_ts"].timestamp() * 1000 - T0, deleted["end_ts"].timestamp() * 1000 - T0) == (
        DELETED + 1,
        DELETED + 3,
    )
