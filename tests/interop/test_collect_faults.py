"""``nsaudit collect`` against three real RocketMQ name servers while an operator's faults happen
(:mod:`tests.interop.collect_scenario`): each fault shows in the right server's stream, at the right
time, and only there; the collection of the other servers goes on while one is down; every line
written is valid.
"""

from __future__ import annotations

import json
import re

import pytest

from nameserver.eventlog.segments import list_segments
from schemas import events as schema
from tests.interop.collect_scenario import (
    DOOMED, INTERVAL_MS, KEPT, REGISTER_PERIOD_MS, SERVERS, brokers_seen, first_ts, perm_of, route_seen,
    run_scenario,
)
from tests.interop.rocketmq import RELEASES
from tests.schemas.test_event_schema import errors

pytestmark = [pytest.mark.slow, pytest.mark.interop, pytest.mark.timeout(900)]

# a change is in the stream within a round (plus the round's own spread) of happening
SEEN_WITHIN_MS = 2 * INTERVAL_MS + 1000


@pytest.fixture(scope="module", params=sorted(RELEASES))
def scenario(request, tmp_path_factory):
    return run_scenario(RELEASES[request.param], tmp_path_factory.mktemp(f"collect-faults-{request.param}"))


def _observed_broker_names(log: list[dict]) -> set[str]:
    return {e["broker_name"] for e in log if e["type"] == "observed_broker" and e["broker_addrs"] is not None}


def test_every_stream_is_whole_valid_and_closed(scenario):
    json_schema = json.loads(schema.JSON_SCHEMA_PATH.read_text(encoding="utf-8"))
    for ns in SERVERS:
        log = scenario.stream(ns)
        assert [e for e in log if errors(e, json_schema)] == [], ns
        assert [e["seq"] for e in log] == list(range(1, len(log) + 1)), ns
        assert log[0]["type"] == "observe_start" and log[0]["namesrv_addr"] == scenario.addrs[ns]
        assert log[-1]["type"] == "observe_stop" and log[-1]["reason"] == "SIGTERM"
        assert {s.state for s in list_segments(scenario.events, ns)} == {"closed"}
    assert "Traceback" not in scenario.collector_err.read_text()


def test_a_broker_without_a_server_in_its_namesrv_addr_is_never_on_that_server(scenario):
    assert "scn-b" not in _observed_broker_names(scenario.stream("nsC"))
    for ns in ("nsA", "nsB"):
        assert "scn-b" in _observed_broker_names(scenario.stream(ns)), ns


def test_a_wipe_on_one_server_shows_there_only_until_the_next_registration(scenario):
    wipe = scenario.fault("wipe")
    seen = first_ts(scenario.stream("nsA"), wipe["start_ms"], lambda log: perm_of(route_seen(log, KEPT), "scn-a") == 4)
    assert seen is not None and seen - wipe["start_ms"] <= SEEN_WITHIN_MS, (wipe, seen)
    # restored by the registration that follows the delete's new data version
    assert wipe["end_ms"] is not None and 0 < wipe["end_ms"] - seen <= 60_000 + REGISTER_PERIOD_MS, (wipe, seen)
    for ns in ("nsB", "nsC"):
        perms = {q["perm"] for e in scenario.stream(ns) if e["type"] == "observed_route" and e["queue_datas"]
                 and e["topic"] in (KEPT, DOOMED) for q in e["queue_datas"] if q["broker_name"] == "scn-a"}
        assert perms == {6}, (ns, perms)


def test_a_topic_deleted_through_one_server_is_gone_there_and_stale_on_the_others(scenario):
    delete = scenario.fault("delete_topic")
    seen = first_ts(scenario.stream("nsB"), delete["start_ms"], lambda log: route_seen(log, DOOMED) is None)
    assert seen is not None and seen - delete["start_ms"] <= SEEN_WITHIN_MS, (delete, seen)
    assert route_seen(scenario.stream("nsB"), DOOMED) is None
    # a 4.9 or 5.x name server adds a broker's topics at a new data version but never drops one: nsA
    # keeps the route all day, nsC until its restart (the brokers' registrations no longer carry it)
    assert route_seen(scenario.stream("nsA"), DOOMED)
    restart = scenario.fault("ns_restart")
    before_restart = [e for e in scenario.stream("nsC") if e["ts"] < restart["start_ms"]]
    assert route_seen(before_restart, DOOMED)
    assert not route_seen(scenario.stream("nsC"), DOOMED)


def test_a_restarted_server_is_an_error_then_a_recovered_snapshot_while_the_others_go_on(scenario):
    restart = scenario.fault("ns_restart")
    log = scenario.stream("nsC")
    error = next(e for e in log if e["type"] == "observe_error" and e["ts"] >= restart["start_ms"])
    assert error["ts"] - restart["start_ms"] <= SEEN_WITHIN_MS
    assert error["reason"] in ("connect_failed", "connection_closed", "timeout"), error
    recovered = next(e for e in log if e["type"] == "observe_snapshot" and e["ts"] > error["ts"])
    assert recovered["reason"] == "recovered" and recovered["ts"] >= restart["end_ms"]
    # the restarted server's tables come back with the brokers' registrations
    back = first_ts(log, recovered["ts"], lambda prefix: brokers_seen(prefix) == {"scn-a", "scn-k"})
    assert back is not None and back - restart["end_ms"] <= REGISTER_PERIOD_MS + SEEN_WITHIN_MS + 30_000
    assert [e for e in log if e["type"] == "observe_error"] == [error]  # one per outage
    for ns in ("nsA", "nsB"):
        assert [e for e in scenario.stream(ns) if e["type"] == "observe_error"] == [], ns
    # nsA's rounds went on, answered, while nsC failed (the progress lines, in the order printed)
    lines = scenario.collector_err.read_text().splitlines()
    failed = [i for i, line in enumerate(lines) if line.startswith("collect nsC ") and ": FAILED " in line]
    again = next(i for i, line in enumerate(lines) if line.startswith("collect nsC ") and "answering again" in line)
    assert failed and failed[0] < again
    between = [line for line in lines[failed[0]:again] if line.startswith("collect nsA ")]
    assert between and all(re.search(r"round \d+: ok, ", line) for line in between), between


def test_a_broker_killed_with_kill_9_leaves_every_server(scenario):
    kill = scenario.fault("broker_kill")
    for ns in SERVERS:
        gone = first_ts(scenario.stream(ns), kill["start_ms"], lambda log: "scn-k" not in brokers_seen(log))
        assert gone is not None and gone - kill["start_ms"] <= SEEN_WITHIN_MS, (ns, kill, gone)


def test_the_truth_file_lists_each_fault_with_its_servers_and_times(scenario):
    rows = [json.loads(line) for line in (scenario.events / "_truth" / "faults.jsonl").read_text().splitlines()]
    assert [(r["kind"], r["ns"], r["subject"]) for r in rows] == [
        ("partition", ["nsC"], "scn-b"), ("wipe", ["nsA"], "scn-a"), ("delete_topic", ["nsB"], DOOMED),
        ("ns_restart", ["nsC"], "nsC"), ("broker_kill", list(SERVERS), "scn-k")]
    assert all(r["start_ms"] <= r["end_ms"] for r in rows), rows
