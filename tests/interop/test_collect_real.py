"""``nsaudit collect`` against Apache RocketMQ's own name server with a real broker, and real
``mqadmin`` changes on that server showing up in the collector's stream (docs/collect.md).

One release's name server, one master broker and the client JVM (for ``mqadmin``) are started for
the test; the collector runs as the command a user starts, with ``--metrics-listen``, stopped with
SIGTERM. A real Prometheus scrapes it with the shipped alert rules (their ``for:`` templated for
the test's one-second rounds): ``mqadmin wipeWritePerm`` makes ``NsauditWritePermWiped`` fire within
the rule's ``for:`` plus two scrape intervals of the round that saw it, and ``addWritePerm``
resolves it.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from nameserver.client import RemotingClient
from nameserver.eventlog.segments import list_segments, read_events
from schemas import events as schema
from tests.interop.rocketmq import RELEASES, REPO, Driver, run_async, start_broker, start_java_namesrv, wait_for
from tests.prometheus import Prometheus, rules_with_for
from tests.schemas.test_event_schema import errors

pytestmark = [pytest.mark.slow, pytest.mark.interop]

CLUSTER = "collect"
KEPT, DOOMED = "CollectKept", "CollectDoomed"
INTERVAL_S = 1.0  # the collector's rounds, and Prometheus's scrapes and rule evaluations
FOR_S = 2.0  # every rule's for: in the test (the shipped file's, templated)
POLL_SLACK_S = 1.0  # how late the test may notice a change of /api/v1/alerts (it asks every 0.1 s; Prometheus,
# the collector and the name server share the two cores with the other test worker)


def _wiped_alerts(prom: Prometheus) -> list[dict]:
    return [
        a
        for a in prom.alerts()
        if a["labels"].get("alertname") == "NsauditWritePermWiped" and a["labels"].get("subject") == "b1"
    ]


def _registered(addr: str, name: str) -> bool:
    async def ask() -> bool:
        host, port = addr.rsplit(":", 1)
        client = await RemotingClient.connect(host, int(port))
        try:
            return name in (await client.cluster_info())["broker_addr_table"]
        finally:
            await client.close()

    return run_async(ask())


def _stream(events: Path, ns: str) -> list[dict]:
    problems: list = []
    found = list(read_events(events, ns, problems))
    assert problems == []
    return found


def _routes(log: list[dict], topic: str) -> list[dict]:
    return [e for e in log if e["type"] == "observed_route" and e["topic"] == topic]


@pytest.mark.parametrize("release_name", sorted(RELEASES))
def test_collect_sees_a_real_broker_and_mqadmin_changes_on_a_real_name_server(tmp_path, release_name):
    release = RELEASES[release_name]
    release.check()
    processes, driver, collector = [], None, None
    try:
        namesrv, addr = start_java_namesrv(release, tmp_path)
        processes.append(namesrv)
        namesrv.wait_ready()
        broker = start_broker(release, tmp_path, "b1", CLUSTER, addr)
        processes.append(broker.process)
        driver = Driver(release, tmp_path).start()
        broker.process.wait_ready()
        wait_for(lambda: _registered(addr, "b1"), 30, f"b1 registered with {addr}")
        for topic in (KEPT, DOOMED):
            driver.admin("updateTopic", "-t", topic, "-c", CLUSTER, "-r", 4, "-w", 4, "-n", addr)

        events = tmp_path / "observed"
        ns = "obs-127.0.0.1-" + addr.rsplit(":", 1)[1]
        env = {**os.environ, "PYTHONPATH": str(REPO)}
        stderr = open(tmp_path / "collect.err", "w")
        collector = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nsaudit.cli",
                "collect",
                "--namesrv",
                addr,
                "--events",
                str(events),
                "--interval-ms",
                str(int(INTERVAL_S * 1000)),
                "--metrics-listen",
                "127.0.0.1:0",
            ],
            cwd=REPO,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=stderr,
        )
        metrics = wait_for(
            lambda: re.search(r"metrics on http://(\S+)/metrics", (tmp_path / "collect.err").read_text()),
            20,
            "the collector's metrics address",
        )[1]
        prom = Prometheus(tmp_path / "prometheus", [metrics], INTERVAL_S, rules_with_for(FOR_S)).__enter__()
        processes.append(prom)

        def routed(topic: str, perm: int | None):
            routes = _routes(_stream(events, ns), topic)
            if not routes:
                return None
            last = routes[-1]["queue_datas"]
            return (last is None) if perm is None else (last is not None and last[0]["perm"] == perm)

        wait_for(lambda: routed(KEPT, 6) and routed(DOOMED, 6), 30, "both topics routed in the collector's stream")
        snapshot = _stream(events, ns)
        head = next(e for e in snapshot if e["type"] == "observe_snapshot")
        assert head["reason"] == "start" and head["namesrv_addr"] == addr
        brokers = [e for e in snapshot if e["type"] == "observed_broker" and e["broker_name"] == "b1"]
        assert brokers[0]["cluster"] == CLUSTER
        assert brokers[0]["broker_addrs"] == [{"broker_id": 0, "broker_addr": broker.addr}]
        kept = _routes(snapshot, KEPT)[-1]
        assert kept["queue_datas"] == [
            {"broker_name": "b1", "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6, "topic_sys_flag": 0}
        ]
        assert kept["broker_datas"][0]["broker_addrs"] == [{"broker_id": 0, "broker_addr": broker.addr}]

        prom.wait(lambda: prom.query("nsaudit_observed_up == 1"), 20, "the collector scraped")
        assert _wiped_alerts(prom) == []
        out = driver.admin("wipeWritePerm", "-b", "b1", "-n", addr)
        assert "wipe write perm of broker[b1] in name server[" in out, out
        wait_for(lambda: routed(KEPT, 4), 20, "the wiped write perm in the collector's stream")
        # the live incident opened in the round that saw it; the alert fires for: later, give or take
        # a scrape and an evaluation
        seen_s = (
            next(
                e["ts"]
                for e in _stream(events, ns)
                if e["type"] == "observed_route"
                and e["topic"] == KEPT
                and e["queue_datas"]
                and e["queue_datas"][0]["perm"] == 4
            )
            / 1000
        )
        # one server observed: its round that saw the wipe judged it (no other server to wait for)
        wait_for(lambda: any(e["type"] == "live_incident" for e in _stream(events, ns)), 10, "the live incident")
        live = next(e for e in _stream(events, ns) if e["type"] == "live_incident")
        assert (live["incident_state"], live["root_cause"], live["subject"]) == ("open", "write_perm_wiped", "b1")
        firing = prom.wait(
            lambda: [a for a in _wiped_alerts(prom) if a["state"] == "firing"],
            FOR_S + 10,
            "NsauditWritePermWiped firing",
            every=0.1,
        )
        assert time.time() - seen_s <= FOR_S + 2 * INTERVAL_S + POLL_SLACK_S, (time.time() - seen_s, firing)
        assert firing[0]["labels"]["severity"] == "critical"
        out = driver.admin("addWritePerm", "-b", "b1", "-n", addr)
        assert "add write perm of broker[b1] in name server[" in out, out
        wait_for(lambda: routed(KEPT, 6), 20, "the write perm back in the collector's stream")
        restored_s = time.time()
        prom.wait(lambda: _wiped_alerts(prom) == [], 2 * INTERVAL_S + 10, "NsauditWritePermWiped resolved", every=0.1)
        assert time.time() - restored_s <= 2 * INTERVAL_S + POLL_SLACK_S
        closed = [
            e for e in _stream(events, ns) if e["type"] == "live_incident" and e["incident_id"] == live["incident_id"]
        ]
        assert [e["incident_state"] for e in closed] == ["open", "close"]
        out = driver.admin("deleteTopic", "-t", DOOMED, "-c", CLUSTER, "-n", addr)
        assert "from NameServer success" in out, out
        wait_for(lambda: routed(DOOMED, None), 20, "the deleted topic's null route in the collector's stream")

        collector.send_signal(signal.SIGTERM)
        assert collector.wait(30) == 0
        log = _stream(events, ns)
        json_schema = json.loads(schema.JSON_SCHEMA_PATH.read_text(encoding="utf-8"))
        assert all(errors(e, json_schema) == [] for e in log)
        assert [s.state for s in list_segments(events, ns)] == ["closed"]
        assert log[-1]["type"] == "observe_stop" and log[-1]["reason"] == "SIGTERM"
        # one start snapshot, then changes only: the wipe and the deletion are each logged once
        assert [e["reason"] for e in log if e["type"] == "observe_snapshot"] == ["start"]
        assert [e for e in log if e["type"] == "observe_error"] == []
        changes = [e for e in log if e["type"] == "observed_route" and e["round"] > head["round"]]
        seen = [
            (e["topic"], e["queue_datas"] and e["queue_datas"][0]["perm"])
            for e in changes
            if e["topic"] in (KEPT, DOOMED)
        ]
        assert sorted(seen[:2], key=repr) == sorted([(DOOMED, 4), (KEPT, 4)], key=repr)  # the wipe
        assert sorted(seen[2:4], key=repr) == sorted([(DOOMED, 6), (KEPT, 6)], key=repr)  # the add
        assert seen[4:] == [(DOOMED, None)]  # then the deletion
        lines = (tmp_path / "collect.err").read_text()
        assert "Traceback" not in lines and " ok, " in lines and "stopped (SIGTERM)" in lines
    finally:
        if collector is not None and collector.poll() is None:
            collector.kill()
        if driver is not None:
            driver.stop()
        for process in reversed(processes):
            process.stop()
