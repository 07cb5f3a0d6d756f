"""Observed name servers (``nsaudit collect`` streams) through the audit: the rebuild makes their
history tables and known periods as step functions of the observations, and ``nsaudit route``,
``cluster`` and ``diff --ns obs-...`` answer what the server answered at an instant, with when.

The observations are written by the collector's own recorder (``ObservedServer``) from views of
two servers polled every 10 s, a few seconds apart, on a day with a precise timeline: a write perm
wiped on one server only, a topic deleted on the other, a topic created on both one round apart,
and an outage of the second server. Beside them a shadow name server (an ``nsaudit nameserver``
the brokers also register with) logs the registrations and heartbeats the brokers sent. The lake
is ingested and rebuilt once for the module, and the later stages run once over it.
"""

from __future__ import annotations

import dataclasses

import orjson
import pytest
from pyspark.sql import functions as F

from common.config import Config
from common.timeutil import iso
from jobs import lake
from jobs.ingest.stage import run_ingest
from jobs.lake import audit_runs
from jobs.lake.tables import read_table
from jobs.rebuild.stage import run_rebuild
from nameserver.collect.record import ObservedServer
from nameserver.collect.view import ServerView, broker_entry, route_entry
from nameserver.model import DataVersion, TopicConfig
from nsaudit.cli import main
from schemas.routes import (
    BROKER_ADDR_HISTORY_SCHEMA,
    CLUSTER_HISTORY_SCHEMA,
    NS_RUNS_SCHEMA,
    NS_STATE_SCHEMA,
    TOPIC_ROUTE_HISTORY_SCHEMA,
)
from tests.jobs.logdata import DAY, T0, Broker, heartbeat_904, ns_start, register, write_log

OBS1, OBS2, SHADOW = "obs-10.0.0.2-9876", "obs-10.0.0.3-9876", "ns-shadow"
INTERVAL = 10_000
ROUNDS = 60  # 10 minutes
WIPE = (5, 40)  # rounds in which obs-1 answers TopicA's broker-a without write perm
DELETED = 10  # obs-2 answers TopicB TOPIC_NOT_EXIST from this round
CREATED = {OBS1: 20, OBS2: 21}  # TopicC appears one round apart
OUTAGE = (45, 50)  # obs-2 does not answer in these rounds; recovers at the last
A = {"cluster": "DefaultCluster", "broker_name": "broker-a", "broker_addrs": {0: "10.0.0.5:10911"}}
B = {"cluster": "DefaultCluster", "broker_name": "broker-b", "broker_addrs": {0: "10.0.0.6:10911"}}
# broker-c's namesrvAddr lists the shadow and obs-1 only: obs-2 never sees it
C = {"cluster": "DefaultCluster", "broker_name": "broker-c", "broker_addrs": {0: "10.0.0.7:10911"}}


def _queue(name: str, perm: int = 6) -> dict:
    return {"broker_name": name, "read_queue_nums": 8, "write_queue_nums": 8, "perm": perm, "topic_sys_flag": 0}


def _route(*queues: dict) -> dict:
    datas = [A if q["broker_name"] == "broker-a" else B for q in queues]
    return route_entry({"broker_datas": datas, "filter_server_table": {}, "queue_datas": list(queues)})


def view(ns: str, round_no: int) -> ServerView:
    """What server ``ns`` answers in round ``round_no``."""
    wiped = ns == OBS1 and WIPE[0] <= round_no < WIPE[1]
    routes = {
        "TopicA": _route(_queue("broker-a", 4 if wiped else 6), _queue("broker-b")),
        "TopicB": None if ns == OBS2 and round_no >= DELETED else _route(_queue("broker-a")),
    }
    if round_no >= CREATED[ns]:
        routes["TopicC"] = _route(_queue("broker-b"))
    brokers = {"broker-a": broker_entry(A), "broker-b": broker_entry(B)}
    if ns == OBS1:
        brokers["broker-c"] = broker_entry(C)
    return ServerView(brokers, routes)


def shadow_events() -> list[dict]:
    """What the shadow logs: both brokers register at start and heartbeat every 30 s; broker-b
    registers TopicC a few seconds before the observed servers show it."""
    topic_a, topic_b, topic_c = TopicConfig("TopicA", 8, 8), TopicConfig("TopicB", 8, 8), TopicConfig("TopicC", 8, 8)
    a = Broker("DefaultCluster", "broker-a", 0, "10.0.0.5:10911", "10.0.0.5:10912", (topic_a, topic_b))
    b = Broker("DefaultCluster", "broker-b", 0, "10.0.0.6:10911", "10.0.0.6:10912", (topic_a,))
    b_created = dataclasses.replace(b, topics=(topic_a, topic_c), data_version=DataVersion(1795219300000, 4))
    created = round_ts(OBS1, CREATED[OBS1]) - 5000
    c = Broker("DefaultCluster", "broker-c", 0, "10.0.0.7:10911", "10.0.0.7:10912", ())
    out = [
        ns_start(T0),
        register(T0 + 500, a),
        register(T0 + 600, b, channel="c2"),
        register(T0 + 700, c, channel="c3"),
    ]
    for t in range(T0 + 30_000, T0 + 1_000_000, 30_000):
        out += [heartbeat_904(t, a), heartbeat_904(t + 100, b, channel="c2"), heartbeat_904(t + 200, c, channel="c3")]
        if t < created <= t + 30_000:
            out.append(register(created, b_created, kind="heartbeat", channel="c2"))
    return out


def round_ts(ns: str, round_no: int) -> int:
    """When ``ns``'s round ended: obs-2 is polled 4 s after obs-1."""
    return T0 + round_no * INTERVAL + (4000 if ns == OBS2 else 0)


def observations(ns: str) -> list[dict]:
    server = ObservedServer(ns.removeprefix("obs-").replace("-9876", ":9876"), INTERVAL)
    out = server.start(T0 + 5000)
    for r in range(1, ROUNDS + 1):
        if ns == OBS2 and OUTAGE[0] <= r < OUTAGE[1]:
            out += server.failed(round_ts(ns, r), r, "timeout", "no answer to GET_BROKER_CLUSTER_INFO within 5 s")
        else:
            out += server.observed(view(ns, r), round_ts(ns, r), r)
    return out + server.stop(round_ts(ns, ROUNDS) + 1000, "SIGTERM")


@pytest.fixture(scope="module")
def lake_dir(spark, tmp_path_factory):
    root = tmp_path_factory.mktemp("observed")
    events, lake_path = root / "events", root / "lake"
    write_log(events, SHADOW, shadow_events())
    for ns in (OBS1, OBS2):
        write_log(events, ns, observations(ns))
    run_ingest(spark, events, lake_path, DAY)
    result = run_rebuild(spark, str(lake_path), DAY, Config())
    assert (result.servers, result.observed) == ((SHADOW,), (OBS1, OBS2))
    assert result.notes == [
        f"observed name servers, tables as exact as their poll interval: {OBS1} (10000 ms), {OBS2} (10000 ms)"
    ]
    audit_runs.record(spark, str(lake_path), DAY, "ok", [], {})
    return str(lake_path)


def _rows(spark, lake_dir: str, name: str, schema, ns: str) -> list:
    return (
        read_table(spark, lake.table_path(lake_dir, name), schema, where={"date": DAY})
        .where(F.col("ns") == ns)
        .drop("date")
        .collect()
    )


def _ms(ts) -> int | None:
    return None if ts is None else int(ts.timestamp() * 1000)


def test_a_wipe_seen_on_one_server_is_an_interval_of_its_topic_route_history(spark, lake_dir):
    rows = sorted(
        (r["topic"], r["broker_name"], r["perm"], _ms(r["valid_from_ts"]), _ms(r["valid_to_ts"]))
        for r in _rows(spark, lake_dir, lake.TOPIC_ROUTE_HISTORY, TOPIC_ROUTE_HISTORY_SCHEMA, OBS1)
    )
    stop = round_ts(OBS1, ROUNDS) + 1000
    assert [r for r in rows if r[:2] == ("TopicA", "broker-a")] == [
        ("TopicA", "broker-a", 4, round_ts(OBS1, WIPE[0]), round_ts(OBS1, WIPE[1])),
        ("TopicA", "broker-a", 6, round_ts(OBS1, 1), round_ts(OBS1, WIPE[0])),
        ("TopicA", "broker-a", 6, round_ts(OBS1, WIPE[1]), stop),
    ]
    assert [r for r in rows if r[0] == "TopicC"] == [("TopicC", "broker-b", 6, round_ts(OBS1, 20), stop)]


def test_an_outage_ends_every_entry_and_the_known_period(spark, lake_dir):
    topic_b = [
        (_ms(r["valid_from_ts"]), _ms(r["valid_to_ts"]), r["from_seq"] < r["to_seq"])
        for r in _rows(spark, lake_dir, lake.TOPIC_ROUTE_HISTORY, TOPIC_ROUTE_HISTORY_SCHEMA, OBS2)
        if r["topic"] == "TopicB"
    ]
    assert topic_b == [(round_ts(OBS2, 1), round_ts(OBS2, DELETED), True)]  # deleted, and not listed again
    addrs = sorted(
        (r["broker_name"], r["broker_id"], r["broker_addr"], _ms(r["valid_from_ts"]), _ms(r["valid_to_ts"]))
        for r in _rows(spark, lake_dir, lake.BROKER_ADDR_HISTORY, BROKER_ADDR_HISTORY_SCHEMA, OBS2)
    )
    stop = round_ts(OBS2, ROUNDS) + 1000
    assert [a for a in addrs if a[0] == "broker-a"] == [
        ("broker-a", 0, "10.0.0.5:10911", round_ts(OBS2, 1), round_ts(OBS2, OUTAGE[0])),
        ("broker-a", 0, "10.0.0.5:10911", round_ts(OBS2, OUTAGE[1]), stop),
    ]
    clusters = {
        (r["cluster"], r["broker_name"])
        for r in _rows(spark, lake_dir, lake.CLUSTER_HISTORY, CLUSTER_HISTORY_SCHEMA, OBS2)
    }
    assert clusters == {("DefaultCluster", "broker-a"), ("DefaultCluster", "broker-b")}  # never broker-c
    runs = sorted(
        (_ms(r["start_ts"]), _ms(r["stop_ts"]), r["stop_reason"], r["resolution_ms"])
        for r in _rows(spark, lake_dir, lake.NS_RUNS, NS_RUNS_SCHEMA, OBS2)
    )
    assert runs == [
        (round_ts(OBS2, 1), round_ts(OBS2, OUTAGE[0]), "observe_error", INTERVAL),
        (round_ts(OBS2, OUTAGE[1]), stop, "observe_stop", INTERVAL),
    ]


def test_ns_state_marks_observed_servers_with_their_resolution(spark, lake_dir):
    states = {
        r["ns"]: (r["observed"], r["resolution_ms"], r["up"], r["up_at_start"])
        for r in read_table(
            spark, lake.table_path(lake_dir, lake.NS_STATE), NS_STATE_SCHEMA, where={"date": DAY}
        ).collect()
    }
    assert states == {
        SHADOW: (False, None, True, True),
        OBS1: (True, INTERVAL, False, False),
        OBS2: (True, INTERVAL, False, False),
    }
    (own,) = _rows(spark, lake_dir, lake.NS_RUNS, NS_RUNS_SCHEMA, SHADOW)
    assert own["resolution_ms"] is None


def run(capsys, *argv) -> dict:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert (code, err) == (0, "")
    return orjson.loads(out)


def test_route_answers_what_the_server_answered_and_when_it_was_seen(lake_dir, capsys):
    at = round_ts(OBS1, WIPE[0]) + 25_000  # two unchanged rounds after the wipe was seen
    answer = run(capsys, "route", "--lake", lake_dir, "--ns", OBS1, "--topic", "TopicA", "--at", iso(at))
    perms = {q["brokerName"]: q["perm"] for q in answer["route"]["queueDatas"]}
    assert (perms, answer["up"], answer["observed_ts"], answer["resolution_ms"]) == (
        {"broker-a": 4, "broker-b": 6},
        True,
        round_ts(OBS1, WIPE[0]),
        INTERVAL,
    )
    # the other server was not wiped
    other = run(capsys, "route", "--lake", lake_dir, "--ns", OBS2, "--topic", "TopicA", "--at", iso(at))
    assert {q["brokerName"]: q["perm"] for q in other["route"]["queueDatas"]} == {"broker-a": 6, "broker-b": 6}
    # a moment before the wipe was seen, the server still answered perm 6 (resolution: one interval)
    before = run(
        capsys, "route", "--lake", lake_dir, "--ns", OBS1, "--topic", "TopicA", "--at", iso(round_ts(OBS1, WIPE[0]) - 1)
    )
    assert {q["brokerName"]: q["perm"] for q in before["route"]["queueDatas"]}["broker-a"] == 6
    assert before["observed_ts"] == round_ts(OBS1, 1)
    # an own server's answer has no observation keys
    own = run(capsys, "route", "--lake", lake_dir, "--ns", SHADOW, "--topic", "TopicA", "--at", iso(at))
    assert "observed_ts" not in own and own["up"] is True
    assert {q["brokerName"]: q["perm"] for q in own["route"]["queueDatas"]} == {"broker-a": 6, "broker-b": 6}


def test_nothing_is_known_outside_a_known_period(lake_dir, capsys):
    for at in (T0 + 1000, round_ts(OBS2, OUTAGE[0]) + 1, round_ts(OBS2, ROUNDS) + 2000):
        answer = run(capsys, "route", "--lake", lake_dir, "--ns", OBS2, "--topic", "TopicA", "--at", iso(at))
        assert (answer["route"], answer["up"], answer["observed_ts"]) == (None, False, None), iso(at)
        cluster = run(capsys, "cluster", "--lake", lake_dir, "--ns", OBS2, "--at", iso(at))
        assert (cluster["up"], cluster["observed_ts"]) == (False, None)
    back = run(capsys, "cluster", "--lake", lake_dir, "--ns", OBS2, "--at", iso(round_ts(OBS2, OUTAGE[1])))
    assert (sorted(back["cluster_info"]["brokerAddrTable"]), back["up"], back["observed_ts"]) == (
        ["broker-a", "broker-b"],
        True,
        round_ts(OBS2, OUTAGE[1]),
    )


def test_diff_shows_a_topic_deleted_on_one_server(lake_dir, capsys):
    answer = run(
        capsys,
        "diff",
        "--lake",
        lake_dir,
        "--ns",
        OBS2,
        "--from",
        iso(round_ts(OBS2, DELETED) - 1),
        "--to",
        iso(round_ts(OBS2, DELETED)),
    )
    assert answer["up"] == {"from": True, "to": True}
    assert answer["observed_ts"] == {"from": round_ts(OBS2, 1), "to": round_ts(OBS2, DELETED)}
    queues = answer["tables"]["topicQueueTable"]
    assert (queues["added"], queues["changed"]) == ([], [])
    assert [(r["topic"], r["brokerName"]) for r in queues["removed"]] == [("TopicB", "broker-a")]


# ------------------------------------------------------------------ later stages over observed servers


@pytest.fixture(scope="module")
def audited(spark, lake_dir):
    """The stages after the rebuild, once: snapshots, liveness, divergence, distribution."""
    from jobs.analytics.distribution.stage import run_distribution
    from jobs.analytics.divergence.stage import run_divergence
    from jobs.analytics.liveness.stage import run_liveness
    from jobs.snapshots import run_snapshots

    config = Config()
    run_snapshots(spark, lake_dir, DAY, config)
    run_liveness(spark, lake_dir, DAY, config)
    divergence = run_divergence(spark, lake_dir, DAY, config)
    run_distribution(spark, lake_dir, DAY, config)
    return divergence


def _episodes(spark, lake_dir: str) -> list:
    from schemas.divergence import NS_DIVERGENCES_SCHEMA

    return read_table(
        spark, lake.table_path(lake_dir, lake.NS_DIVERGENCES), NS_DIVERGENCES_SCHEMA, where={"date": DAY}
    ).collect()


def test_the_grace_covers_one_poll_interval(audited):
    assert audited.grace.poll_interval_ms == INTERVAL
    assert (
        audited.grace.grace_ms
        == audited.grace.heartbeat_period_ms + audited.grace.scan_interval_ms + audited.grace.clock_skew_ms + INTERVAL
    )
    assert "poll interval 10000 (observed servers)" in audited.notes[0]


def test_a_wipe_on_one_observed_server_is_a_divergence_naming_it(spark, lake_dir, audited):
    (wipe,) = [e for e in _episodes(spark, lake_dir) if e["kind"] == "queue_data_mismatch" and e["topic"] == "TopicA"]
    assert (wipe["broker_name"], _ms(wipe["start_ts"]), _ms(wipe["end_ts"])) == (
        "broker-a",
        round_ts(OBS1, WIPE[0]),
        round_ts(OBS1, WIPE[1]),
    )
    assert wipe["ns_views"] == {OBS1: "8/8/4/0", OBS2: "8/8/6/0", SHADOW: "8/8/6/0"}


def test_a_topic_deleted_on_one_observed_server_is_route_missing_there(spark, lake_dir, audited):
    missing = [e for e in _episodes(spark, lake_dir) if e["kind"] == "route_missing"]
    assert {e["topic"] for e in missing} == {"TopicB"}
    assert all(e["ns_views"][OBS2] == "absent" for e in missing)
    assert min(_ms(e["start_ts"]) for e in missing) == round_ts(OBS2, DELETED)


def test_a_change_seen_one_round_apart_and_an_outage_are_no_episode(spark, lake_dir, audited):
    subjects = {(e["kind"], e["topic"] or e["broker_name"] or e["broker_addr"]) for e in _episodes(spark, lake_dir)}
    # TopicC appeared a round apart; obs-2's outage is no broker missing on it: only broker-c,
    # which never registers with obs-2, is missing there
    assert not {s for s in subjects if s[1] == "TopicC" or s[0] == "broker_addrs_mismatch"}, subjects
    assert {s for s in subjects if s[0] == "broker_missing"} == {("broker_missing", "10.0.0.7:10911")}


def test_the_wipe_is_a_write_perm_wiped_finding_of_the_observed_server(spark, lake_dir, audited):
    from schemas.findings import FINDINGS_SCHEMA

    findings = (
        read_table(spark, lake.table_path(lake_dir, lake.FINDINGS), FINDINGS_SCHEMA, where={"date": DAY})
        .where(F.col("kind") == "write_perm_wiped")
        .collect()
    )
    assert [(f["subject"], f["ns"], orjson.loads(f["detail"])["writable_on"]) for f in findings] == [
        ("broker-a", OBS1, [SHADOW, OBS2])
    ]
    # inside the wipe's rounds, at the first route snapshot it covers
    assert round_ts(OBS1, WIPE[0]) <= _ms(findings[0]["start_ts"]) < round_ts(OBS1, WIPE[1])


def test_a_broker_missing_on_a_real_server_that_the_shadow_has_live_is_a_finding(spark, lake_dir, audited):
    from schemas.findings import FINDINGS_SCHEMA

    findings = (
        read_table(spark, lake.table_path(lake_dir, lake.FINDINGS), FINDINGS_SCHEMA, where={"date": DAY})
        .where(F.col("kind") == "observed_broker_missing")
        .orderBy("start_ts")
        .collect()
    )
    # obs-2 is known from its first round to its outage, and from its recovery to its stop
    assert [(f["subject"], f["ns"], f["severity"], _ms(f["start_ts"]), _ms(f["end_ts"])) for f in findings] == [
        ("broker-c", OBS2, "warning", round_ts(OBS2, 1), round_ts(OBS2, OUTAGE[0])),
        ("broker-c", OBS2, "warning", round_ts(OBS2, OUTAGE[1]), round_ts(OBS2, ROUNDS) + 1000),
    ]
    detail = orjson.loads(findings[0]["detail"])
    assert (detail["broker_addr"], detail["shadow_servers"]) == ("10.0.0.7:10911", [SHADOW])
