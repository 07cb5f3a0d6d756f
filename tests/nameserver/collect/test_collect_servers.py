"""``nsaudit collect`` against real ``nsaudit nameserver`` instances on 127.0.0.1 (port 0) and against
servers that misbehave: what it logs, what it asks, how it copes.

Servers run in the test's event loop; a :class:`CodeCounter` records every request code a server
received, with the lookup fast path off so that none is answered unseen.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from common.config import CollectConfig, EventLogConfig, NameServerConfig
from nameserver.client import RemotingClient, simple_request
from nameserver.codec import FrameDecoder, RequestCode, ResponseCode, encode_frame, make_response
from nameserver.collect.collector import GC_THRESHOLDS, Collector
from nameserver.collect.poller import backoff_ms
from nameserver.collect.rounds import READ_ONLY_CODES, ask
from nameserver.collect.targets import Target
from nameserver.eventlog.writer import list_segments, read_events
from nameserver.model import DataVersion, TopicConfig
from nameserver.server.controller import NameServerController
from schemas import events as schema
from tests.schemas.test_event_schema import errors

ROOT = Path(__file__).resolve().parents[3]
A, B = "10.0.0.1:10911", "10.0.0.2:10911"
FAST = CollectConfig(interval_ms=150, concurrency=4, timeout_ms=400, backoff_initial_ms=100, backoff_max_ms=400)
JSON_SCHEMA = json.loads(schema.JSON_SCHEMA_PATH.read_text(encoding="utf-8"))


def arun(coro, timeout: float = 60):
    return asyncio.run(asyncio.wait_for(coro, timeout))


class CodeCounter:
    """Counts the request codes a controller handles (lookup fast path off)."""

    def __init__(self, controller: NameServerController) -> None:
        self.codes: Counter = Counter()
        handle = controller.handle_command
        controller.known_lookups = lambda: None  # type: ignore[method-assign]

        def counted(channel, cmd, *args, **kwargs):
            self.codes[cmd.code] += 1
            return handle(channel, cmd, *args, **kwargs)

        controller.handle_command = counted  # type: ignore[method-assign]


@contextlib.asynccontextmanager
async def name_server(events_dir: Path, ns_id: str, port: int = 0):
    controller = NameServerController(
        ns_id, events_dir, NameServerConfig(listen=f"127.0.0.1:{port}"), EventLogConfig(durability="none")
    )
    await controller.start()
    counter = CodeCounter(controller)
    try:
        yield controller, counter
    finally:
        await controller.shutdown("test end")


async def register(controller, addr: str, name: str, topics) -> RemotingClient:
    client = await RemotingClient.connect(controller.host, controller.port)
    answer = await client.register_broker(
        "C1", addr, name, 0, addr.replace("10911", "10912"), DataVersion(1, 1), topics
    )
    assert answer.code == ResponseCode.SUCCESS
    return client


class Lines(list):
    """The collector's progress lines."""

    def of(self, ns: str) -> list[str]:
        return [line for line in self if line.startswith(f"collect {ns} ")]


def stream(events_dir: Path, ns: str) -> list[dict]:
    problems: list = []
    events = list(read_events(events_dir, ns, problems))
    assert problems == []
    for event in events:
        assert errors(event, JSON_SCHEMA) == [], event
    return events


async def wait_for(predicate, what: str, timeout: float = 10):
    """Poll ``predicate`` until it holds; fail naming ``what`` was awaited after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        await asyncio.sleep(0.02)


def target(controller, ns: str) -> Target:
    return Target(ns, controller.host, controller.port)


def test_three_servers_each_on_its_own_connection_changes_show_and_only_read_requests_are_sent(tmp_path):
    events = tmp_path / "obs"

    async def body():
        async with (
            name_server(tmp_path / "ns", "ns-1") as (s1, c1),
            name_server(tmp_path / "ns", "ns-2") as (s2, c2),
            name_server(tmp_path / "ns", "ns-3") as (s3, c3),
        ):
            topics = [TopicConfig("TopicA", 8, 8), TopicConfig("TopicB", 4, 4)]
            brokers = [await register(s, A, "broker-a", topics) for s in (s1, s2)]  # s3 lacks the broker
            lines = Lines()
            collector = Collector(
                [target(s1, "o1"), target(s2, "o2"), target(s3, "o3")],
                events,
                FAST,
                EventLogConfig(durability="none"),
                lines.append,
            )
            collector.start()
            run = asyncio.ensure_future(collector.run())
            await wait_for(
                lambda: all(len(lines.of(ns)) >= 2 for ns in ("o1", "o2", "o3")), "two rounds of each server"
            )
            # an admin wipes broker-a's write perm on s1 and deletes TopicB on s2, as mqadmin would
            admin1 = await RemotingClient.connect(s1.host, s1.port)
            assert (await admin1.wipe_write_perm("broker-a")).code == ResponseCode.SUCCESS
            admin2 = await RemotingClient.connect(s2.host, s2.port)
            assert (await admin2.delete_topic("TopicB")).code == ResponseCode.SUCCESS
            seen = len(lines.of("o1")), len(lines.of("o2"))
            await wait_for(
                lambda: len(lines.of("o1")) >= seen[0] + 2 and len(lines.of("o2")) >= seen[1] + 2,
                "two rounds of o1 and o2 after the changes",
            )
            collector.request_stop("SIGTERM")
            await run
            for client in brokers + [admin1, admin2]:
                await client.close()
            return (c1, c2, c3), lines, collector

    counters, lines, collector = arun(body())
    assert collector.failure is None
    o1, o2, o3 = (stream(events, ns) for ns in ("o1", "o2", "o3"))
    for log in (o1, o2, o3):
        assert log[0]["type"] == "observe_start" and log[-1] == {**log[-1], "type": "observe_stop", "reason": "SIGTERM"}
        assert log[1]["type"] == "observe_snapshot" and log[1]["reason"] == "start"
        assert not [e for e in log if e["type"] == "observe_error"]
    assert [seg.state for ns in ("o1", "o2", "o3") for seg in list_segments(events, ns)] == ["closed"] * 3
    # the snapshot: broker-a with TopicA/TopicB on s1 and s2, nothing on s3
    snap1 = [e for e in o1[2:] if e.get("round") == 1]
    assert {e["broker_name"] for e in snap1 if e["type"] == "observed_broker"} == {"broker-a"}
    assert {e["topic"] for e in snap1 if e["type"] == "observed_route"} == {"TopicA", "TopicB"}
    assert o3[1]["brokers_observed"] == 0 and o3[1]["topics_observed"] == 0
    # the changes, each on its own server's stream only
    wiped = [e for e in o1 if e["type"] == "observed_route" and e["round"] > 1]
    assert {e["topic"]: e["queue_datas"][0]["perm"] for e in wiped} == {"TopicA": 4, "TopicB": 4}
    deleted = [e for e in o2 if e["type"] == "observed_route" and e["round"] > 1]
    assert [(e["topic"], e["queue_datas"]) for e in deleted] == [("TopicB", None)]
    assert [e for e in o3 if e["type"].startswith("observed_")] == []
    # read-only: 106, 206 and 105 only, never 322; every server was asked
    for counter in counters:
        assert set(counter.codes) - {103, 205, 216} <= set(READ_ONLY_CODES), counter.codes
        assert counter.codes[RequestCode.QUERY_DATA_VERSION] == 0
        assert counter.codes[RequestCode.GET_BROKER_CLUSTER_INFO] >= 3
    assert counters[0].codes[RequestCode.GET_ROUTEINFO_BY_TOPIC] >= 6  # two topics per round
    assert all(" ok, " in line for line in lines if line.startswith("collect o"))


def test_the_collector_refuses_to_send_anything_but_its_three_read_requests(tmp_path):
    async def body():
        async with name_server(tmp_path, "ns-1") as (server, counter):
            client = await RemotingClient.connect(server.host, server.port)
            with pytest.raises(ValueError, match="never sends request code 322"):
                await ask(client, simple_request(RequestCode.QUERY_DATA_VERSION, {"brokerName": "b"}), 1)
            await client.close()
            return counter

    assert arun(body()).codes[RequestCode.QUERY_DATA_VERSION] == 0


async def _garbage(reader, writer):
    await reader.read(1 << 16)
    writer.write(b"\x00\x00\x00\x02\x00\x00HTTP/1.1 400 Bad Request\r\n\r\n")  # length 2: not a frame
    await writer.drain()
    await asyncio.sleep(5)
    writer.close()


async def _closes(reader, writer):
    writer.close()


async def _hangs(reader, writer):
    with contextlib.suppress(Exception):
        while await reader.read(1 << 16):
            pass  # reads every request and never answers
    writer.close()


def test_garbage_closed_and_hung_servers_get_a_clear_line_backoff_and_the_good_server_goes_on(tmp_path):
    events = tmp_path / "obs"

    async def body():
        bad = {
            name: await asyncio.start_server(handler, "127.0.0.1", 0)
            for name, handler in (("garbage", _garbage), ("closes", _closes), ("hangs", _hangs))
        }
        async with name_server(tmp_path / "ns", "ns-1") as (good, counter):
            broker = await register(good, A, "broker-a", [TopicConfig("TopicA", 8, 8)])
            targets = [target(good, "good")] + [
                Target(name, "127.0.0.1", srv.sockets[0].getsockname()[1]) for name, srv in bad.items()
            ]
            lines = Lines()
            collector = Collector(targets, events, FAST, EventLogConfig(durability="none"), lines.append)
            collector.start()
            run = asyncio.ensure_future(collector.run())
            # three timeouts of the hung server (with its backoffs, 1.5 s at least): how many rounds
            # the good server had meanwhile shows whether the hung one held it up
            await wait_for(lambda: len(lines.of("hangs")) >= 3, "three failed rounds of the hung server")
            good_meanwhile = sum(" ok, " in line for line in lines.of("good"))
            await wait_for(
                lambda: (
                    all(len(lines.of(ns)) >= 4 for ns in bad) and sum(" ok, " in line for line in lines.of("good")) >= 8
                ),
                "four failed rounds of each bad server and eight rounds of the good one",
            )
            # the good server goes away and comes back on its port: an error, then a full snapshot
            port, n = good.port, len(lines.of("good"))
            await good.shutdown("restart")
            await wait_for(
                lambda: any("FAILED" in line for line in lines.of("good")[n:]),
                "a failed round of the stopped good server",
            )
            async with name_server(tmp_path / "ns", "ns-1", port) as (again, _):
                broker2 = await register(again, A, "broker-a", [TopicConfig("TopicA", 8, 8)])
                n = len(lines.of("good"))
                await wait_for(
                    lambda: any(" ok, " in line for line in lines.of("good")[n:]),
                    "a round of the restarted good server",
                )
                collector.request_stop("SIGTERM")
                await run
                await broker2.close()
            await broker.close()
        for srv in bad.values():
            srv.close()
        return lines, counter, good_meanwhile

    lines, counter, good_meanwhile = arun(body())
    # each bad server: one observe_error with a reason that says what went wrong, nothing observed
    reasons = {"garbage": "bad_answer", "closes": "connection_closed", "hangs": "timeout"}
    for ns, reason in reasons.items():
        log = stream(events, ns)
        assert [e["type"] for e in log] == ["observe_start", "observe_error", "observe_stop"], (ns, log)
        assert log[1]["reason"] == reason and log[1]["detail"]
        failed = lines.of(ns)
        assert all(f"FAILED {reason}:" in line for line in failed[:3]), failed
        # exponential backoff, capped
        assert [line.rsplit("retry in ", 1)[1] for line in failed[:4]] == ["0.1 s", "0.2 s", "0.4 s", "0.4 s"]
    # the good server: polled on its own interval despite the hung one, whose three timeouts
    # (0.4 s each, with 0.1 and 0.2 s of backoff) would have allowed it three rounds had it waited
    assert good_meanwhile >= 5, f"{good_meanwhile} rounds of the good server during the hung one's three"
    log = stream(events, "good")
    kinds = [(e["type"], e.get("reason")) for e in log if e["type"] in ("observe_snapshot", "observe_error")]
    assert kinds[0] == ("observe_snapshot", "start")
    assert kinds[1][0] == "observe_error" and kinds[1][1] in ("connection_closed", "connect_failed")
    assert kinds[2] == ("observe_snapshot", "recovered")
    assert counter.codes[RequestCode.QUERY_DATA_VERSION] == 0


def test_backoff_doubles_from_the_initial_wait_up_to_the_cap():
    config = CollectConfig(backoff_initial_ms=1000, backoff_max_ms=60_000)
    assert [backoff_ms(n, config) for n in (1, 2, 3, 6, 7, 100)] == [1000, 2000, 4000, 32_000, 60_000, 60_000]


def _nsaudit(*args: str, **kwargs) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.Popen(
        [sys.executable, "-m", "nsaudit.cli", *args],
        cwd=ROOT,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kwargs,
    )


def test_nsaudit_collect_runs_until_sigterm_then_closes_every_stream_and_exits_0(tmp_path):
    server = _nsaudit("nameserver", "--ns-id", "ns-a", "--listen", "127.0.0.1:0", "--events", str(tmp_path / "ns"))
    try:
        ready = server.stdout.readline()
        address = ready.rsplit(" ", 1)[1].strip()
        collect = _nsaudit(
            "collect", "--namesrv", f"{address};127.0.0.1:1", "--events", str(tmp_path / "obs"), "--interval-ms", "200"
        )
        try:
            first = collect.stderr.readline()
            assert first.startswith("collect: observing ") and f"{address} as obs-127.0.0.1-" in first
            seen = [collect.stderr.readline() for _ in range(4)]
            collect.send_signal(signal.SIGTERM)
            rest = collect.stderr.read()
            assert collect.wait(30) == 0, rest
        finally:
            collect.kill()
    finally:
        server.send_signal(signal.SIGTERM)
        server.wait(30)
    assert any(" ok, 0 brokers, 0 topics" in line for line in seen), seen
    assert any("FAILED connect_failed" in line for line in seen), seen
    assert "Traceback" not in rest and "stopped (SIGTERM)" in rest
    port = address.rsplit(":", 1)[1]
    for ns in (f"obs-127.0.0.1-{port}", "obs-127.0.0.1-1"):
        assert [s.state for s in list_segments(tmp_path / "obs", ns)] == ["closed"]
        log = stream(tmp_path / "obs", ns)
        assert log[-1]["type"] == "observe_stop" and log[-1]["reason"] == "SIGTERM"


async def _system_error(reader, writer):
    decoder = FrameDecoder()
    while data := await reader.read(1 << 16):
        decoder.feed(data)
        for cmd in decoder:
            writer.write(encode_frame(make_response(cmd, ResponseCode.SYSTEM_ERROR, remark="store is busy")))
    writer.close()


def test_an_error_answer_fails_the_round_with_the_code_and_remark(tmp_path):
    events = tmp_path / "obs"

    async def body():
        server = await asyncio.start_server(_system_error, "127.0.0.1", 0)
        lines = Lines()
        collector = Collector(
            [Target("err", "127.0.0.1", server.sockets[0].getsockname()[1])],
            events,
            FAST,
            EventLogConfig(durability="none"),
            lines.append,
        )
        collector.start()
        await collector.run(max_rounds=2)
        server.close()
        return lines

    lines = arun(body())
    log = stream(events, "err")
    assert [e["type"] for e in log] == ["observe_start", "observe_error", "observe_stop"]
    assert log[1]["reason"] == "error_answer"
    assert log[1]["detail"] == "GET_BROKER_CLUSTER_INFO answered code 1 store is busy"
    assert log[-1]["reason"] == "2 rounds done"
    assert len(lines) == 2 and all(
        "FAILED error_answer: GET_BROKER_CLUSTER_INFO answered code 1" in line for line in lines
    )


def test_while_it_runs_young_objects_are_collected_less_often_and_the_thresholds_come_back(tmp_path):
    before = gc.get_threshold()
    during: list[tuple[int, ...]] = []

    async def body():
        server = await asyncio.start_server(_system_error, "127.0.0.1", 0)
        collector = Collector(
            [Target("err", "127.0.0.1", server.sockets[0].getsockname()[1])],
            tmp_path / "obs",
            FAST,
            EventLogConfig(durability="none"),
            lambda line: during.append(gc.get_threshold()),
        )
        collector.start()
        await collector.run(max_rounds=1)
        server.close()

    arun(body())
    assert during == [GC_THRESHOLDS] and GC_THRESHOLDS != before
    assert gc.get_threshold() == before


def test_a_stop_during_a_hung_round_ends_at_once_without_an_error_event(tmp_path):
    events = tmp_path / "obs"
    patient = CollectConfig(interval_ms=1000, timeout_ms=30_000)

    asked: list[bytes] = []

    async def hangs(reader, writer):
        with contextlib.suppress(Exception):
            while data := await reader.read(1 << 16):
                asked.append(data)  # never answered
        writer.close()

    async def body():
        server = await asyncio.start_server(hangs, "127.0.0.1", 0)
        collector = Collector(
            [Target("hung", "127.0.0.1", server.sockets[0].getsockname()[1])],
            events,
            patient,
            EventLogConfig(durability="none"),
            lambda line: None,
        )
        collector.start()
        run = asyncio.ensure_future(collector.run())
        await wait_for(lambda: asked, "the round's first request at the hung server")
        stopping = time.monotonic()
        collector.request_stop("SIGTERM")
        await run
        server.close()
        return time.monotonic() - stopping

    took = arun(body())
    assert took < 10, f"the stop took {took:.1f} s: it waited for the round (its answer timeout is 30 s)"
    assert [e["type"] for e in stream(events, "hung")] == ["observe_start", "observe_stop"]
    assert [s.state for s in list_segments(events, "hung")] == ["closed"]


def test_a_route_answer_the_same_as_before_is_the_same_entry_and_a_changed_one_is_parsed_anew(tmp_path):
    """observe_round's ``known``: the bytes the server answered decide, so nothing a change shows is
    missed and an unchanged answer makes no new objects."""
    from nameserver.collect.rounds import connect, observe_round

    async def scenario():
        async with name_server(tmp_path / "ns", "ns-a") as (controller, _):
            broker = await register(controller, A, "broker-a", [TopicConfig("T1"), TopicConfig("T2")])
            client = await connect(controller.host, controller.port, 2)
            try:
                first = await observe_round(client, 2, 4, 0)
                again = await observe_round(client, 2, 4, 0, first.bodies)
                assert again.view == first.view
                assert all(again.view.routes[t] is first.view.routes[t] for t in ("T1", "T2"))
                answer = await broker.register_broker(
                    "C1",
                    A,
                    "broker-a",
                    0,
                    A.replace("10911", "10912"),
                    DataVersion(1, 2),
                    [TopicConfig("T1", perm=4), TopicConfig("T2")],
                )
                assert answer.code == ResponseCode.SUCCESS
                changed = await observe_round(client, 2, 4, 0, again.bodies)
                assert changed.view.routes["T1"]["queue_datas"][0]["perm"] == 4
                assert changed.view.routes["T1"] is not first.view.routes["T1"]
                assert changed.view.routes["T2"] is first.view.routes["T2"]
            finally:
                await client.close()
                await broker.close()

    arun(scenario())
