"""Liveness as observed (``jobs.analytics.liveness.observed``): a broker address an observed server
stopped listing, and an observed server that stopped answering, from hand-built history rows of a
day; then the incidents they make.

The end to end case, real RocketMQ name servers with a broker killed with ``kill -9`` and a server
restarted, is ``tests/interop/test_collect_faults.py``.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest

from common.timeutil import DAY_MS, day_start_ms
from jobs.analytics import incidents as I
from jobs.analytics.liveness.observed import agg_observed_broker_gone_findings, agg_observed_server_down_findings
from schemas.findings import FINDINGS_SCHEMA
from schemas.routes import BROKER_ADDR_HISTORY_SCHEMA, NS_RUNS_SCHEMA
from tests.jobs.inputs import frame

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 21)
T0 = day_start_ms(DAY)
H = 3_600_000
OBS_A, OBS_B = "obs-a", "obs-b"
K, M = "10.0.0.9:10911", "10.0.0.5:10911"  # broker-k's master, broker-m's master


def ts(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp((T0 + ms) / 1000, tz=dt.UTC)


def addr(ns, name, broker_id, address, start, end):
    return (ns, "C1", name, broker_id, address, ts(start), ts(end), 1, 2, DAY)


def run(ns, start, stop, reason):
    return (ns, ts(start), ts(stop), 1, 2, reason, 10_000, DAY)


# obs-a: known 00:00:05-12:00 (an outage) and 12:01-24:00; obs-b known all day
RUNS = [
    run(OBS_A, 5_000, 12 * H, "observe_error"),
    run(OBS_A, 12 * H + 60_000, None, "open"),
    run(OBS_B, 5_000, None, "open"),
]
ADDRS = [
    # broker-k listed by both until 10:00 (obs-a) / 10:00:04 (obs-b): killed, never back
    addr(OBS_A, "broker-k", 0, K, 5_000, 10 * H),
    addr(OBS_B, "broker-k", 0, K, 5_000, 10 * H + 4_000),
    # broker-m on obs-a: gone 08:00-08:00:40, back; a slave joins at 09:00 (its entry ends where the next begins)
    addr(OBS_A, "broker-m", 0, M, 5_000, 8 * H),
    addr(OBS_A, "broker-m", 0, M, 8 * H + 40_000, 9 * H),
    addr(OBS_A, "broker-m", 0, M, 9 * H, 12 * H),
    addr(OBS_A, "broker-m", 1, "10.0.0.5:10921", 9 * H, 12 * H),
    # obs-a's outage ends every entry; back from it, broker-m is there again but its slave is not
    addr(OBS_A, "broker-m", 0, M, 12 * H + 60_000, None),
    addr(OBS_B, "broker-m", 0, M, 5_000, None),
]


def _rows(df) -> list[tuple]:
    return sorted(
        (
            r["kind"],
            r["subject"],
            r["ns"],
            round(r["start_ts"].timestamp() * 1000) - T0,
            round(r["end_ts"].timestamp() * 1000) - T0,
            r["severity"],
            json.loads(r["detail"]),
        )
        for r in df.collect()
    )


def test_an_address_an_observed_server_stopped_listing_is_gone_until_listed_again(spark):
    runs_df, addr_df = frame(spark, RUNS, NS_RUNS_SCHEMA), frame(spark, ADDRS, BROKER_ADDR_HISTORY_SCHEMA)
    got = _rows(agg_observed_broker_gone_findings(addr_df, runs_df, DAY))
    assert [g[:6] for g in got] == [
        # a brief absence, back at the next listing
        ("observed_broker_gone", M, OBS_A, 8 * H, 8 * H + 40_000, "warning"),
        # gone until obs-a's known period ended: nothing is known after it
        ("observed_broker_gone", K, OBS_A, 10 * H, 12 * H, "warning"),
        ("observed_broker_gone", K, OBS_B, 10 * H + 4_000, DAY_MS, "warning"),
    ]
    brief, cut, still = (g[6] for g in got)
    assert (brief["broker_name"], brief["broker_id"], brief["returned"], brief["still_gone"]) == (
        "broker-m",
        0,
        True,
        False,
    )
    assert (cut["returned"], cut["still_gone"], cut["duration_ms"]) == (False, False, 2 * H)
    assert (still["returned"], still["still_gone"]) == (False, True)
    # the slave's entry ended with the known period: it left the record, not the server


def test_an_observed_server_that_stopped_answering_is_down_until_it_answers_again(spark):
    runs_df, addr_df = frame(spark, RUNS, NS_RUNS_SCHEMA), frame(spark, ADDRS, BROKER_ADDR_HISTORY_SCHEMA)
    (down,) = _rows(agg_observed_server_down_findings(runs_df, addr_df, DAY))
    assert down[:6] == ("observed_server_down", OBS_A, OBS_A, 12 * H, 12 * H + 60_000, "warning")
    # it listed broker-m's master and slave when it failed, the master alone when back: emptied
    assert down[6] == {
        "duration_ms": 60_000,
        "came_back": True,
        "brokers_before": 2,
        "brokers_after": 1,
        "tables_emptied": True,
        "resolution_ms": 10_000,
    }
    # still down at midnight; a collector stopped is no server down
    runs = [run(OBS_B, 5_000, 23 * H, "observe_error"), run(OBS_A, 5_000, 23 * H, "observe_stop")]
    (late,) = _rows(agg_observed_server_down_findings(frame(spark, runs, NS_RUNS_SCHEMA), addr_df, DAY))
    assert late[1:5] == (OBS_B, OBS_B, 23 * H, DAY_MS)
    assert (late[6]["came_back"], late[6]["brokers_after"], late[6]["tables_emptied"]) == (False, None, False)


def finding(fid, kind, subject, ns, start, end, detail):
    return (DAY, "liveness", kind, "warning", subject, ns, ts(start), ts(end), json.dumps(detail), fid, None)


def test_what_observed_servers_show_makes_incidents_with_their_root_causes(spark):
    gone = {"cluster": "C1", "broker_name": "broker-k", "broker_id": 0, "returned": False}
    down = {"came_back": True, "brokers_before": 2, "brokers_after": 0}
    rows = [
        finding("k1", "observed_broker_gone", K, OBS_A, 10 * H, 12 * H, gone),
        finding("k2", "observed_broker_gone", K, OBS_B, 10 * H + 4_000, DAY_MS, gone),
        finding(
            "s1",
            "observed_broker_gone",
            "10.0.0.6:10921",
            OBS_A,
            6 * H,
            6 * H + 50_000,
            {**gone, "broker_name": "broker-s", "broker_id": 1},
        ),
        finding("d1", "observed_server_down", OBS_A, OBS_A, 12 * H, 12 * H + 60_000, {**down, "tables_emptied": True}),
        finding("d2", "observed_server_down", OBS_B, OBS_B, 20 * H, 20 * H + 60_000, {**down, "tables_emptied": False}),
    ]
    addr_df = I.agg_addr_names(frame(spark, [addr(OBS_A, "broker-k", 0, K, 5_000, 10 * H)], BROKER_ADDR_HISTORY_SCHEMA))
    linked_df = I.link_findings(frame(spark, rows, FINDINGS_SCHEMA), addr_df, DAY, 300_000)
    got = sorted(
        (r["root_cause"], r["subject"], r["servers"], sorted(r["finding_ids"]))
        for r in I.agg_incidents(linked_df, frame(spark, [(2,)], "n_servers int"), DAY).collect()
    )
    assert got == [
        ("broker_dead", "broker-s", [OBS_A], ["s1"]),  # a slave
        ("master_lost", "broker-k", [OBS_A, OBS_B], ["k1", "k2"]),
        ("server_restart", OBS_A, [OBS_A], ["d1"]),
        ("server_unreachable", OBS_B, [OBS_B], ["d2"]),
    ]
