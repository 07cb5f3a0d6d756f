"""``nsaudit collect`` against three real RocketMQ name servers while an operator's faults happen
(:mod:`tests.interop.collect_scenario`): each fault shows in the right server's stream, at the right
time, and only there; the collection of the other servers goes on while one is down; every line
written is valid. Then the nightly audit of what was collected reports each fault as an incident
with the right server, subject and time, and nothing above info on the fault-free run. What the
collector judged live from the same rounds matches it: the live judgement of the streams equals the
audit's findings, every incident of the audit was seen live with its subject and start, and no live
incident opened that the audit does not report.
"""

from __future__ import annotations

import datetime as dt
import json
import pprint
import re
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import pytest

from nameserver.collect.live.replay import replay
from nameserver.collect.live.rules import LIVE_KINDS, live_grace_ms
from nameserver.eventlog.segments import list_segments, read_events
from schemas import events as schema
from tests.interop.collect_scenario import (
    AUDIT_CONFIG,
    DOOMED,
    INTERVAL_MS,
    KEPT,
    REGISTER_PERIOD_MS,
    SERVERS,
    SHADOW,
    SOLO,
    Scenario,
    brokers_seen,
    first_ts,
    perm_of,
    route_seen,
    run_scenario,
)
from tests.interop.rocketmq import RELEASES, Release
from tests.schemas.test_event_schema import errors

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.timeout(900)]

# a change is in the stream within a round (plus the round's own spread) of happening
SEEN_WITHIN_MS = 2 * INTERVAL_MS + 1000


@pytest.fixture(scope="module")
def scenarios(request, tmp_path_factory) -> dict[str, dict]:
    """Each release's scenario, run at once on threads of their own: a scenario mostly waits for its
    fleet (each fault is held past the grace), so the two runs share the wall time. When the module's
    audit tests run, the Spark session starts meanwhile and each run is audited as soon as its
    streams are closed, one audit at a time on a thread of its own: the fault-free run while the
    faults are injected, the run with faults while the other release's scenario goes on.

    Returns ``runs`` (release -> the scenario's future) and ``audits`` (event directory -> the
    future of :func:`_audit_run`'s result)."""
    from common.config import load_config

    config_path = tmp_path_factory.mktemp("collect-faults-config") / "nsaudit.toml"
    config_path.write_text(AUDIT_CONFIG)
    config = load_config(config_path)
    session: Future = Future()
    audits: dict[Path, Future] = {}
    auditor = ThreadPoolExecutor(1, thread_name_prefix="audit")
    selected = [item for item in request.session.items if item.module is request.module]
    audit_wanted = any("audited" in item.fixturenames for item in selected)

    def audit_when_closed(events: Path) -> None:
        lake = events.parent / f"{events.name}-lake"
        audits[events] = auditor.submit(lambda: _audit_run(session.result(), events, lake, config))

    def run(release: Release, run_dir: Path) -> Scenario:
        scenario = run_scenario(release, run_dir, audit_when_closed if audit_wanted else None)
        if audit_wanted:
            audit_when_closed(scenario.events)
        return scenario

    pool = ThreadPoolExecutor(len(RELEASES), thread_name_prefix="scenario")
    runs = {
        name: pool.submit(run, release, tmp_path_factory.mktemp(f"collect-faults-{name}"))
        for name, release in sorted(RELEASES.items())
    }
    try:
        if audit_wanted:
            try:
                session.set_result(request.getfixturevalue("spark"))
            except BaseException as exc:
                session.set_exception(exc)
                raise
        yield {"runs": runs, "audits": audits, "config": config}
    finally:
        pool.shutdown(wait=True)
        auditor.shutdown(wait=True)


@pytest.fixture(scope="module", params=sorted(RELEASES))
def scenario(request, scenarios):
    return scenarios["runs"][request.param].result()  # the run's own exception, if it failed


def _observed_broker_names(log: list[dict]) -> set[str]:
    return {e["broker_name"] for e in log if e["type"] == "observed_broker" and e["broker_addrs"] is not None}


def test_every_stream_is_whole_valid_and_closed(scenario):
    json_schema = json.loads(schema.JSON_SCHEMA_PATH.read_text(encoding="utf-8"))
    for events in (scenario.clean_events, scenario.events):
        for ns in SERVERS:
            log = scenario.stream(ns, events)
            assert [e for e in log if errors(e, json_schema)] == [], ns
            assert [e["seq"] for e in log] == list(range(1, len(log) + 1)), ns
            assert log[0]["type"] == "observe_start" and log[0]["namesrv_addr"] == scenario.addrs[ns]
            assert log[-1]["type"] == "observe_stop" and log[-1]["reason"] == "SIGTERM"
            assert {s.state for s in list_segments(events, ns)} == {"closed"}
    assert "Traceback" not in scenario.collector_err.read_text()


def test_a_broker_without_a_server_in_its_namesrv_addr_is_never_on_that_server(scenario):
    assert "scn-b" not in _observed_broker_names(scenario.stream("nsC"))
    for ns in ("nsA", "nsB"):
        assert "scn-b" in _observed_broker_names(scenario.stream(ns)), ns


def test_a_wipe_on_one_server_shows_there_only_until_the_next_registration(scenario):
    wipe = scenario.fault("wipe")
    seen = first_ts(scenario.stream("nsA"), wipe["start_ms"], lambda log: perm_of(route_seen(log, KEPT), "scn-a") == 4)
    assert seen is not None and seen - wipe["start_ms"] <= SEEN_WITHIN_MS, (wipe, seen)
    # restored by the registration that follows the delete's new data version, not before it
    delete = scenario.fault("delete_topic")
    assert wipe["end_ms"] is not None, wipe
    assert 0 < wipe["end_ms"] - delete["start_ms"] <= REGISTER_PERIOD_MS + SEEN_WITHIN_MS, (wipe, delete)
    for ns in ("nsB", "nsC"):
        perms = {
            q["perm"]
            for e in scenario.stream(ns)
            if e["type"] == "observed_route" and e["queue_datas"] and e["topic"] in (KEPT, DOOMED)
            for q in e["queue_datas"]
            if q["broker_name"] == "scn-a"
        }
        assert perms == {6}, (ns, perms)


def test_a_topic_deleted_through_one_server_is_gone_there_and_stale_on_the_others(scenario):
    delete = scenario.fault("delete_topic")
    seen = first_ts(scenario.stream("nsB"), delete["start_ms"], lambda log: route_seen(log, DOOMED) is None)
    assert seen is not None and seen - delete["start_ms"] <= SEEN_WITHIN_MS, (delete, seen)
    assert route_seen(scenario.stream("nsB"), DOOMED) is None
    # a 4.9 or 5.x name server adds a broker's topics at a new data version but never drops one: nsA
    # and nsC (restarted before the delete, its brokers registered the topic again) keep the route
    for ns in ("nsA", "nsC"):
        assert route_seen(scenario.stream(ns), DOOMED), ns


def test_a_restarted_server_is_an_error_then_a_recovered_snapshot_while_the_others_go_on(scenario):
    restart = scenario.fault("ns_restart")
    log = scenario.stream("nsC")
    error = next(e for e in log if e["type"] == "observe_error" and e["ts"] >= restart["start_ms"])
    assert error["ts"] - restart["start_ms"] <= SEEN_WITHIN_MS
    assert error["reason"] in ("connect_failed", "connection_closed", "timeout"), error
    recovered = next(e for e in log if e["type"] == "observe_snapshot" and e["ts"] > error["ts"])
    assert recovered["reason"] == "recovered" and recovered["ts"] >= restart["end_ms"]
    # the restarted server's tables come back with the brokers' registrations, each within a period
    # (and a loaded machine's slack) of the server answering again
    back = first_ts(log, recovered["ts"], lambda prefix: brokers_seen(prefix) == {"scn-a", "scn-k", "scn-s"})
    assert back is not None and back - restart["ready_ms"] <= REGISTER_PERIOD_MS + SEEN_WITHIN_MS + 30_000
    assert [e for e in log if e["type"] == "observe_error"] == [error]  # one per outage
    for ns in ("nsA", "nsB"):
        assert [e for e in scenario.stream(ns) if e["type"] == "observe_error"] == [], ns
    # nsA's rounds went on, answered, while nsC failed (the progress lines, in the order printed)
    lines = scenario.collector_err.read_text().splitlines()
    failed = [i for i, line in enumerate(lines) if line.startswith("collect nsC ") and ": FAILED " in line]
    again = next(i for i, line in enumerate(lines) if line.startswith("collect nsC ") and "answering again" in line)
    assert failed and failed[0] < again
    between = [line for line in lines[failed[0] : again] if line.startswith("collect nsA ")]
    assert between and all(re.search(r"round \d+: ok, ", line) for line in between), between


def test_a_broker_killed_with_kill_9_leaves_every_server(scenario):
    kill = scenario.fault("broker_kill")
    for ns in SERVERS:
        gone = first_ts(scenario.stream(ns), kill["start_ms"], lambda log: "scn-k" not in brokers_seen(log))
        assert gone is not None and gone - kill["start_ms"] <= SEEN_WITHIN_MS, (ns, kill, gone)


def test_the_truth_file_lists_each_fault_with_its_servers_and_times(scenario):
    rows = [json.loads(line) for line in (scenario.events / "_truth" / "faults.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["ns"], r["subject"]) for r in rows] == [
        ("partition", ["nsC"], "scn-b"),
        ("wipe", ["nsA"], "scn-a"),
        ("ns_restart", ["nsC"], "nsC"),
        ("delete_topic", ["nsB"], DOOMED),
        ("broker_kill", list(SERVERS), "scn-k"),
        ("read_only", list(SERVERS), SOLO),
        ("broker_shutdown", list(SERVERS), "scn-s"),
    ]
    assert all(r["start_ms"] <= r["end_ms"] for r in rows), rows


# ---------------------------------------------------------------------------- the audit of the day

# what each fault is, as an incident: its root causes (a restart whose first answer back already
# lists every broker again cannot be told from an outage) and whether its servers are the fault's
# exactly (a divergence names the servers off the majority; a kill is seen on every server)
EXPECTED = {
    "partition": {"broker_cut_off"},
    "wipe": {"write_perm_wiped"},
    "ns_restart": {"server_restart", "server_unreachable"},
    "delete_topic": {"topic_divergence", "topic_deleted"},
    "broker_kill": {"master_lost"},
    # a registered permission, seen on every server within a round: no wipe
    "read_only": {"topic_perm_changed"},
    # from outside a clean shutdown looks like a kill; the shadow heard the UNREGISTER_BROKER
    "broker_shutdown": {"broker_shutdown"},
}
# the audit places a fault within a poll interval plus one registration period (and the collector's
# second round of slack: a round's answers come in over its interval)
WITHIN_MS = 2 * INTERVAL_MS + REGISTER_PERIOD_MS


def _audit_run(spark, events: Path, lake_dir: Path, config) -> dict:
    """Run the nightly audit over every UTC day of ``events``: its incidents (times in epoch ms),
    findings and lake."""
    from jobs import lake, nightly_audit
    from jobs.lake.delta.arrow import read_table_arrow

    stamps = [e["ts"] for ns in (*SERVERS, SHADOW) for e in read_events(events, ns, [])]
    days = sorted({dt.datetime.fromtimestamp(t / 1000, dt.UTC).date() for t in stamps})
    for day in days:
        nightly_audit.run(spark, config, str(events), str(lake_dir), day, lambda line: None)
    rows = read_table_arrow(lake.table_path(lake_dir, lake.INCIDENTS)).to_pylist()
    for r in rows:
        r["start_ms"] = int(r["start_ts"].timestamp() * 1000)
        r["end_ms"] = int(r["end_ts"].timestamp() * 1000)
    findings = read_table_arrow(lake.table_path(lake_dir, lake.FINDINGS)).to_pylist()
    return {"incidents": rows, "findings": findings, "lake": lake_dir}


@pytest.fixture(scope="module")
def audited(scenario, scenarios):
    """The incidents of the run with faults and of the fault-free run, audited as an operator of this
    fleet would (``nsaudit audit --config`` with :data:`AUDIT_CONFIG`), by ``scenarios``."""
    faults, clean = (scenarios["audits"][events].result() for events in (scenario.events, scenario.clean_events))
    return {
        "faults": faults["incidents"],
        "clean": clean["incidents"],
        "faults_findings": faults["findings"],
        "config": scenarios["config"],
        "faults_lake": faults["lake"],
    }


def _explains(fault: dict, incident: dict) -> bool:
    # a clean shutdown unregisters somewhere between the SIGTERM and the process's exit
    latest = fault.get("exited_ms") or fault["start_ms"]
    return (
        incident["root_cause"] in EXPECTED[fault["kind"]]
        and incident["subject"] == fault["subject"]
        and set(fault["ns"]) <= set(incident["servers"])
        and fault["start_ms"] - WITHIN_MS <= incident["start_ms"] <= latest + WITHIN_MS
    )


def _said(*values) -> str:
    """The values in full, one per line, for an assertion's message (a tuple's repr is cut short)."""
    return "\n".join(pprint.pformat(v, width=160) for v in values)


@pytest.mark.spark
def test_the_audit_reports_each_fault_with_its_server_subject_and_time(scenario, audited):
    incidents = audited["faults"]
    summary = [(i["root_cause"], i["subject"], i["servers"], i["severity"], i["start_ms"]) for i in incidents]
    for fault in scenario.truth:
        assert any(_explains(fault, i) for i in incidents), _said(fault, summary)
    # a kill is the master lost on every server (and the shadow answered for its topics no more);
    # a wipe, a partition and a delete on their server alone
    kill = next(i for i in incidents if i["root_cause"] == "master_lost")
    assert set(SERVERS) <= set(kill["servers"]) and kill["severity"] != "info", kill
    for kind in ("wipe", "partition", "delete_topic"):
        fault = scenario.fault(kind)
        (incident,) = [i for i in incidents if _explains(fault, i)]
        assert incident["servers"] == fault["ns"], (kind, incident)
    # the wipe ended at scn-a's next registration on its topics with a new data version; nsA keeps
    # the deleted topic's stale QueueData, wiped: the incident lasts as long as that does
    wipe = scenario.fault("wipe")
    (incident,) = [i for i in incidents if _explains(wipe, i)]
    assert incident["end_ms"] >= wipe["end_ms"] - WITHIN_MS
    # updateTopic -p 4 is the broker's own permission: on every server, a warning (its only group:
    # no writable queue left), and no write_perm_wiped of scn-s anywhere
    (read_only,) = [i for i in incidents if _explains(scenario.fault("read_only"), i)]
    assert read_only["severity"] == "warning" and read_only["topics_unwritable"] == 1, read_only
    assert [i["subject"] for i in incidents if "write_perm_wiped" in i["kinds"]] == ["scn-a"], summary
    # the clean shutdown left ScnSolo on no server: one critical incident that counts it
    (shutdown,) = [i for i in incidents if _explains(scenario.fault("broker_shutdown"), i)]
    assert shutdown["severity"] == "critical" and shutdown["topics_unroutable"] >= 1, shutdown
    assert {"broker_unregistered", "observed_broker_gone", "topic_unroutable"} <= set(shutdown["kinds"]), shutdown
    # and not a lost master: the shadow heard its UNREGISTER_BROKER
    assert not [i for i in incidents if i["root_cause"] == "master_lost" and i["subject"] == "scn-s"], summary
    # the report's incident table counts the topics it left unroutable
    page = (audited["faults_lake"] / "reports" / shutdown["date"].isoformat() / "index.html").read_text()
    row = next(r for r in page[page.index('id="incidents-table"') :].split("<tr>") if shutdown["incident_id"] in r)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
    assert cells[1:3] + cells[9:10] == ["broker_shutdown", "scn-s", str(shutdown["topics_unroutable"])], cells


@pytest.mark.spark
def test_the_fault_free_run_has_no_incident_above_info(audited):
    serious = [
        (i["root_cause"], i["subject"], i["servers"], i["severity"])
        for i in audited["clean"]
        if i["severity"] != "info"
    ]
    assert serious == []
    assert audited["clean"], "the fault-free day was audited and its one-broker topics are info incidents"


# ---------------------------------------------------------------------------- live, against the audit


# a live incident starts when its first finding does, as the audit's; it may be seen up to a poll
# interval and the grace from the audit's start (what the acceptance allows)
def _grace(audited) -> int:
    return live_grace_ms(audited["config"], INTERVAL_MS)


def _live_events(events: Path) -> list[dict]:
    return [e for ns in SERVERS for e in read_events(events, ns, []) if e["type"] == "live_incident"]


def _finding_key(kind, divergence, ns, subject, start_ms, end_ms) -> tuple:
    return kind, divergence, ns, subject, start_ms, end_ms


@pytest.mark.spark
def test_the_live_judgement_of_the_collected_rounds_equals_the_audits_findings(scenario, audited):
    """The same rounds fed to the live judge as the collector fed it give the audit's findings of
    every kind judged live, with the same server, subject, start and end (to the millisecond but
    for the divergences, see below)."""

    def ms(ts) -> int:
        return int(ts.timestamp() * 1000)

    nightly = {
        _finding_key(
            f["kind"],
            json.loads(f["detail"]).get("kind") if f["kind"] == "ns_divergence" else None,
            f["ns"],
            f["subject"],
            ms(f["start_ts"]),
            ms(f["end_ts"]),
        )
        # the shadow is audited, not observed: the live judge never sees its findings
        for f in audited["faults_findings"]
        if f["kind"] in LIVE_KINDS and f["ns"] in (None, *SERVERS)
    }
    replayed = replay(scenario.events, SERVERS, _grace(audited))
    live = {
        _finding_key(
            f.kind, f.detail.get("kind") if f.kind == "ns_divergence" else None, f.ns, f.subject, f.start_ms, f.end_ms
        )
        for f in replayed.findings
    }
    assert nightly, "the day has findings of the kinds judged live"
    # A divergence episode may begin or end a few milliseconds apart: the audit also compares the
    # observed servers with the shadow's stream (which the collector does not read), so while one
    # observed server is up alone its episodes run from that server's round, not from the next
    # server's. Those are matched within one poll round as the collector ran it (a round's answers
    # come in over its interval); every other finding to the millisecond.
    exact_live, exact_nightly = ({k for k in keys if k[0] != "ns_divergence"} for keys in (live, nightly))
    assert sorted(exact_live - exact_nightly, key=repr) == [] and sorted(exact_nightly - exact_live, key=repr) == [], (
        _said(sorted(exact_live - exact_nightly, key=repr), sorted(exact_nightly - exact_live, key=repr))
    )
    unmatched = sorted(k for k in nightly if k[0] == "ns_divergence")
    for key in sorted(k for k in live if k[0] == "ns_divergence"):
        near = [
            k
            for k in unmatched
            if k[:4] == key[:4]
            and abs(k[4] - key[4]) <= SEEN_WITHIN_MS
            and (k[5] is None) == (key[5] is None)
            and (k[5] is None or abs(k[5] - key[5]) <= SEEN_WITHIN_MS)
        ]
        assert near, _said(key, [k for k in unmatched if k[:4] == key[:4]], unmatched)
        unmatched.remove(near[0])
    assert unmatched == [], _said(unmatched, sorted(k for k in live if k[0] == "ns_divergence"))


@pytest.mark.spark
def test_every_incident_of_the_audit_was_seen_live_and_no_live_incident_is_unexplained(scenario, audited):
    """What the collector wrote while it ran: each incident above info of the audit has a live
    incident of its subject that began within a poll interval and the grace of it; each live
    incident is one the audit reports; the fault-free run opened none."""
    within = INTERVAL_MS + _grace(audited)
    opened = [e for e in _live_events(scenario.events) if e["incident_state"] == "open"]
    summary = [(e["root_cause"], e["subject"], e["servers"], e["ts"] - e["incident_ms"]) for e in opened]
    nightly = audited["faults"]
    for incident in (i for i in nightly if i["severity"] != "info"):
        assert any(
            e["subject"] == incident["subject"] and abs(e["ts"] - e["incident_ms"] - incident["start_ms"]) <= within
            for e in opened
        ), _said((incident["root_cause"], incident["subject"], incident["start_ms"]), summary)
    for event in opened:
        start = event["ts"] - event["incident_ms"]
        assert any(
            i["subject"] == event["subject"]
            and i["severity"] != "info"
            and i["start_ms"] - within <= start <= i["end_ms"] + within
            for i in nightly
        ), _said(event, nightly)
    # the same incident's events name the same id, opened first; the wipe was seen live as the fault
    wipe = scenario.fault("wipe")
    assert any(
        e["root_cause"] == "write_perm_wiped" and e["subject"] == wipe["subject"] and e["servers"] == wipe["ns"]
        for e in opened
    ), summary
    assert _live_events(scenario.clean_events) == []
    # the report says when each was first seen live
    incident = next(i for i in nightly if i["root_cause"] == "write_perm_wiped")
    page = (audited["faults_lake"] / "reports" / incident["date"].isoformat() / "index.html").read_text()
    row = next(r for r in page[page.index('id="incidents-table"') :].split("<tr>") if incident["incident_id"] in r)
    cells = re.findall(r"<td[^>]*>([^<]*)</td>", row)
    seen = next(e for e in opened if e["root_cause"] == "write_perm_wiped")
    assert cells[6] == dt.datetime.fromtimestamp(seen["ts"] / 1000, dt.UTC).strftime("%H:%M:%S"), cells
