"""A full disk under an in-process server (a small tmpfs on 127.0.0.1 sockets): every route change
is applied exactly when its answer says so, and the outage itself expires no broker
(docs/nameserver-semantics.md §2.13).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from common.config import EventLogConfig, NameServerConfig
from nameserver.client import RemotingClient, simple_request
from nameserver.codec import RemotingCommand, ResponseCode, fastjson
from nameserver.eventlog.writer import read_events
from nameserver.model import DataVersion, TopicConfig
from nameserver.routes.replay import RouteReplayer
from nameserver.server.controller import NameServerController
from tests.nameserver.scenario import table_state
from tests.nameserver.server.test_server import arun
from tests.nameserver.server.test_server_reliability import fill, small_tmpfs

DV = DataVersion(100, 1)
H = "10.3.0.1:10911"  # the broker whose 322 and 904 refreshes are sent
ATTEMPTS = 60  # requests per code until one meets the full disk: more lines than a page of slack holds


def strictly_increasing_clock() -> Callable[[], int]:
    """Wall-clock ms, one more than the last reading at least: every refresh stores a new value."""
    last = [0]

    def clock() -> int:
        last[0] = max(last[0] + 1, time.time_ns() // 1_000_000)
        return last[0]

    return clock


async def wait_until(condition: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        await asyncio.sleep(0.02)


async def start(events_dir: Path, **config) -> NameServerController:
    controller = NameServerController(
        "ns-o",
        events_dir,
        NameServerConfig(listen="127.0.0.1:0", **config),
        EventLogConfig(durability="group"),
        clock=strictly_increasing_clock(),
    )
    await controller.start()
    return controller


async def register(client: RemotingClient, addr: str, name: str, topics: list[TopicConfig]) -> RemotingCommand:
    return await client.register_broker("C1", addr, name, 0, addr.replace("10911", "10912"), DV, topics)


# ------------------------------------------------------------------ answer and table agree


@dataclass
class Step:
    """One request code sent until the disk refuses it.

    Attributes:
        code: the request code.
        send: sends the i-th request, returns the answer.
        applied: whether the i-th request's change is in the tables now.
        logged: the i of the request an event records, ``"any"`` for an event that names no i (a
            322 or 904 heartbeat), None for another event; None instead of a function: the code is
            never logged.
    """

    code: int
    send: Callable[[int], Awaitable[RemotingCommand]]
    applied: Callable[[int], bool]
    logged: Callable[[dict], object] | None


def steps(ctl: NameServerController, client: RemotingClient) -> list[Step]:
    routes = ctl.routes

    def perm(topic: str, name: str) -> int | None:
        queue_data = routes.topic_queue_table.get(topic, {}).get(name)
        return None if queue_data is None else queue_data.perm

    refreshed: dict[int, int] = {}  # i -> H's last_update before the i-th 322 / 904

    def send_refresh(code: int, ext: dict, body: bytes | None = None):
        async def send(i: int) -> RemotingCommand:
            refreshed[i] = routes.broker_live_table[H].last_update
            return await client.request(simple_request(code, ext, body))

        return send

    def number(text: str, prefix: str) -> int | None:
        return int(text[len(prefix) :]) if text.startswith(prefix) else None

    def of_type(kind: str, key: str, prefix: str) -> Callable[[dict], object]:
        return lambda e: number(e.get(key) or "", prefix) if e["type"] == kind else None

    def heartbeat(code: int) -> Callable[[dict], object]:
        return lambda e: "any" if e["type"] == "heartbeat" and e["request_code"] == code else None

    h_ext = {"clusterName": "C1", "brokerAddr": H, "brokerName": "bh", "brokerId": 0}
    return [
        Step(
            103,
            lambda i: register(client, f"10.2.0.{i}:10911", f"br-{i}", [TopicConfig(f"TR-{i}", 4, 4)]),
            lambda i: f"10.2.0.{i}:10911" in routes.broker_live_table,
            of_type("register", "broker_name", "br-"),
        ),
        Step(
            104,
            lambda i: client.unregister_broker("C1", f"10.1.0.{i}:10911", f"bu-{i}", 0),
            lambda i: f"10.1.0.{i}:10911" not in routes.broker_live_table,
            of_type("unregister", "broker_name", "bu-"),
        ),
        Step(
            205,
            lambda i: client.wipe_write_perm(f"bw-{i}"),
            lambda i: perm("TW", f"bw-{i}") == 4,
            of_type("wipe_write_perm", "broker_name", "bw-"),
        ),
        Step(
            327,
            lambda i: client.add_write_perm(f"ba-{i}"),
            lambda i: perm("TW", f"ba-{i}") == 6,
            of_type("add_write_perm", "broker_name", "ba-"),
        ),
        Step(
            216,
            lambda i: client.delete_topic(f"TD-{i}"),
            lambda i: f"TD-{i}" not in routes.topic_queue_table,
            of_type("delete_topic", "topic", "TD-"),
        ),
        Step(
            322,
            send_refresh(322, h_ext, fastjson.encode_data_version(DV)),
            lambda i: routes.broker_live_table[H].last_update > refreshed[i],
            heartbeat(322),
        ),
        Step(
            904,
            send_refresh(904, h_ext),
            lambda i: routes.broker_live_table[H].last_update > refreshed[i],
            heartbeat(904),
        ),
        # KV and the server's config are not logged (A5, A6): the disk never refuses them
        Step(
            100,
            lambda i: client.put_kv_config("NS", f"k{i}", "v"),
            lambda i: ctl.processor.kv.get_kv_config("NS", f"k{i}") == "v",
            None,
        ),
        Step(
            102,
            lambda i: client.delete_kv_config("NS", f"k{i}"),
            lambda i: ctl.processor.kv.get_kv_config("NS", f"k{i}") is None,
            None,
        ),
        Step(
            318,
            lambda i: client.update_namesrv_config(f"x{i}=1\n"),
            lambda i: ctl.processor.namesrv_config.snapshot().get(f"x{i}") == "1",
            None,
        ),
    ]


async def seed(client: RemotingClient) -> None:
    """The brokers and topics the steps change: one of each per attempt."""
    for i in range(ATTEMPTS):
        await register(client, f"10.1.0.{i}:10911", f"bu-{i}", [TopicConfig("TU", 4, 4)])
        await register(client, f"10.4.{i // 100}.{i % 100}:10911", f"bw-{i}", [TopicConfig("TW", 4, 4)])
        await register(client, f"10.5.{i // 100}.{i % 100}:10911", f"ba-{i}", [TopicConfig("TW", 4, 4)])
        assert (await client.wipe_write_perm(f"ba-{i}")).code == ResponseCode.SUCCESS
    await register(client, "10.6.0.1:10911", "bd", [TopicConfig(f"TD-{i}", 4, 4) for i in range(ATTEMPTS)])
    await register(client, H, "bh", [])


async def through_full_disk(
    ctl: NameServerController, client: RemotingClient, events_dir: Path, step: Step
) -> list[int]:
    """Fill the disk, send ``step``'s requests until one is refused (plus two more), check each
    answer against the tables, then free the disk and wait for the log. Returns the applied i."""
    filler = fill(events_dir)
    applied, refused = [], 0
    for i in range(ATTEMPTS):
        answer = await step.send(i)
        assert answer.code in (ResponseCode.SUCCESS, ResponseCode.SYSTEM_ERROR), (step.code, answer)
        assert step.applied(i) == (answer.code == ResponseCode.SUCCESS), (step.code, i, answer.remark)
        if answer.code == ResponseCode.SUCCESS:
            applied.append(i)
        else:
            assert "event log unavailable" in answer.remark
            refused += 1
            if refused == 3:
                break
        if step.logged is None and i == 20:
            break  # never refused: 20 are enough to show it
    assert refused == (3 if step.logged is not None else 0), (step.code, refused)
    assert await client.route("TW") is not None  # lookups go on
    filler.unlink()
    await wait_until(lambda: ctl.log_available, 5, "the log to resume")
    return applied


@pytest.mark.slow
def test_every_route_change_through_a_failing_log_is_applied_exactly_when_its_answer_says_so(tmp_path):
    with small_tmpfs(tmp_path / "ev", "4m") as events_dir:
        applied, events, replayed, served = arun(_every_code(events_dir), timeout=120)
    for (logged, first, last, done), code in zip(applied.values(), applied, strict=True):
        if logged is None:
            continue
        # exactly the applied requests were logged, each once; the refused ones never
        mine = Counter(logged(e) for e in events if first < e["seq"] <= last) - Counter({None: 10**9})
        assert mine == (Counter(done) if "any" not in mine else Counter({"any": len(done)})), code
    gaps = [e for e in events if e["type"] == "rejected" and e["reason"] == "log_unavailable"]
    assert len(gaps) == 7 and all(g["refused_count"] >= 3 for g in gaps)
    # the refused 322 and 904 refreshed the broker they named, once the log resumed
    assert [[r["broker_addr"] for r in g.get("refreshes", [])] for g in gaps[-2:]] == [[H], [H]]
    assert replayed == served  # the log gives back the server's tables, live entries included


async def _every_code(events_dir: Path):
    ctl = await start(events_dir, broker_expiry_ms=3_600_000, first_scan_delay_ms=3_600_000)
    client = await RemotingClient.connect(ctl.host, ctl.port)
    try:
        await seed(client)
        applied = {}
        for step in steps(ctl, client):
            first = ctl.writer.last_seq
            done = await through_full_disk(ctl, client, events_dir, step)
            applied[step.code] = (step.logged, first, ctl.writer.last_seq, done)
        events = list(read_events(events_dir, "ns-o"))
        replayer = RouteReplayer(3_600_000)
        for event in events:
            replayer.apply(event)
        return applied, events, table_state(replayer.routes), table_state(ctl.routes)
    finally:
        await client.close()
        await ctl.shutdown("test end")


# ------------------------------------------------------------------ the outage expires no broker

EXPIRY_MS, SCAN_MS = 3000, 500
OUTAGE_S = 3.2 * EXPIRY_MS / 1000  # several expiry periods


async def heartbeats(client: RemotingClient, kind: str, addr: str, stop: asyncio.Event) -> None:
    """A broker's periodic refresh every scan interval: a re-registration, a 904 or a 322."""
    while not stop.is_set():
        if kind == "103":
            await register(client, addr, f"b-{addr}", [TopicConfig("TopicA", 4, 4)])
        elif kind == "904":
            await client.broker_heartbeat("C1", addr, f"b-{addr}")
        else:
            await client.query_data_version("C1", addr, f"b-{addr}", 0, DV)
        await asyncio.sleep(SCAN_MS / 1000)


@pytest.mark.slow
def test_an_outage_of_several_expiry_periods_expires_no_broker_but_a_silent_one_still_goes(tmp_path):
    with small_tmpfs(tmp_path / "ev", "2m") as events_dir:
        events = arun(_outage(events_dir), timeout=90)
    steady = ["10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911", "10.0.0.4:10911"]
    expired = [e for e in events if e["type"] == "expire"]
    assert [e["broker_addr"] for e in expired] == ["10.0.0.9:10911"]  # the one that fell silent
    [gap] = [e for e in events if e["type"] == "rejected" and e["reason"] == "log_unavailable"]
    assert gap["outage_ms"] >= OUTAGE_S * 1000 and gap["refused_count"] > 0
    began = gap["ts"] - gap["outage_ms"]
    credited = {r["broker_addr"]: r["last_update_ts"] for r in gap["refreshes"]}
    assert set(credited) == set(steady) | {"10.0.0.9:10911"}
    # each credited at its last refused refresh: the silent broker's, early in the outage, is
    # what its expiry counts from
    assert began <= credited["10.0.0.9:10911"] < began + 2500
    assert expired[0]["last_update_ts"] == credited["10.0.0.9:10911"]
    assert expired[0]["seq"] > gap["seq"]
    assert all(gap["ts"] - 2 * SCAN_MS <= credited[a] < gap["ts"] for a in steady)


async def _outage(events_dir: Path):
    ctl = await start(events_dir, broker_expiry_ms=EXPIRY_MS, scan_interval_ms=SCAN_MS, first_scan_delay_ms=SCAN_MS)
    kinds = {
        "10.0.0.1:10911": "103",
        "10.0.0.2:10911": "103",
        "10.0.0.3:10911": "904",
        "10.0.0.4:10911": "322",
        "10.0.0.9:10911": "103",
    }
    clients = {addr: await RemotingClient.connect(ctl.host, ctl.port) for addr in kinds}
    stop_all, stop_silent = asyncio.Event(), asyncio.Event()
    try:
        for addr, client in clients.items():
            await register(client, addr, f"b-{addr}", [TopicConfig("TopicA", 4, 4)])
        tasks = [
            asyncio.ensure_future(
                heartbeats(client, kinds[addr], addr, stop_silent if addr == "10.0.0.9:10911" else stop_all)
            )
            for addr, client in clients.items()
        ]
        await asyncio.sleep(1.0)
        filler = fill(events_dir)
        await wait_until(lambda: not ctl.log_available, 5, "a write to fail")
        await asyncio.sleep(1.5)
        stop_silent.set()  # one broker falls silent during the outage; its connection stays open
        await asyncio.sleep(OUTAGE_S - 1.5)
        assert set(ctl.routes.broker_live_table) == set(kinds)  # no scan during the outage
        filler.unlink()
        await wait_until(lambda: ctl.log_available, 5, "the log to resume")
        await wait_until(lambda: "10.0.0.9:10911" not in ctl.routes.broker_live_table, 5, "the silent one to go")
        await asyncio.sleep((EXPIRY_MS + 2 * SCAN_MS) / 1000)  # long enough to expire any other
        assert set(ctl.routes.broker_live_table) == set(kinds) - {"10.0.0.9:10911"}
        stop_all.set()
        await asyncio.gather(*tasks)
        return list(read_events(events_dir, "ns-o"))
    finally:
        stop_all.set()
        stop_silent.set()
        for client in clients.values():
            client.abort()
        await ctl.shutdown("test end")
