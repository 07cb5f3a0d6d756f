"""Three real name servers, a live fleet with faults, and each server's answers vs its own log.

The pure ``RouteReplayer`` fed a server's event log must reproduce exactly what that server
answers to GET_ROUTEINFO_BY_TOPIC (every topic) and GET_BROKER_CLUSTER_INFO, byte for byte
(docs/nameserver-semantics.md A7 and §6).
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
from pathlib import Path

import pytest

from common.errors import UserError
from nameserver.client import RemotingClient, simple_request
from nameserver.codec import RequestCode, ResponseCode, fastjson
from nameserver.eventlog.writer import list_segments, read_events
from nameserver.fleet.live import FAULTS, Fleet, FleetOptions, parse_faults
from nameserver.routes.replay import RouteReplayer
from tests.nameserver.scenario import replay
from tests.nameserver.server.test_server import arun, start_server, stop_server

EXPIRY_MS = 3000
CONFIG = f"""
[nameserver]
broker_expiry_ms = {EXPIRY_MS}
scan_interval_ms = 1000
first_scan_delay_ms = 1000
"""


def replayed(events_dir: Path, ns_id: str) -> tuple[RouteReplayer, int]:
    """The server's tables rebuilt from its log, and the last seq applied."""
    events = list(read_events(events_dir, ns_id))
    return replay(events, RouteReplayer(EXPIRY_MS)), events[-1]["seq"]


async def live_matches_log(client: RemotingClient, events_dir: Path, ns_id: str, topics: set[str]) -> int:
    """Compare one server's live answers with its replayed log; retry while events interleave.

    A quiet window is one where the log's last seq is the same before and after the queries:
    every table change appends its event in the same critical section (A7), so the answers
    were computed on exactly the replayed state.

    Returns:
        The number of topics compared.
    """
    for _ in range(100):
        _, before = replayed(events_dir, ns_id)
        listed = await client.request(simple_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
        names = sorted(topics | set(fastjson.parse_topic_list(listed.body)["topic_list"]))
        routes = {t: await client.get_route_info(t) for t in names}
        cluster = await client.get_broker_cluster_info()
        replay, after = replayed(events_dir, ns_id)
        if before != after:
            await asyncio.sleep(0.02)
            continue
        tables = replay.routes
        assert listed.body == fastjson.encode_topic_list(tables.get_all_topic_list()), ns_id
        assert cluster.body == fastjson.encode_cluster_info(tables.get_all_cluster_info()), ns_id
        for topic, answer in routes.items():
            route = tables.pickup_topic_route_data(topic)
            if route is None:
                assert answer.code == ResponseCode.TOPIC_NOT_EXIST, (ns_id, topic, answer)
            else:
                assert answer.code == ResponseCode.SUCCESS, (ns_id, topic, answer)
                assert answer.body == fastjson.encode_route(route, standard=True), (ns_id, topic)
        return len(routes)
    raise AssertionError(f"{ns_id}: no quiet moment to compare in 100 tries")


@pytest.mark.slow
def test_three_servers_fleet_with_faults_match_their_logs(tmp_path):
    config = tmp_path / "short.toml"
    config.write_text(CONFIG)
    events_dir = tmp_path / "events"
    ids = ["ns-a", "ns-b", "ns-c"]
    servers = [start_server(events_dir, ns_id, config=config) for ns_id in ids]
    lines: list[str] = []

    class Out:
        def write(self, text: str) -> None:
            lines.extend(t for t in text.splitlines() if t)

        def flush(self) -> None:
            pass

    async def scenario():
        options = FleetOptions(
            servers=tuple((h, p) for _, h, p in servers),
            brokers=12,
            slaves=1,
            topics=20,
            duration_s=6.0,
            period_ms=1000,
            faults=FAULTS,
            seed=3,
        )
        fleet = Fleet(options, out=Out())
        await fleet.start()
        await fleet.run()
        clients = [await RemotingClient.connect(h, p) for _, h, p in servers]
        topics = {t for g in fleet.groups for t in g.topics} | {f"topic-{i:04d}" for i in range(25)}
        compared = [await live_matches_log(c, events_dir, ns_id, topics) for c, ns_id in zip(clients, ids, strict=True)]
        assert min(compared) >= 20
        await fleet.stop()
        for client, ns_id in zip(clients, ids, strict=True):  # after every clean unregister too
            await live_matches_log(client, events_dir, ns_id, topics)
            await client.close()

    try:
        arun(scenario(), timeout=90)
    finally:
        codes = [stop_server(proc) for proc, _, _ in servers]
    assert codes == [0, 0, 0]
    faults = [line.split(":")[0] for line in lines if line.startswith("fault ")]
    assert faults == [f"fault {kind}" for kind in FAULTS]
    assert not any("skipped: no eligible" in line for line in lines)
    all_types = set()
    for ns_id in ids:
        events = list(read_events(events_dir, ns_id))
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert events[0]["type"] == "ns_start" and events[-1]["type"] == "ns_stop"
        assert all(s.state == "closed" for s in list_segments(events_dir, ns_id))
        all_types |= {e["type"] for e in events}
        compressed = [e for e in events if e["type"] == "register" and e["request_version"] == 479]
        assert compressed  # the 5.x brokers got through
    # the faults left their marks: silent death and partition expire, wipe and delete were applied
    assert {"expire", "unregister", "channel_close", "wipe_write_perm", "delete_topic"} <= all_types


def test_fleet_cli_runs_and_announces_faults(tmp_path):
    proc, host, port = start_server(tmp_path, "ns-f")
    try:
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "nsaudit.cli",
                "fleet",
                "--ns",
                f"{host}:{port}",
                "--brokers",
                "4",
                "--topics",
                "6",
                "--duration",
                "1.5",
                "--period-ms",
                "500",
                "--faults",
                "topic_change,wipe,ns_restart",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
    finally:
        assert stop_server(proc) == 0
    assert result.returncode == 0, result.stderr
    out = result.stdout.splitlines()
    assert out[0].startswith("fleet: 4 brokers in 2 groups registered with 1 name servers")
    assert [line.split(":")[0] for line in out if line.startswith("fault ")][:3] == [
        "fault topic_change",
        "fault wipe",
        "fault ns_restart",
    ]
    assert out[-1].startswith("fleet: stopped; 3 faults injected, 0 failed requests")
    events = list(read_events(tmp_path, "ns-f"))
    unregistered = {e["broker_addr"] for e in events if e["type"] == "unregister"}
    assert len(unregistered) == 4  # every broker left cleanly
    assert any(e["type"] == "wipe_write_perm" for e in events)


def test_parse_faults():
    assert parse_faults("all") == FAULTS
    assert parse_faults("none") == ()
    assert parse_faults("wipe, expire,wipe") == ("wipe", "expire")
    with pytest.raises(UserError, match="unknown fault 'bogus'"):
        parse_faults("expire,bogus")


def test_fleet_cli_bad_arguments(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "nsaudit.cli", "fleet", "--ns", "nohost", "--duration", "1"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2 and "not HOST:PORT" in result.stderr and "Traceback" not in result.stderr


def test_layout_faults_shape_the_fleet_and_are_announced_with_their_subjects():
    from nameserver.layout import build_layout, layout_anomalies

    lines: list[str] = []

    class Out:
        def write(self, text: str) -> None:
            lines.extend(t for t in text.splitlines() if t)

        def flush(self) -> None:
            pass

    servers = (("127.0.0.1", 1),)  # never contacted: layout faults need no server
    fleet = Fleet(FleetOptions(servers=servers, brokers=12, topics=60, faults=parse_faults("all"), seed=3), out=Out())
    layout = build_layout(12, 1, 60, 3)  # every layout fault, as the simulator builds it
    assert [(g.broker_name, g.topics) for g in fleet.groups] == [
        (g.broker_name, {t.topic: t for t in g.topics}) for g in layout.groups
    ]
    for kind in ("read_lt_write", "queue_skew"):
        arun(fleet.inject(kind), timeout=5)
    subjects = {
        kind: [a.subject for a in layout_anomalies(layout) if a.kind == kind]
        for kind in ("read_lt_write", "queue_skew")
    }
    assert subjects["read_lt_write"] and subjects["queue_skew"] == ["cluster-0", "cluster-1"]
    rlw, skew = lines
    assert rlw.startswith("fault read_lt_write: in the layout: ")
    assert skew.startswith("fault queue_skew: in the layout: ")
    assert all(topic in rlw for topic in subjects["read_lt_write"])
    assert all(f"{cluster} (" in skew for cluster in subjects["queue_skew"])

    balanced = Fleet(
        FleetOptions(servers=servers, brokers=12, topics=60, faults=parse_faults("expire,wipe"), seed=3), out=Out()
    )
    assert balanced.anomalies == ()
    assert all(t.read_queue_nums == t.write_queue_nums for g in balanced.groups for t in g.topics.values())
