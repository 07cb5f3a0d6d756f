"""Real Apache RocketMQ brokers, clients and mqadmin against ``nsaudit nameserver``, and the same
requests answered by RocketMQ's own name server beside it (docs/interop.md).

For each release (4.9 and 5.x) the tests walk one cluster through a scenario in file order:
brokers register, topics are created and changed, messages go through, write permission is wiped
and restored, a topic is deleted, KV settings come and go, a broker hangs, one is killed, one shuts
down, and finally the event log is audited and the lake's route at an instant is compared with
what the real client was given then. After each step the two name servers' answers must be equal
(``differential.py``) but for the deviations docs/nameserver-semantics.md lists.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.timeutil import utc_date
from nameserver.client import RemotingClient, simple_request
from nameserver.eventlog.segments import read_events
from tests.interop import differential
from tests.interop.conftest import CLUSTER, EXPIRY_MS, NOTES, ns_id
from tests.interop.rocketmq import RELEASES, run_async, wait_for

pytestmark = [pytest.mark.slow, pytest.mark.interop]

TOPIC = "InteropTopic"
READ_ONLY = "InteropReadOnly"  # made read-only by its only broker, b1 (updateTopic -p 4)
MESSAGES = 40
CONVERGE_S = 10.0  # a registration reaches both servers within milliseconds of each other


def events(cluster, kind: str | None = None) -> list[dict]:
    return [e for e in read_events(cluster.events, cluster.ns_id) if kind is None or e["type"] == kind]


def route_of(cluster, addr: str, topic: str) -> dict | None:
    async def ask():
        host, port = addr.rsplit(":", 1)
        client = await RemotingClient.connect(host, int(port))
        try:
            return await client.route(topic)
        finally:
            await client.close()

    return run_async(ask())


def queues(route: dict | None) -> dict[str, tuple[int, int, int]]:
    """``{broker_name: (read, write, perm)}`` of a parsed route."""
    if route is None:
        return {}
    return {q["broker_name"]: (q["read_queue_nums"], q["write_queue_nums"], q["perm"]) for q in route["queue_datas"]}


def assert_same_answers(cluster) -> None:
    """Every answer of the differential equal, frame and body, with nsaudit answering as the
    release's name server (its profile); the count of answers compared goes to the notes.

    A broker sends each registration to both servers at once, so one can answer from a newer
    registration than the other for a moment: the answers are compared again until they agree or
    ``CONVERGE_S`` passes (a real difference stays and fails)."""
    deadline = time.monotonic() + CONVERGE_S
    found, asked = differential.compared(cluster.java_addr, cluster.ns_addr)
    while found and time.monotonic() < deadline:
        time.sleep(0.5)
        found, asked = differential.compared(cluster.java_addr, cluster.ns_addr)
    assert not found, (
        f"RocketMQ's name server and nsaudit's answer differently, still after {CONVERGE_S:.0f} s:\n"
        + "\n".join(f"{key}:\n  java    {java}\n  nsaudit {ours}" for key, (java, ours) in found.items())
    )
    cluster.notes["answers_compared"] = cluster.notes.get("answers_compared", 0) + asked


def test_brokers_register_and_mqadmin_sees_them(cluster):
    listing = cluster.driver.admin("clusterList", "-n", cluster.ns_addr)
    for broker in cluster.brokers.values():
        assert broker.addr in listing and broker.name in listing
    assert "TBW102" in cluster.driver.admin("topicList", "-n", cluster.ns_addr)
    route = json.loads(
        cluster.driver.admin("topicRoute", "-t", "TBW102", "-n", cluster.ns_addr).replace("{0:", '{"0":')
    )
    assert {b["brokerName"] for b in route["brokerDatas"]} == set(cluster.brokers)
    registers = events(cluster, "register")
    assert {e["broker_addr"] for e in registers} == {b.addr for b in cluster.brokers.values()}
    assert {e["request_code"] for e in registers} == {103}
    assert_same_answers(cluster)


def test_update_topic_changes_the_route(cluster):
    out = cluster.driver.admin("updateTopic", "-t", TOPIC, "-c", CLUSTER, "-r", 4, "-w", 4, "-n", cluster.ns_addr)
    assert out.count("success") == 2, out
    wait_for(
        lambda: queues(route_of(cluster, cluster.ns_addr, TOPIC)) == {"b1": (4, 4, 6), "b2": (4, 4, 6)},
        30,
        "the new topic in nsaudit's route",
    )
    b1 = cluster.brokers["b1"]
    before = [
        e["data_version"]["counter"]
        for e in events(cluster)
        if e.get("broker_addr") == b1.addr and e["type"] in ("register", "heartbeat") and e["request_code"] == 103
    ][-1]
    cluster.driver.admin("updateTopic", "-t", TOPIC, "-b", b1.addr, "-r", 6, "-w", 6, "-p", 6, "-n", cluster.ns_addr)
    wait_for(
        lambda: queues(route_of(cluster, cluster.ns_addr, TOPIC))["b1"] == (6, 6, 6),
        30,
        "b1's new queue numbers in nsaudit's route",
    )
    after = [
        e["data_version"]["counter"]
        for e in events(cluster)
        if e.get("broker_addr") == b1.addr and e["type"] in ("register", "heartbeat") and e["request_code"] == 103
    ][-1]
    assert after > before
    wait_for(
        lambda: queues(route_of(cluster, cluster.java_addr, TOPIC)).get("b1") == (6, 6, 6),
        30,
        "the same change at RocketMQ's name server",
    )
    assert_same_answers(cluster)


def test_producer_and_consumer_lose_no_message(cluster):
    at, route = cluster.driver.route(cluster.ns_addr, TOPIC)
    cluster.notes["client_route"] = (at, route)
    sent, failed = cluster.driver.produce(cluster.ns_addr, TOPIC, MESSAGES)
    assert not failed
    assert {broker for broker, _, _ in sent} == {"b1", "b2"}
    received = cluster.driver.consume(cluster.ns_addr, TOPIC, "interop-consumer", MESSAGES)
    assert received == {body for _, _, body in sent}


def _counts(output: str, what: str) -> dict[str, int]:
    """``{name server: count}`` from mqadmin's 'wipe/add write perm of broker[b] in name server[a] OK, n'."""
    found = {}
    for line in output.splitlines():
        if line.startswith(what) and "OK, " in line:
            server = line.split("name server[", 1)[1].split("]", 1)[0]
            found[server] = int(line.rsplit("OK, ", 1)[1])
    return found


def test_wipe_and_add_write_perm(cluster):
    # b2's: b1's own incident at the end is its clean shutdown alone (test_clean_shutdown_unregisters)
    wiped = _counts(cluster.driver.admin("wipeWritePerm", "-b", "b2", "-n", cluster.both), "wipe write perm")
    assert set(wiped) == {cluster.java_addr, cluster.ns_addr} and wiped[cluster.ns_addr] == wiped[cluster.java_addr] > 0
    b2_read, b2_write, b2_perm = queues(route_of(cluster, cluster.ns_addr, TOPIC))["b2"]
    assert b2_perm & 2 == 0
    sent, failed = cluster.driver.produce(cluster.ns_addr, TOPIC, 20)
    assert not failed and {broker for broker, _, _ in sent} == {"b1"}  # the producer avoids b2
    assert [e["topic_count"] for e in events(cluster, "wipe_write_perm")] == [wiped[cluster.ns_addr]]
    cluster.notes["wiped_at"] = events(cluster, "wipe_write_perm")[0]["ts"]
    assert_same_answers(cluster)

    added = _counts(cluster.driver.admin("addWritePerm", "-b", "b2", "-n", cluster.both), "add write perm")
    assert added[cluster.ns_addr] == added[cluster.java_addr] == wiped[cluster.ns_addr]
    assert queues(route_of(cluster, cluster.ns_addr, TOPIC))["b2"][2] & 2 == 2
    assert [e["topic_count"] for e in events(cluster, "add_write_perm")] == [added[cluster.ns_addr]]
    assert_same_answers(cluster)


def test_delete_topic(cluster):
    doomed = "InteropDoomed"
    cluster.driver.admin("updateTopic", "-t", doomed, "-c", CLUSTER, "-n", cluster.ns_addr)
    for addr in (cluster.ns_addr, cluster.java_addr):
        wait_for(lambda addr=addr: route_of(cluster, addr, doomed), 30, f"{doomed} at {addr}")
    out = cluster.driver.admin("deleteTopic", "-t", doomed, "-c", CLUSTER, "-n", cluster.both)
    assert "from NameServer success" in out, out
    assert route_of(cluster, cluster.ns_addr, doomed) is None
    assert route_of(cluster, cluster.java_addr, doomed) is None
    assert [e["topic"] for e in events(cluster, "delete_topic")] == [doomed]
    assert_same_answers(cluster)


def test_a_topic_made_read_only_by_its_broker(cluster):
    """``mqadmin updateTopic -p 4`` of a topic on b1 alone: b1 registers the read-only topic with a
    new data version on both servers at once; no 205 is sent (the audit at the end tells it from
    a wipe)."""
    b1 = cluster.brokers["b1"]
    cluster.driver.admin("updateTopic", "-t", READ_ONLY, "-b", b1.addr, "-r", 4, "-w", 4, "-n", cluster.ns_addr)
    wait_for(
        lambda: queues(route_of(cluster, cluster.ns_addr, READ_ONLY)) == {"b1": (4, 4, 6)},
        30,
        f"{READ_ONLY} in nsaudit's route",
    )
    wiped = len(events(cluster, "wipe_write_perm"))
    cluster.driver.admin(
        "updateTopic", "-t", READ_ONLY, "-b", b1.addr, "-r", 4, "-w", 4, "-p", 4, "-n", cluster.ns_addr
    )
    for addr in (cluster.ns_addr, cluster.java_addr):
        wait_for(
            lambda addr=addr: queues(route_of(cluster, addr, READ_ONLY)) == {"b1": (4, 4, 4)},
            30,
            f"{READ_ONLY} read-only at {addr}",
        )
    assert len(events(cluster, "wipe_write_perm")) == wiped  # a registration, no admin request
    assert_same_answers(cluster)


def test_namesrv_config_and_kv_config(cluster):
    config = cluster.driver.admin("getNamesrvConfig", "-n", cluster.ns_addr)
    assert cluster.ns_addr in config and "scanIntervalMs" in config
    cluster.driver.admin("updateKvConfig", "-s", "INTEROP", "-k", "answer", "-v", "42", "-n", cluster.both)
    assert cluster.driver.kv_get(cluster.ns_addr, "INTEROP", "answer") == "42"
    assert cluster.driver.kv_get(cluster.java_addr, "INTEROP", "answer") == "42"
    cluster.driver.admin("deleteKvConfig", "-s", "INTEROP", "-k", "answer", "-n", cluster.both)
    assert cluster.driver.kv_get(cluster.ns_addr, "INTEROP", "answer") is None
    assert cluster.driver.kv_get(cluster.java_addr, "INTEROP", "answer") is None


async def _ask_raw(addr: str, cmd, timeout: float = 3.0):
    host, port = addr.rsplit(":", 1)
    client = await RemotingClient.connect(host, int(port))
    try:
        return await client.request(cmd, timeout=timeout)
    except TimeoutError:
        return None
    finally:
        await client.close()


def test_bad_requests_are_refused_and_logged(cluster):
    unknown = simple_request(9999)
    ours = run_async(_ask_raw(cluster.ns_addr, unknown, 20.0))
    java = run_async(_ask_raw(cluster.java_addr, unknown))
    assert ours is not None and ours.code == 3  # REQUEST_CODE_NOT_SUPPORTED
    # 4.9's name server sends no answer at all (the deviation D11 documents); 5.x answers 3
    assert (java is None) if cluster.release.name == "4.9" else (java.code == 3)

    garbage = simple_request(
        103,
        {
            "brokerName": "x",
            "brokerAddr": "127.0.0.1:1",
            "clusterName": "x",
            "haServerAddr": "127.0.0.1:2",
            "brokerId": "0",
        },
        body=b"\x00not a body",
    )
    ours = run_async(_ask_raw(cluster.ns_addr, garbage, 20.0))
    java = run_async(_ask_raw(cluster.java_addr, garbage, 20.0))
    assert ours is not None and java is not None
    assert ours.code == java.code != 0
    reasons = {(e.get("request_code"), e["reason"]) for e in events(cluster, "rejected")}
    assert (9999, "unknown_code") in reasons and (103, "bad_body") in reasons
    assert route_of(cluster, cluster.ns_addr, TOPIC) is not None  # still serving
    assert_same_answers(cluster)


def test_hung_broker_expires(cluster):
    """A broker that stops answering (SIGSTOP: its connection stays open) is removed by the expiry
    scan after broker_expiry_ms, and registers again once it runs."""
    b2 = cluster.brokers["b2"]
    b2.process.signal(19)  # SIGSTOP
    try:
        wait_for(
            lambda: "b2" not in queues(route_of(cluster, cluster.ns_addr, TOPIC)),
            EXPIRY_MS / 1000 + 15,
            "nsaudit to expire the hung broker",
        )
    finally:
        b2.process.signal(18)  # SIGCONT
    expired = [e for e in events(cluster, "expire") if e["broker_addr"] == b2.addr]
    assert len(expired) == 1
    assert expired[0]["ts"] - expired[0]["last_update_ts"] >= EXPIRY_MS
    wait_for(
        lambda: "b2" in queues(route_of(cluster, cluster.ns_addr, TOPIC)), 30, "the resumed broker to register again"
    )


def test_killed_broker_is_dropped_at_once(cluster):
    """``kill -9``: the kernel closes the broker's connections and both name servers drop it then."""
    b2 = cluster.brokers["b2"]
    b2.process.kill()
    for addr in (cluster.ns_addr, cluster.java_addr):
        wait_for(
            lambda addr=addr: "b2" not in queues(route_of(cluster, addr, TOPIC)),
            10,
            f"{addr} to drop the killed broker",
        )
    assert any(e["broker_addr"] == b2.addr for e in events(cluster, "channel_close"))
    assert_same_answers(cluster)


def test_clean_shutdown_unregisters(cluster):
    b1 = cluster.brokers["b1"]
    # SIGTERM: the broker's shutdown hook stops its store and timers (4.9 waits up to 5 s for
    # them), then unregisters from every name server; the fixture waits for the process to end
    b1.process.signal(15)
    for addr in (cluster.ns_addr, cluster.java_addr):
        wait_for(lambda addr=addr: route_of(cluster, addr, TOPIC) is None, 30, f"{addr} to drop the stopped broker")
    unregisters = [e for e in events(cluster, "unregister") if e["broker_addr"] == b1.addr]
    assert unregisters and unregisters[0]["request_code"] == 104
    assert_same_answers(cluster)


def test_the_log_records_every_request(cluster):
    assert cluster.ns.stop() == 0
    logged = events(cluster)
    codes = {e.get("request_code") for e in logged}
    assert {103, 104, 205, 216, 327, 9999} <= codes
    if cluster.release.name == "5":
        assert {322, 904} <= codes  # acting-master heartbeats
    assert logged[-1]["type"] == "ns_stop"
    cluster.notes["days"] = {utc_date(e["ts"]) for e in logged}


def test_the_logs_audit_and_answer_what_the_clients_were_given(spark, interop_events, tmp_path):
    """One audit of every release's log (the day or days it spans); then ``nsaudit route --at T``
    answers, for each release, the route its real client was given at T."""
    from common.config import Config
    from jobs import nightly_audit

    assert set(NOTES) == {ns_id(release) for release in RELEASES.values()}, "a release's scenario did not run"
    assert all({"days", "client_route"} <= set(notes) for notes in NOTES.values()), NOTES
    lake = tmp_path / "lake"
    for day in sorted(set().union(*(n["days"] for n in NOTES.values()))):
        outcome = nightly_audit.run(spark, Config(), str(interop_events), str(lake), day, lambda _: None)
        ingest = outcome.stages[0]
        assert ingest["stage"] == "ingest" and ingest["lines_read"] > 0
        assert ingest["quarantined"] == 0, ingest

    for ns, notes in NOTES.items():
        _check_read_only_and_shutdown(lake, ns, notes)

    nsaudit = str(Path(sys.executable).with_name("nsaudit"))
    for ns, notes in NOTES.items():
        at, client_route = notes["client_route"]
        answer = subprocess.run(
            [nsaudit, "route", "--lake", str(lake), "--ns", ns, "--topic", TOPIC, "--at", str(at)],
            capture_output=True,
            text=True,
            check=True,
        )
        lake_route = json.loads(answer.stdout)["route"]
        assert differential._sorted(lake_route) == differential._sorted(json.loads(json.dumps(client_route))), ns


def _check_read_only_and_shutdown(lake: Path, ns: str, notes: dict) -> None:
    """What the audit made of two steps of ``ns``'s day: ``updateTopic -p 4`` of a topic on one
    broker is a ``topic_perm_changed`` warning and no ``write_perm_wiped`` (the one wipe is b2's,
    by 205); b1's clean shutdown, which left its topics on no server, is one critical
    ``broker_shutdown`` incident that counts them as unroutable."""
    from jobs import lake as tables
    from jobs.lake.delta.arrow import read_table_arrow

    findings = [
        f for f in read_table_arrow(tables.table_path(lake, tables.FINDINGS)).to_pylist() if f["ns"] in (ns, None)
    ]
    changed = [f for f in findings if f["kind"] == "topic_perm_changed" and f["subject"] == READ_ONLY and f["ns"] == ns]
    assert [(f["severity"], json.loads(f["detail"])["perm"]) for f in changed] == [("warning", 4)], changed
    wiped = [f for f in findings if f["kind"] == "write_perm_wiped" and f["ns"] == ns]
    assert wiped and {f["subject"] for f in wiped} == {"b2"}, wiped
    assert all(int(f["start_ts"].timestamp() * 1000) == notes["wiped_at"] for f in wiped), (wiped, notes["wiped_at"])
    assert not [f for f in findings if f["kind"] == "no_writable_queue" and f["subject"] == READ_ONLY]

    # b1's topics (the others' went with b2's expiry and the delete, in their own incidents)
    ids = {
        f["finding_id"]
        for f in findings
        if f["kind"] == "topic_unroutable"
        and ns in json.loads(f["detail"])["up_servers"]
        and json.loads(f["detail"])["groups"] == ["b1"]
    }
    assert len(ids) >= 2, "b1's shutdown left its topics on no server"
    incidents = [
        i
        for i in read_table_arrow(tables.table_path(lake, tables.INCIDENTS)).to_pylist()
        if ids & set(i["finding_ids"])
    ]
    assert len(incidents) == 1, [(i["root_cause"], i["subject"], i["kinds"]) for i in incidents]
    (shutdown,) = incidents
    assert (shutdown["root_cause"], shutdown["subject"], shutdown["severity"]) == ("broker_shutdown", "b1", "critical")
    assert shutdown["topics_unroutable"] >= 2 and "broker_unregistered" in shutdown["kinds"], shutdown
