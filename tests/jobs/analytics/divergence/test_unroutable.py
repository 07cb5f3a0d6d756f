"""A topic no live server routes any more (``jobs.analytics.divergence.unroutable``), and the
incident it belongs to (``jobs.analytics.incidents``): the shutdown, expiry or delete that caused
it, counted in ``topics_unroutable``; and a broker that observed servers stopped listing after a
shadow name server logged its UNREGISTER_BROKER is a clean shutdown.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from common.timeutil import DAY_MS, day_start_ms
from jobs.analytics import incidents as I
from jobs.analytics.divergence.span import Span
from jobs.analytics.divergence.unroutable import agg_unroutable_findings
from jobs.analytics.divergence.up_periods import agg_up_periods
from schemas.findings import FINDINGS_SCHEMA
from schemas.routes import BROKER_ADDR_HISTORY_SCHEMA, NS_RUNS_SCHEMA, TOPIC_ROUTE_HISTORY_SCHEMA
from tests.jobs.inputs import frame

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 21)
YESTERDAY = DAY - dt.timedelta(days=1)
T0 = day_start_ms(DAY)
H = 3_600_000
GRACE_MS = 30_000
STEP = 300_000


def ts(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp((T0 + ms) / 1000, tz=dt.UTC)


def utc(collected: dt.datetime | None) -> dt.datetime | None:
    """A collected timestamp (naive, UTC: the session's time zone) as an aware one."""
    return None if collected is None else collected.replace(tzinfo=dt.UTC)


def qd(ns, topic, group, start, end, day=DAY):
    return (ns, topic, group, 8, 8, 6, 0, ts(start), ts(end), 1, None, day)


def run(ns, start, stop, day=DAY, reason="ns_stop"):
    return (ns, ts(start), ts(stop), 1, None, reason if stop is not None else "open", None, day)


ROUTES = [
    # solo: on broker-s only; broker-s shuts down at 10:00, ns-b applies it 4 ms later
    qd("ns-a", "solo", "broker-s", 0, 10 * H),
    qd("ns-b", "solo", "broker-s", 0, 10 * H + 4),
    # back: broker-b gone from both at 11:00, back on both 30 s later
    qd("ns-a", "back", "broker-b", 0, 11 * H),
    qd("ns-b", "back", "broker-b", 0, 11 * H + 2),
    qd("ns-a", "back", "broker-b", 11 * H + 30_000, None),
    qd("ns-b", "back", "broker-b", 11 * H + 30_000, None),
    # shared: broker-1 leaves, broker-2 still serves it
    *[qd(ns, "shared", "broker-1", 0, 12 * H) for ns in ("ns-a", "ns-b")],
    *[qd(ns, "shared", "broker-2", 0, None) for ns in ("ns-a", "ns-b")],
    # diverged: gone from ns-a for half an hour (a route_missing episode, not this)
    qd("ns-a", "diverged", "broker-2", 0, 13 * H),
    qd("ns-a", "diverged", "broker-2", 13 * H + 1_800_000, None),
    qd("ns-b", "diverged", "broker-2", 0, None),
    # down: only ns-a has it; ns-a stops at 14:00 and starts again a minute later, empty until the
    # broker registers 5 s after that
    qd("ns-a", "down", "broker-x", 0, 14 * H),
    qd("ns-a", "down", "broker-x", 14 * H + 65_000, None),
    # past: gone 10 ms before midnight yesterday, never back (edge: the span's look at the day before)
    qd("ns-a", "past", "broker-p", -H, -10, YESTERDAY),
    qd("ns-b", "past", "broker-p", -H, -10, YESTERDAY),
]
RUNS = [
    run("ns-a", -DAY_MS, None, YESTERDAY),
    run("ns-b", -DAY_MS, None, YESTERDAY),
    run("ns-a", 0, 14 * H),
    run("ns-a", 14 * H + 60_000, None),
    run("ns-b", 0, None),
]


def test_a_topic_no_live_server_routes_is_one_finding_with_its_exact_span(spark):
    span = Span.of(DAY, GRACE_MS)
    periods_df = agg_up_periods(frame(spark, RUNS, NS_RUNS_SCHEMA), span)
    findings_df = agg_unroutable_findings(frame(spark, ROUTES, TOPIC_ROUTE_HISTORY_SCHEMA), periods_df, span)
    # the divergence stage's other findings have these columns (a union by name)
    assert findings_df.columns == [c for c in FINDINGS_SCHEMA.names if c not in ("finding_id", "incident_id")]
    rows = findings_df.collect()
    got = {
        r["subject"]: (r["kind"], r["severity"], r["ns"], utc(r["start_ts"]), utc(r["end_ts"]), json.loads(r["detail"]))
        for r in rows
    }
    assert sorted(got) == ["back", "down", "past", "solo"]

    def detail(groups, up, duration, before=False, still_open=False):
        return {
            "broker_name": groups[0],
            "groups": groups,
            "up_servers": up,
            "duration_ms": duration,
            "began_before_day": before,
            "still_open": still_open,
        }

    assert got["solo"] == (
        "topic_unroutable",
        "critical",
        None,
        ts(10 * H + 4),
        ts(DAY_MS),
        detail(["broker-s"], ["ns-a", "ns-b"], DAY_MS - 10 * H - 4, still_open=True),
    )
    assert got["back"][3:] == (ts(11 * H + 2), ts(11 * H + 30_000), detail(["broker-b"], ["ns-a", "ns-b"], 29_998))
    # ns-b alone was up when ns-a stopped; then both, empty, until the broker registered again
    assert got["down"][3:] == (ts(14 * H), ts(14 * H + 65_000), detail(["broker-x"], ["ns-b"], 65_000))
    assert got["past"][3:] == (ts(0), ts(DAY_MS), detail(["broker-p"], ["ns-a", "ns-b"], DAY_MS, True, True))


def test_a_server_that_comes_up_empty_while_the_one_holding_the_route_is_down_took_nothing_away(spark):
    """ns-x holds ``handover`` and stops at 10:00; ns-y, empty, starts at 11:00. From 10:00 no
    server is up (nothing is answered), from 11:00 ns-y answers TOPIC_NOT_EXIST, but no route went:
    ns-y never had one (a new server, as a cluster's second name server is before its brokers
    register). The stop itself is the edge: no server is left up to be unroutable on."""
    span = Span.of(DAY, GRACE_MS)
    runs = [run("ns-x", 0, 10 * H), run("ns-y", 11 * H, None)]
    periods_df = agg_up_periods(frame(spark, runs, NS_RUNS_SCHEMA), span)
    routes = [qd("ns-x", "handover", "broker-h", 0, 10 * H)]
    assert agg_unroutable_findings(frame(spark, routes, TOPIC_ROUTE_HISTORY_SCHEMA), periods_df, span).count() == 0


CATEGORY = {
    "broker_unregistered": "liveness",
    "broker_expired": "liveness",
    "observed_broker_gone": "liveness",
    "ns_restart": "liveness",
    "topic_unroutable": "consistency",
}


def finding(fid, kind, severity, subject, ns, start, end, /, **detail):
    return (
        DAY,
        CATEGORY.get(kind, "distribution"),
        kind,
        severity,
        subject,
        ns,
        ts(start),
        ts(end),
        json.dumps(detail),
        fid,
        None,
    )


def unroutable(fid, topic, group, start, up=("ns-a", "ns-b")):
    return finding(
        fid,
        "topic_unroutable",
        "critical",
        topic,
        None,
        start,
        DAY_MS,
        broker_name=group,
        groups=[group],
        up_servers=list(up),
        duration_ms=DAY_MS - start,
        began_before_day=False,
        still_open=True,
    )


SOLO_ADDR, DEAD_ADDR = "10.0.5.1:10911", "10.0.6.1:10911"
ROWS = [
    # broker-s shuts down cleanly at 10:00: its topic solo is gone from every server
    *[
        finding(
            f"s-{ns}", "broker_unregistered", "info", SOLO_ADDR, ns, 0, 10 * H + i, broker_name="broker-s", broker_id=0
        )
        for i, ns in enumerate(("ns-a", "ns-b"))
    ],
    unroutable("s-u", "solo", "broker-s", 10 * H + 1),
    # broker-d's master dies silently; both servers expire it, the last at 12:02:10
    *[
        finding(
            f"d-{ns}",
            "broker_expired",
            "warning",
            DEAD_ADDR,
            ns,
            12 * H,
            12 * H + 120_000 + i * 10_000,
            broker_name="broker-d",
            broker_id=0,
        )
        for i, ns in enumerate(("ns-a", "ns-b"))
    ],
    unroutable("d-u", "dead", "broker-d", 12 * H + 130_000),
    # an admin deletes t-del on both servers at 13:00 (its group broker-1 stays)
    *[
        finding(
            f"x-{ns}", "topic_deleted", "warning", "t-del", ns, 13 * H + i, 13 * H + i, groups_before=1, groups_after=0
        )
        for i, ns in enumerate(("ns-a", "ns-b"))
    ],
    unroutable("x-u", "t-del", "broker-1", 13 * H + 1),
    # edge: a lone server restarts at 15:00 and routes nothing until its brokers register
    finding("r-1", "ns_restart", "warning", "ns-c", "ns-c", 15 * H - 5_000, 15 * H, crash=False),
    unroutable("r-u", "t-9", "broker-9", 15 * H, up=("ns-c",)),
    # a minute after that restart, broker-8's topic goes: its group's doing, not the restart's
    unroutable("r-v", "t-8", "broker-8", 15 * H + 60_000, up=("ns-c",)),
]
ADDRS = [
    ("ns-a", "C1", "broker-s", 0, SOLO_ADDR, ts(0), ts(10 * H), 1, None, DAY),
    ("ns-a", "C1", "broker-d", 0, DEAD_ADDR, ts(0), ts(12 * H), 1, None, DAY),
]


def incidents(spark, rows, n_servers=2):
    addr_df = I.agg_addr_names(frame(spark, ADDRS, BROKER_ADDR_HISTORY_SCHEMA))
    linked_df = I.link_findings(frame(spark, rows, FINDINGS_SCHEMA), addr_df, DAY, STEP)
    return sorted(
        (r["root_cause"], r["subject"], r["severity"], r["servers"], sorted(r["finding_ids"]), r["topics_unroutable"])
        for r in I.agg_incidents(linked_df, frame(spark, [(n_servers,)], "n_servers int"), DAY).collect()
    )


def test_an_unroutable_topic_is_the_impact_of_the_shutdown_expiry_or_delete_that_caused_it(spark):
    both = ["ns-a", "ns-b"]
    assert incidents(spark, ROWS) == [
        ("broker_shutdown", "broker-s", "critical", both, ["s-ns-a", "s-ns-b", "s-u"], 1),
        ("master_lost", "broker-8", "critical", ["ns-c"], ["r-v"], 1),
        ("master_lost", "broker-d", "critical", both, ["d-ns-a", "d-ns-b", "d-u"], 1),
        ("server_restart", "ns-c", "critical", ["ns-c"], ["r-1", "r-u"], 1),
        ("topic_deleted", "t-del", "critical", both, ["x-ns-a", "x-ns-b", "x-u"], 1),
    ]


SHADOW = "ns-shadow"
OBSERVED_GONE = [
    finding(
        f"g-{ns}",
        "observed_broker_gone",
        "warning",
        SOLO_ADDR,
        ns,
        10 * H + 1_500,
        DAY_MS,
        broker_name="broker-s",
        broker_id=0,
        returned=False,
        still_gone=True,
    )
    for ns in ("obs-1", "obs-2")
]


def test_with_a_shadow_that_heard_the_unregister_an_observed_broker_gone_is_a_clean_shutdown(spark):
    heard = finding(
        "h", "broker_unregistered", "info", SOLO_ADDR, SHADOW, 0, 10 * H, broker_name="broker-s", broker_id=0
    )
    got = incidents(spark, [*OBSERVED_GONE, heard], 3)
    assert got == [
        ("broker_shutdown", "broker-s", "warning", ["ns-shadow", "obs-1", "obs-2"], ["g-obs-1", "g-obs-2", "h"], 0)
    ]
    # without the shadow's word, from outside a shutdown looks like any master lost
    assert [g[0] for g in incidents(spark, OBSERVED_GONE, 2)] == ["master_lost"]


def test_a_real_server_lacking_what_the_shadow_has_is_one_incident_with_its_episode(spark):
    """A partition seen against a shadow: the ``broker_missing`` episode and the
    ``observed_broker_missing`` finding are the same cut, one ``broker_cut_off`` incident."""
    rows = [
        finding(
            "p-e",
            "ns_divergence",
            "warning",
            SOLO_ADDR,
            None,
            10 * H,
            11 * H,
            kind="broker_missing",
            key={"broker_addr": SOLO_ADDR},
            ns_views={"obs-1": "live", "obs-2": "absent", SHADOW: "live"},
            majority="live",
        ),
        finding(
            "p-m",
            "observed_broker_missing",
            "warning",
            "broker-s",
            "obs-2",
            10 * H,
            11 * H,
            broker_addr=SOLO_ADDR,
            broker_name="broker-s",
            shadow_servers=[SHADOW],
        ),
    ]
    assert incidents(spark, rows, 3) == [("broker_cut_off", "broker-s", "warning", ["obs-2"], ["p-e", "p-m"], 0)]
