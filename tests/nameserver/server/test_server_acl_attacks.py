"""Attacks on access control, on a real server (127.0.0.1, port 0): a captured signed request
replayed, text moved between two signed values, a stale signature, unsigned heartbeats keeping a
dead broker alive; and RocketMQ-style signatures where the compatibility mode allows them.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import hashlib
import hmac
import time
from pathlib import Path

from common.config import EventLogConfig, NameServerConfig
from nameserver.acl import AccessController, Credentials, SecretStore, sign_request
from nameserver.client import RemotingClient, register_broker_request, simple_request
from nameserver.codec import RemotingCommand, RequestCode, ResponseCode, encode_frame, fastjson
from nameserver.eventlog.writer import read_events
from nameserver.model import DataVersion, TopicConfig
from nameserver.server.controller import NameServerController
from tests.nameserver.server.test_server import arun

SECRET = "Zx8-broker-SECRET-q4"
BROKER = Credentials("broker", SECRET)
M = "127.0.0.1:10911"
TOPICS = [TopicConfig("TopicA", 8, 8)]
VERSION = DataVersion(100, 1)


@contextlib.asynccontextmanager
async def running(events_dir: Path, access: AccessController, **timers):
    """An in-process server on 127.0.0.1:0 with this access control (and expiry timers)."""
    config = NameServerConfig(listen="127.0.0.1:0", **timers)
    controller = NameServerController("ns-acl", events_dir, config, EventLogConfig(), access=access)
    await controller.start()
    try:
        yield controller
    finally:
        await controller.shutdown("test end")


async def connect(ctl: NameServerController, credentials: Credentials | None = None) -> RemotingClient:
    return await RemotingClient.connect(ctl.host, ctl.port, credentials=credentials)


def registration(addr: str = M) -> RemotingCommand:
    return register_broker_request("C1", addr, "broker-a", 0, addr.replace("10911", "10912"), VERSION, TOPICS)


async def send_frame(client: RemotingClient, frame: bytes, opaque: int) -> RemotingCommand:
    """Send bytes as they are and wait for the answer with ``opaque``."""
    answer = client.expect(opaque)
    await client.send_raw(frame)
    return await asyncio.wait_for(answer, 5)


def events(events_dir: Path) -> list[dict]:
    return list(read_events(events_dir, "ns-acl"))


def refusals(events_dir: Path) -> list[tuple]:
    return [(e["request_code"], e["reason"], e["detail"]) for e in events(events_dir) if e["type"] == "rejected"]


def test_a_captured_signed_registration_replayed_byte_for_byte_is_refused(tmp_path):
    async def scenario():
        async with running(tmp_path, AccessController(SecretStore({"broker": SECRET}))) as ctl:
            broker, attacker = await connect(ctl, BROKER), await connect(ctl)
            cmd = registration()
            cmd.opaque = 77
            broker._sign(cmd)  # as the broker's client signs it before writing
            captured = encode_frame(cmd)
            first = await send_frame(broker, captured, 77)
            gone = await broker.unregister_broker("C1", M, "broker-a", 0)
            # the attacker sends the captured bytes again, from its own connection and from the broker's
            replays = [await send_frame(attacker, captured, 77), await send_frame(broker, captured, 77)]
            route = await attacker.route("TopicA")
            await broker.close()
            await attacker.close()
            return first, gone, replays, route

    first, gone, replays, route = arun(scenario())
    assert (first.code, gone.code) == (ResponseCode.SUCCESS, ResponseCode.SUCCESS)
    assert [(a.code, a.remark) for a in replays] == [(ResponseCode.NO_PERMISSION, "no permission: replayed")] * 2
    assert route is None  # the broker stays unregistered
    assert refusals(tmp_path) == [(103, "no_permission", "replayed")] * 2
    assert [e["type"] for e in events(tmp_path)].count("register") == 1


def test_moving_text_between_adjacent_signed_values_breaks_the_signature(tmp_path):
    async def scenario():
        async with running(tmp_path, AccessController(SecretStore({"broker": SECRET}))) as ctl:
            broker, attacker = await connect(ctl, BROKER), await connect(ctl)
            cmd = registration()
            broker._sign(cmd)  # captured, and kept from the server
            # brokerAddr and brokerId sort next to each other: "127.0.0.1:10911" + "0" == "127.0.0.1:1091" + "10"
            shifted = dict(cmd.ext_fields, brokerAddr="127.0.0.1:1091", brokerId="10")
            forged = RemotingCommand(code=cmd.code, ext_fields=shifted, body=cmd.body, version=cmd.version, opaque=5)
            answer = await send_frame(attacker, encode_frame(forged), 5)
            cluster = await attacker.cluster_info()
            await attacker.close()
            await broker.close()
            return answer, cluster

    answer, cluster = arun(scenario())
    assert (answer.code, answer.remark) == (ResponseCode.NO_PERMISSION, "no permission: bad signature")
    assert cluster["broker_addr_table"] == {}
    assert refusals(tmp_path) == [(103, "no_permission", "bad signature")]


def sign_request_now(cmd: RemotingCommand, timestamp_ms: int | None = None) -> RemotingCommand:
    stamp = time.time_ns() // 1_000_000 if timestamp_ms is None else timestamp_ms
    return sign_request(cmd, BROKER, timestamp_ms=stamp, nonce=f"n{stamp}")


def test_a_signature_outside_the_freshness_window_is_refused(tmp_path):
    access = AccessController(SecretStore({"broker": SECRET}), skew_ms=60_000)
    now = time.time_ns() // 1_000_000
    stale, early, fresh = registration(), registration(), registration()
    sign_request_now(stale, now - 120_000)
    sign_request_now(early, now + 120_000)
    sign_request_now(fresh, now - 30_000)

    async def scenario():
        async with running(tmp_path, access) as ctl:
            attacker = await connect(ctl)
            answers = []
            for n, cmd in enumerate((stale, early, fresh)):
                cmd.opaque = 10 + n
                answers.append(await send_frame(attacker, encode_frame(cmd), cmd.opaque))
            await attacker.close()
            return answers

    answers = arun(scenario())
    assert [(a.code, a.remark) for a in answers] == [
        (16, "no permission: timestamp outside window"),
        (16, "no permission: timestamp outside window"),
        (0, None),
    ]
    assert refusals(tmp_path) == [(103, "no_permission", "timestamp outside window")] * 2


async def keep_poking(client: RemotingClient, seconds: float) -> list[int]:
    """Heartbeats (904, oneway) and data-version queries (322) for M every 50 ms; the 322 answers."""
    codes, deadline = [], time.monotonic() + seconds
    while time.monotonic() < deadline:
        await client.broker_heartbeat("C1", M, "broker-a")
        codes.append((await client.query_data_version("C1", M, "broker-a", 0, VERSION)).code)
        await asyncio.sleep(0.05)
    return codes


def liveness_scenario(tmp_path: Path, poker: Credentials | None):
    """A signed broker registers and falls silent (its connection stays open); ``poker`` sends
    904/322 for it past the expiry."""

    async def scenario():
        timers = dict(broker_expiry_ms=600, scan_interval_ms=100, first_scan_delay_ms=50)
        async with running(tmp_path, AccessController(SecretStore({"broker": SECRET})), **timers) as ctl:
            broker = await connect(ctl, BROKER)
            assert (await broker.register_broker("C1", M, "broker-a", 0, "127.0.0.1:10912", VERSION, TOPICS)).code == 0
            other = await connect(ctl, poker)
            codes = await keep_poking(other, 1.5)
            route = await other.route("TopicA")
            await other.close()
            await broker.close()
            return codes, route

    return arun(scenario())


def test_unsigned_heartbeats_and_version_queries_are_refused_and_the_broker_expires(tmp_path):
    codes, route = liveness_scenario(tmp_path, None)
    assert codes and set(codes) == {ResponseCode.NO_PERMISSION}
    assert route is None
    logged = events(tmp_path)
    assert [e["broker_addr"] for e in logged if e["type"] == "expire"] == [M]
    assert not [e for e in logged if e["type"] == "heartbeat"]
    refused = {(code, reason, detail) for code, reason, detail in refusals(tmp_path)}
    assert refused == {(904, "no_permission", "unsigned"), (322, "no_permission", "unsigned")}


def test_signed_heartbeats_and_version_queries_keep_the_broker_alive(tmp_path):
    codes, route = liveness_scenario(tmp_path, BROKER)
    assert codes and set(codes) == {ResponseCode.SUCCESS}
    assert route["broker_datas"][0]["broker_addrs"] == {0: M}
    logged = events(tmp_path)
    assert not [e for e in logged if e["type"] == "expire"] and refusals(tmp_path) == []
    assert [e for e in logged if e["type"] == "heartbeat"]


def rocketmq_signed(cmd: RemotingCommand, access_key: str, secret: str) -> RemotingCommand:
    """Signed as RocketMQ's AclClientRPCHook signs, computed here independently of the module:
    HmacSHA1 over the extFields values sorted by key, concatenated, then the body."""
    ext = dict(cmd.ext_fields or {}, AccessKey=access_key)
    content = "".join(ext[k] for k in sorted(ext)).encode() + (cmd.body or b"")
    ext["Signature"] = base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()
    cmd.ext_fields = ext
    return cmd


def test_rocketmq_style_signatures_pass_only_in_the_compatibility_mode(tmp_path):
    async def scenario(accept: bool, events_dir: Path):
        access = AccessController(SecretStore({"broker": SECRET}), accept_rocketmq_signatures=accept)
        async with running(events_dir, access) as ctl:
            peer, ours = await connect(ctl), await connect(ctl, BROKER)
            answers = []
            for n, client in enumerate((peer, ours)):
                cmd = rocketmq_signed(registration(), "broker", SECRET) if client is peer else registration()
                cmd.opaque = 20 + n
                if client is ours:
                    client._sign(cmd)
                answers.append((await send_frame(client, encode_frame(cmd), cmd.opaque)).code)
            heartbeat = rocketmq_signed(
                simple_request(
                    RequestCode.QUERY_DATA_VERSION,
                    {"clusterName": "C1", "brokerAddr": M, "brokerName": "broker-a", "brokerId": "0"},
                    fastjson.encode_data_version(VERSION),
                ),
                "broker",
                SECRET,
            )
            heartbeat.opaque = 30
            answers.append((await send_frame(peer, encode_frame(heartbeat), 30)).code)
            await peer.close()
            await ours.close()
            return answers

    # strict (the default): our own signatures only; compatibility: RocketMQ's as well
    assert arun(scenario(False, tmp_path / "strict")) == [16, 0, 16]
    assert arun(scenario(True, tmp_path / "compat")) == [0, 0, 0]
    assert refusals(tmp_path / "strict") == [
        (103, "no_permission", "bad signature"),
        (322, "no_permission", "bad signature"),
    ]
