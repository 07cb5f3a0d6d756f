"""Caps on a registration's topics and inflated body ([nameserver] max_register_topics,
max_register_body_bytes; docs/remoting-protocol.md §8.1a), on a real socket."""

from __future__ import annotations

import asyncio
import hashlib
import os
import zlib
from pathlib import Path

import pytest

from common.config import NameServerConfig
from nameserver.client import RemotingClient, register_broker_request, route_request
from nameserver.codec import (
    MAX_FRAME_BYTES,
    RegisterLimits,
    RegisterTooLarge,
    ResponseCode,
    body_crc32,
    decode_frame,
    encode_frame,
    encode_register_body,
)
from nameserver.model import DataVersion, TopicConfig
from nameserver.server.bodycache import RegisterBodyCache
from nameserver.server.inflation import OFF_LOOP_BYTES, RegisterInflation, prepare
from tests.nameserver.server.test_server import RawConn, arun, events_of, running, start_server, stop_server
from tests.nameserver.server.test_server_acl import guarded
from tests.nameserver.server.test_server_acl import running as acl_running

CAPS = {"max_register_topics": 100, "max_register_body_bytes": 64 * 1024}


def topics(n: int, prefix: str = "T") -> list[TopicConfig]:
    return [TopicConfig(f"{prefix}{i:05d}", 4, 4) for i in range(n)]


def register(addr: str, name: str, topic_list: list[TopicConfig], compressed: bool = False):
    return register_broker_request(
        "C1", addr, name, 0, addr.replace("10911", "10912"), DataVersion(1, 1), topic_list, compressed=compressed
    )


def bomb(addr: str, filler: str = "") -> object:
    """A compressed registration of one topic whose filter list inflates to 1 MiB (``filler``
    first, then spaces)."""
    content = encode_register_body(DataVersion(1, 1), topics(1), [], compressed=True)
    inflated = zlib.decompress(content)
    listed = b'["' + filler.encode() + b'"'
    padded = inflated[:-6] + (1 << 20).to_bytes(4, "big") + listed + b" " * ((1 << 20) - len(listed) - 1) + b"]"
    body = zlib.compress(padded, 9)
    request = register(addr, "bomb", [])
    request.body = body
    request.ext_fields = dict(request.ext_fields, compressed="true", bodyCrc32=str(body_crc32(body)))
    return request


def test_registrations_over_a_cap_are_refused_clearly_logged_and_change_nothing(tmp_path):
    async def body():
        async with running(tmp_path, **CAPS) as ctl:
            client = await RemotingClient.connect(ctl.host, ctl.port)
            at_caps = await client.request(register("10.0.0.1:10911", "broker-ok", topics(100), compressed=True))
            answers = {
                "topics, compressed": await client.request(register("10.0.0.2:10911", "b2", topics(101), True)),
                "topics, JSON": await client.request(register("10.0.0.3:10911", "b3", topics(101))),
                "bytes, JSON": await client.request(register("10.0.0.4:10911", "b4", topics(99, "T" * 600))),
                "bytes, compressed": await client.request(bomb("10.0.0.5:10911")),
            }
            route = await client.route("T00000")  # the server keeps serving
            live = set(ctl.routes.broker_live_table)
            await client.close()
            return at_caps, answers, route, live

    at_caps, answers, route, live = arun(body())
    assert at_caps.code == ResponseCode.SUCCESS
    for what, answer in answers.items():
        assert answer.code == ResponseCode.SYSTEM_ERROR, what
        assert answer.remark.startswith("register body too large: "), (what, answer.remark)
    assert "101 topics > max_register_topics 100" in answers["topics, compressed"].remark
    assert "101 topics > max_register_topics 100" in answers["topics, JSON"].remark
    assert "bytes > max_register_body_bytes 65536" in answers["bytes, JSON"].remark
    assert "inflates beyond 65536 bytes > max_register_body_bytes 65536" in answers["bytes, compressed"].remark
    assert route is not None and live == {"10.0.0.1:10911"}  # nothing of a refused one was applied
    events = events_of(tmp_path)
    rejected = [e for e in events if e["type"] == "rejected"]
    assert [(e["reason"], e["broker_addr"], e["broker_name"], e["cluster"]) for e in rejected] == [
        ("register_too_large", f"10.0.0.{i}:10911", name, "C1")
        for i, name in ((2, "b2"), (3, "b3"), (4, "b4"), (5, "bomb"))
    ]
    assert [e["detail"] for e in rejected] == [a.remark for a in answers.values()]
    assert [e["type"] for e in events if e["type"] in ("register", "heartbeat")] == ["register"]


def test_the_default_caps_pass_every_table_a_broker_can_send_uncompressed():
    # the shortest JSON a topic can take (one-character names) against RocketMQ's 16 MiB frame
    short = [TopicConfig(chr(c), 1, 1) for c in range(ord("a"), ord("z") + 1)]
    per_topic = len(encode_register_body(DataVersion(1, 1), short, [])) / len(short)
    defaults = NameServerConfig()
    assert MAX_FRAME_BYTES / per_topic < defaults.max_register_topics
    # topic for topic, the compressed text is shorter than the JSON: it inflates to less than the frame
    assert defaults.max_register_body_bytes >= MAX_FRAME_BYTES
    inflated = zlib.decompress(encode_register_body(DataVersion(1, 1), short, [], compressed=True))
    assert len(inflated) < len(encode_register_body(DataVersion(1, 1), short, []))


def test_a_large_compressed_registration_is_inflated_off_the_loop_in_its_connections_order(tmp_path):
    # bodies of more than OFF_LOOP_BYTES compressed are inflated on a worker thread while their
    # connection waits: the lookup pipelined behind one is answered after it, and sees it
    names = [hashlib.sha256(b"%d" % i).hexdigest()[:20] for i in range(4000)]
    good = register("10.0.0.1:10911", "broker-big", [TopicConfig(n, 4, 4) for n in names], compressed=True)
    over = register("10.0.0.2:10911", "broker-over", [TopicConfig(n + "x", 4, 4) for n in names] * 2, compressed=True)
    noise = os.urandom(48 * 1024).hex()  # incompressible: the body stays above OFF_LOOP_BYTES
    bomb_request = bomb("10.0.0.3:10911", filler=noise)
    assert min(len(good.body), len(over.body), len(bomb_request.body)) > OFF_LOOP_BYTES
    frames = [good, route_request(names[0]), over, bomb_request, route_request(names[1])]
    for opaque, request in enumerate(frames, 1):
        request.opaque = opaque

    async def body():
        async with running(tmp_path, max_register_topics=5000, max_register_body_bytes=1 << 20) as ctl:
            conn = await RawConn.open(ctl)
            await conn.send(b"".join(encode_frame(r) for r in frames))  # all at once, pipelined
            answers = [decode_frame(await conn.frame()) for _ in frames]
            conn.close()
            return answers

    answers = arun(body())
    assert [a.opaque for a in answers] == [1, 2, 3, 4, 5]  # in the connection's order
    assert [a.code for a in answers] == [
        ResponseCode.SUCCESS,
        ResponseCode.SUCCESS,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SYSTEM_ERROR,
        ResponseCode.SUCCESS,
    ]
    assert "8000 topics > max_register_topics 5000" in answers[2].remark
    assert "inflates beyond" in answers[3].remark


def test_a_body_inflated_off_the_loop_is_still_crc_checked_first(tmp_path):
    # the worker computes the CRC with the content; a mismatch is answered as on the loop, before
    # what inflating it found (here: more bytes than the cap)
    over = bomb("10.0.0.2:10911", filler=os.urandom(48 * 1024).hex())
    assert len(over.body) > OFF_LOOP_BYTES
    over.ext_fields["bodyCrc32"] = str((body_crc32(over.body) + 1) % 2**31)

    async def body():
        async with running(tmp_path, **CAPS) as ctl:
            client = await RemotingClient.connect(ctl.host, ctl.port)
            answer = await client.request(over)
            await client.close()
            return answer

    answer = arun(body())
    assert (answer.code, answer.remark) == (ResponseCode.SYSTEM_ERROR, "crc32 not match")
    assert [e["reason"] for e in events_of(tmp_path) if e["type"] == "rejected"] == ["crc_mismatch"]


def test_a_compressed_registration_over_the_topic_cap_is_refused_on_the_loop_before_its_crc(tmp_path):
    # its topic count is in the first bytes of its content: read there, it is refused at once,
    # before its CRC (a wrong one here) is computed and without going to the worker
    names = [hashlib.sha256(b"%d" % i).hexdigest()[:20] for i in range(200)]
    over = register("10.0.0.2:10911", "broker-over", [TopicConfig(n, 4, 4) for n in names], compressed=True)
    within = register("10.0.0.3:10911", "broker-ok", [TopicConfig(n, 4, 4) for n in names[:100]], compressed=True)
    assert min(len(over.body), len(within.body)) > OFF_LOOP_BYTES
    over.ext_fields["bodyCrc32"] = str((body_crc32(over.body) + 1) % 2**31)
    limits = RegisterLimits(CAPS["max_register_topics"], CAPS["max_register_body_bytes"])
    inflation = RegisterInflation(RegisterBodyCache(limits=limits), lambda channel, cmd: None)
    assert not inflation.wants(over)
    assert inflation.wants(within)  # within the cap: inflated and CRC-checked on the worker
    inflation.close()

    async def body():
        async with running(tmp_path, **CAPS) as ctl:
            client = await RemotingClient.connect(ctl.host, ctl.port)
            answers = [await client.request(over), await client.request(within)]
            await client.close()
            return answers

    refused, applied = arun(body())
    assert (refused.code, refused.remark) == (
        ResponseCode.SYSTEM_ERROR,
        "register body too large: 200 topics > max_register_topics 100",
    )
    assert applied.code == ResponseCode.SUCCESS
    assert [e["reason"] for e in events_of(tmp_path) if e["type"] == "rejected"] == ["register_too_large"]


def test_a_registration_over_the_topic_cap_is_answered_from_its_start_and_its_rest_is_not_kept(tmp_path):
    # the server answers once the frame's header and first KiB of body are in, and reads the rest
    # without buffering it; the frame after it on the connection is read as usual
    names = [os.urandom(10).hex() for _ in range(25_000)]
    over = register("10.0.0.2:10911", "broker-over", [TopicConfig(n, 4, 4) for n in names], compressed=True)
    over.opaque = 1
    raw = encode_frame(over)
    lookup = route_request("T00000")
    lookup.opaque = 2
    assert len(raw) > 256 * 1024

    async def body():
        async with running(tmp_path, **CAPS) as ctl:
            conn = await RawConn.open(ctl)
            await conn.send(raw[:8192])
            early = decode_frame(await conn.frame())
            await conn.send(raw[8192 : len(raw) // 2])
            await asyncio.sleep(0.1)
            held = ctl.admission.buffered_bytes  # across the server's connections
            await conn.send(raw[len(raw) // 2 :] + encode_frame(lookup))
            after = decode_frame(await conn.frame())
            conn.close()
            return early, held, after

    early, held, after = arun(body())
    assert (early.opaque, early.code) == (1, ResponseCode.SYSTEM_ERROR)
    assert early.remark == "register body too large: 25000 topics > max_register_topics 100"
    assert held == 0  # nothing of the refused frame is buffered
    assert (after.opaque, after.code) == (2, ResponseCode.TOPIC_NOT_EXIST)
    assert [e["reason"] for e in events_of(tmp_path) if e["type"] == "rejected"] == ["register_too_large"]


def test_a_refused_frame_whose_rest_stops_coming_is_closed_as_any_stuck_frame(tmp_path):
    # skipping the rest of a frame is still being in the middle of one: the slowloris clock runs
    names = [os.urandom(10).hex() for _ in range(25_000)]
    raw = encode_frame(register("10.0.0.2:10911", "b", [TopicConfig(n, 4, 4) for n in names], compressed=True))

    async def body():
        async with running(tmp_path, frame_timeout_ms=300, **CAPS) as ctl:
            conn = await RawConn.open(ctl)
            await conn.send(raw[:8192])
            early = decode_frame(await conn.frame())
            return early, await conn.closed_by_peer(timeout=3)

    early, closed = arun(body())
    assert early.code == ResponseCode.SYSTEM_ERROR and closed
    assert [e["reason"] for e in events_of(tmp_path) if e["type"] == "rejected"] == [
        "register_too_large",
        "frame_timeout",
    ]


def test_under_access_control_a_registration_is_read_whole_before_it_is_refused(tmp_path):
    # its signature covers the whole body: nothing is refused from a frame's start
    names = [os.urandom(10).hex() for _ in range(25_000)]
    over = register("10.0.0.2:10911", "broker-over", [TopicConfig(n, 4, 4) for n in names], compressed=True)
    head = decode_frame(encode_frame(over))
    head.body = head.body[:4096]

    async def body():
        async with running(tmp_path, **CAPS) as open_ctl:
            refused_open = open_ctl.refuses_unread(head)
        async with acl_running(tmp_path / "acl", guarded()) as guarded_ctl:
            refused_guarded = guarded_ctl.refuses_unread(head)
        return refused_open, refused_guarded

    assert arun(body()) == (True, False)


def test_the_worker_keeps_nothing_of_a_body_it_refuses():
    # the refusal goes back to the loop without its traceback: that would hold the worker's frame,
    # and every piece inflated before the cap, until the loop's garbage collector freed them
    request = bomb("10.0.0.9:10911")
    prepared = prepare(request.body, RegisterLimits(max_topics=100, max_body_bytes=64 * 1024))
    assert isinstance(prepared.content, RegisterTooLarge) and prepared.content.__traceback__ is None
    assert prepared.crc32 == body_crc32(request.body)


def _minor_faults(pid: int) -> int:
    """Minor page faults of a process so far (/proc/PID/stat, field 10)."""
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[7])


@pytest.mark.slow
def test_the_server_process_reads_large_frames_into_memory_it_reuses(tmp_path):
    # nameserver.server.memory: without it every large frame landed on fresh pages, one page
    # fault for each 4 KiB of it (about 100 a frame here); with it, the pages of one frame serve
    # the next
    config = tmp_path / "caps.toml"
    config.write_text("[nameserver]\nmax_register_topics = 100\n")
    names = [os.urandom(10).hex() for _ in range(25_000)]
    frame = encode_frame(register("10.0.0.2:10911", "broker-over", [TopicConfig(n, 4, 4) for n in names], True))
    assert len(frame) > 256 * 1024
    proc, host, port = start_server(tmp_path / "events", "ns-mem", config=config)
    try:

        async def send(conn: RawConn, times: int) -> None:
            for _ in range(times):
                await conn.send(frame)
                assert decode_frame(await conn.frame()).code == ResponseCode.SYSTEM_ERROR

        async def body() -> int:
            conn = RawConn(*await asyncio.open_connection(host, port))
            await send(conn, 3)  # the first frames size the heap
            before = _minor_faults(proc.pid)
            await send(conn, 20)
            conn.close()
            return _minor_faults(proc.pid) - before

        faults = arun(body())
    finally:
        assert stop_server(proc) == 0
    assert faults / 20 < len(frame) / 4096 / 4, faults
