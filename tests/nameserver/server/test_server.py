"""The asyncio server on a real socket (127.0.0.1, port 0): wire vectors, defences, lifecycle.

Most tests run a :class:`NameServerController` in the test's own event loop so they can look
inside; the lifecycle tests (ready line, SIGTERM, crash) run ``python -m nameserver`` as the
docs/interfaces.md describes.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import select
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.config import EventLogConfig, NameServerConfig
from nameserver.client import RemotingClient, RemotingError
from nameserver.codec import (
    FrameDecoder,
    RequestCode,
    ResponseCode,
    SerializeType,
    encode_frame,
    fastjson,
    make_request,
    make_response,
)
from nameserver.eventlog.writer import list_segments, read_events
from nameserver.model import DataVersion, TopicConfig
from nameserver.server import channel as channel_module
from nameserver.server.controller import NameServerController
from nameserver.server.processor import TOPIC_NOT_EXIST_REMARK
from tests.nameserver.server.processor.test_processor import (
    D2B_CRC_RESPONSE,
    D2B_RESPONSE,
    D3_DEFAULT_BODY,
    D3_HEADER,
    D3_STANDARD_BODY,
    d2a_frame,
    d2b_frame,
    d2c_frame,
    json_frame,
    route_frame,
)

M = "10.0.0.1:10911"
A = TopicConfig("TopicA", 8, 8)
JSON, ROCKETMQ = SerializeType.JSON, SerializeType.ROCKETMQ
dv1 = DataVersion(100, 1)


# ---------------------------------------------------------------------- helpers


def arun(coro, timeout: float = 60):
    """Run one async test body with an overall timeout."""
    return asyncio.run(asyncio.wait_for(coro, timeout))


@contextlib.asynccontextmanager
async def running(events_dir: Path, ns_id: str = "ns-t", eventlog: EventLogConfig | None = None, **config):
    """An in-process server on 127.0.0.1:0, shut down (``ns_stop``) on exit."""
    controller = NameServerController(
        ns_id, events_dir, NameServerConfig(listen="127.0.0.1:0", **config), eventlog or EventLogConfig()
    )
    await controller.start()
    try:
        yield controller
    finally:
        await controller.shutdown("test end")


class RawConn:
    """A plain stream connection: exact bytes out, whole frames in."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, controller: NameServerController) -> RawConn:
        return cls(*await asyncio.open_connection(controller.host, controller.port))

    async def send(self, data: bytes) -> None:
        self.writer.write(data)
        await self.writer.drain()

    async def frame(self, timeout: float = 5) -> bytes:
        head = await asyncio.wait_for(self.reader.readexactly(4), timeout)
        return head + await asyncio.wait_for(self.reader.readexactly(int.from_bytes(head, "big")), timeout)

    async def closed_by_peer(self, timeout: float = 5) -> bool:
        try:
            return await asyncio.wait_for(self.reader.read(1 << 16), timeout) == b""
        except ConnectionResetError:
            return True

    def close(self) -> None:
        self.writer.close()


def events_of(events_dir: Path, ns_id: str = "ns-t") -> list[dict]:
    return list(read_events(events_dir, ns_id))


def response_frame(header: str, body: bytes = b"") -> bytes:
    return json_frame(header, body)


async def register(client: RemotingClient, addr: str = M, name: str = "broker-a", topics=(A,)):
    answer = await client.register_broker("C1", addr, name, 0, addr.replace("10911", "10912"), dv1, topics)
    assert answer.code == ResponseCode.SUCCESS
    return answer


async def wait_for(predicate, timeout: float = 5, step: float = 0.01):
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(step)


# ---------------------------------------------------------------------- wire vectors


def test_w27_d2_d3_d4_exact_bytes(tmp_path):
    async def body():
        async with running(tmp_path) as ctl:
            conn = await RawConn.open(ctl)
            # W27 step 1 (bodyCrc32 1) and D2b with a wrong CRC: SYSTEM_ERROR, ext {}, no change
            for crc in ("1", "416932169"):
                await conn.send(d2b_frame(crc=crc))
                assert await conn.frame() == D2B_CRC_RESPONSE
            await conn.send(route_frame("TopicTest", 407))
            assert (await conn.frame())[8:][:30].startswith(b'{"code":17')
            # W27 step 2 / D2b: accepted
            await conn.send(d2b_frame())
            assert await conn.frame() == D2B_RESPONSE
            # D3: both route forms
            for frame, route_body in [
                (route_frame("TopicTest", 407), D3_STANDARD_BODY),
                (route_frame("TopicTest", 400), D3_DEFAULT_BODY),
                (route_frame("TopicTest", 400, accept="true"), D3_STANDARD_BODY),
            ]:
                await conn.send(frame)
                assert await conn.frame() == response_frame(D3_HEADER, route_body)
            # D4: same data version refreshes, another does not
            qdv = (
                '{"code":322,"extFields":{"brokerAddr":"192.168.0.10:10911","brokerId":"0","brokerName":"broker-a",'
                '"clusterName":"DefaultCluster"},"flag":0,"language":"JAVA","opaque":6,'
                '"serializeTypeCurrentRPC":"JSON","version":407}'
            )
            stored = b'{"counter":3,"timestamp":1700000000000}'
            await conn.send(json_frame(qdv, stored))
            assert await conn.frame() == response_frame(
                '{"code":0,"extFields":{"changed":"false"},"flag":1,"language":"JAVA","opaque":6,'
                '"serializeTypeCurrentRPC":"JSON","version":407}',
                stored,
            )
            await conn.send(json_frame(qdv, b'{"counter":4,"timestamp":1700000000000}'))
            assert await conn.frame() == response_frame(
                '{"code":0,"extFields":{"changed":"true"},"flag":1,"language":"JAVA","opaque":6,'
                '"serializeTypeCurrentRPC":"JSON","version":407}',
                stored,
            )
            conn.close()
        kinds = [(e["type"], e.get("reason"), e.get("request_code")) for e in events_of(tmp_path)]
        assert kinds[:5] == [
            ("ns_start", None, None),
            ("rejected", "crc_mismatch", 103),
            ("rejected", "crc_mismatch", 103),
            ("register", None, 103),
            ("heartbeat", None, 322),
        ]
        heartbeats = [e for e in events_of(tmp_path) if e["type"] == "heartbeat"]
        assert len(heartbeats) == 2  # both 322s are logged; only the first refreshed (D5)

    arun(body())


@pytest.mark.parametrize("make_frame", [d2a_frame, d2c_frame])
def test_d2a_d2c_register_the_same_route(tmp_path, make_frame):
    async def body():
        async with running(tmp_path) as ctl:
            conn = await RawConn.open(ctl)
            await conn.send(make_frame())
            answer = FrameDecoder()
            answer.feed(await conn.frame())
            assert next(iter(answer)).code == ResponseCode.SUCCESS
            await conn.send(route_frame("TopicTest", 407))
            assert await conn.frame() == response_frame(D3_HEADER, D3_STANDARD_BODY)
            conn.close()

    arun(body())


def test_w28_unknown_code_answered_and_oneway_silent(tmp_path):
    async def body():
        async with running(tmp_path) as ctl:
            conn = await RawConn.open(ctl)
            await conn.send(encode_frame(make_request(217, {"topic": "T"}, opaque=11)))
            assert await conn.frame() == response_frame(
                '{"code":3,"flag":1,"language":"JAVA","opaque":11,"remark":" request type 217 not supported",'
                '"serializeTypeCurrentRPC":"JSON","version":407}'
            )
            # oneway: no answer at all, then the next request's answer is the next frame
            await conn.send(
                encode_frame(make_request(217, opaque=12, oneway=True)) + encode_frame(make_request(106, opaque=13))
            )
            assert b'"opaque":13' in await conn.frame()
            conn.close()
        rejected = [e for e in events_of(tmp_path) if e["type"] == "rejected"]
        assert [(e["reason"], e["request_code"]) for e in rejected] == [("unknown_code", 217)] * 2
        assert not any(e["type"] in ("register", "unregister") for e in events_of(tmp_path))

    arun(body())


def test_rocketmq_header_answered_in_kind(tmp_path):
    g2 = bytes.fromhex(
        "0000002d010000290069000191000000010000000000000000000000140005746f70696300000009546f70696354657374"
    )

    async def body():
        async with running(tmp_path) as ctl:
            conn = await RawConn.open(ctl)
            await conn.send(g2)
            frame = await conn.frame()
            assert frame[4] == 1  # ROCKETMQ serialize type, as the request
            decoder = FrameDecoder()
            decoder.feed(frame)
            answer = next(iter(decoder))
            assert (answer.code, answer.opaque, answer.flag, answer.version) == (17, 1, 1, 407)
            conn.close()

    arun(body())


def test_pipelined_and_split_frames(tmp_path):
    async def body():
        async with running(tmp_path) as ctl:
            client = await RemotingClient.connect(ctl.host, ctl.port)
            await register(client)
            conn = await RawConn.open(ctl)
            frames = b"".join(encode_frame(make_request(105, {"topic": "TopicA"}, opaque=i)) for i in range(1, 51))
            await conn.send(frames)
            opaques = []
            for _ in range(50):
                decoder = FrameDecoder()
                decoder.feed(await conn.frame())
                answer = next(iter(decoder))
                assert answer.code == ResponseCode.SUCCESS
                opaques.append(answer.opaque)
            assert sorted(opaques) == list(range(1, 51))
            one = encode_frame(make_request(106, opaque=99))
            for i in range(len(one)):  # one byte per write
                await conn.send(one[i : i + 1])
                await asyncio.sleep(0)
            assert b'"opaque":99' in await conn.frame()
            conn.close()
            await client.close()

    arun(body())


def test_lookup_answers_follow_every_table_change(tmp_path):
    """Lookups are answered from bytes encoded once per table change: each answer is exactly
    what the pure table gives at that moment, whatever the opaque and the header type."""

    async def body():
        async with running(tmp_path) as ctl:
            client = await RemotingClient.connect(ctl.host, ctl.port)
            conn = await RawConn.open(ctl)
            opaques = iter(range(1, 1000))

            async def lookups() -> list[tuple[int, bytes | None]]:
                seen = []
                for version, serialize_type in ((400, JSON), (407, JSON), (407, ROCKETMQ)):
                    cmd = make_request(
                        105, {"topic": "TopicA"}, opaque=next(opaques), version=version, serialize_type=serialize_type
                    )
                    await conn.send(encode_frame(cmd))
                    answer = await conn.frame()
                    route = ctl.routes.pickup_topic_route_data("TopicA")
                    if route is None:
                        expected = make_response(
                            cmd, ResponseCode.TOPIC_NOT_EXIST, remark=TOPIC_NOT_EXIST_REMARK.format(topic="TopicA")
                        )
                    else:
                        expected = make_response(
                            cmd, ResponseCode.SUCCESS, body=fastjson.encode_route(route, version >= 401)
                        )
                    assert answer == encode_frame(expected)
                    seen.append((expected.code, expected.body))
                return seen

            before = await lookups()
            for change in (
                lambda: register(client),
                lambda: client.wipe_write_perm("broker-a"),
                lambda: client.add_write_perm("broker-a"),
                lambda: client.delete_topic("TopicA"),
            ):
                assert await lookups() == before
                await change()
                after = await lookups()
                assert all(a != b for a, b in zip(before, after, strict=True))
                before = after
            conn.close()
            await client.close()

    arun(body())


def test_interleaved_pieces_of_many_connections_and_frames_larger_than_one_read(tmp_path):
    """The connections share one receive buffer (channel module): no bytes may cross over."""

    async def body():
        async with running(tmp_path) as ctl:
            big = tuple(TopicConfig(f"BigTopic-{i:05d}-{'x' * 100}", 8, 8) for i in range(3000))
            client = await RemotingClient.connect(ctl.host, ctl.port)
            await register(client, topics=big)  # a CRC-checked body of 1 MB: several reads
            assert len(ctl.routes.topic_queue_table) == 3000
            conns = [await RawConn.open(ctl) for _ in range(8)]
            frames = [
                b"".join(
                    encode_frame(make_request(105, {"topic": big[c * 100 + i].topic}, opaque=c * 1000 + i))
                    for i in range(20)
                )
                for c in range(8)
            ]
            for start in range(0, max(map(len, frames)), 37):  # 37-byte pieces, connection by connection
                for conn, data in zip(conns, frames, strict=True):
                    if start < len(data):
                        await conn.send(data[start : start + 37])
                await asyncio.sleep(0)
            for c, conn in enumerate(conns):
                for i in range(20):
                    decoder = FrameDecoder()
                    decoder.feed(await conn.frame())
                    answer = next(iter(decoder))
                    assert (answer.code, answer.opaque) == (ResponseCode.SUCCESS, c * 1000 + i)
                    assert b"broker-a" in answer.body
                conn.close()
            await client.close()

    arun(body())


# ---------------------------------------------------------------------- §9.1 malformed frames (D5)

D5 = {
    "D5a": bytes.fromhex("000000020000"),
    "D5b": bytes.fromhex("00fffffd") + b"\x00" * 64,
    "D5c": bytes.fromhex("00000008000000107b7d7b7d"),
    "D5d": bytes.fromhex("00000006020000027b7d"),
    "D5e": bytes.fromhex("00000006000000025b5d"),
    "D5f": bytes.fromhex("000000080100000400690000"),
}


@pytest.mark.parametrize("name", sorted(D5))
def test_d5_malformed_frame_closes_and_unregisters(tmp_path, name):
    async def body():
        async with running(tmp_path) as ctl:
            broker = await RemotingClient.connect(ctl.host, ctl.port)
            await register(broker)
            other = await RemotingClient.connect(ctl.host, ctl.port)
            assert await other.route("TopicA") is not None
            with contextlib.suppress(ConnectionError):
                await broker.send_raw(D5[name])
            await asyncio.wait_for(broker.closed, 5)
            assert await other.route("TopicA") is None  # the broker left with its connection
            assert (await other.cluster_info())["broker_addr_table"] == {}
            await other.close()
        events = events_of(tmp_path)
        rejected = [e for e in events if e["type"] == "rejected"]
        assert [e["reason"] for e in rejected] == ["malformed_frame"]
        close = next(e for e in events if e["type"] == "channel_close" and e["channel"] == rejected[0]["channel"])
        assert close["broker_addr"] == M and close["seq"] > rejected[0]["seq"]

    arun(body())


def test_end_of_stream_mid_frame_is_an_ordinary_close(tmp_path):
    async def body():
        async with running(tmp_path) as ctl:
            conn = await RawConn.open(ctl)
            await conn.send(encode_frame(make_request(106))[:10])
            conn.close()
            await wait_for(lambda: ctl.connection_count == 0)
        assert not [e for e in events_of(tmp_path) if e["type"] == "rejected"]
        # it never registered, so its close changes no table: counted, not logged
        events = events_of(tmp_path)
        assert [e["type"] for e in events] == ["ns_start", "ns_stop"] and events[-1]["silent_closes"] == 1

    arun(body())


# ---------------------------------------------------------------------- defences


def test_slowloris_connection_is_closed(tmp_path):
    async def body():
        async with running(tmp_path, frame_timeout_ms=300) as ctl:
            slow = await RawConn.open(ctl)
            await slow.send(encode_frame(make_request(106))[:7])
            good = await RemotingClient.connect(ctl.host, ctl.port)
            for _ in range(5):  # a client that completes its frames is never cut
                assert (await good.get_broker_cluster_info()).code == ResponseCode.SUCCESS
                await asyncio.sleep(0.1)
            assert await slow.closed_by_peer(timeout=3)
            assert good.is_open
            await good.close()
        rejected = [e for e in events_of(tmp_path) if e["type"] == "rejected"]
        assert [e["reason"] for e in rejected] == ["frame_timeout"]
        assert rejected[0]["frame_timeout_ms"] == 300

    arun(body())


def test_connection_cap(tmp_path):
    async def body():
        async with running(tmp_path, max_connections=3) as ctl:
            clients = [await RemotingClient.connect(ctl.host, ctl.port) for _ in range(3)]
            for c in clients:
                assert (await c.get_broker_cluster_info()).code == ResponseCode.SUCCESS
            refused = await RawConn.open(ctl)
            assert await refused.closed_by_peer()
            await clients[0].close()
            await wait_for(lambda: ctl.connection_count == 2)
            again = await RemotingClient.connect(ctl.host, ctl.port)
            assert (await again.get_broker_cluster_info()).code == ResponseCode.SUCCESS
            for c in clients[1:] + [again]:
                await c.close()
        rejected = [e for e in events_of(tmp_path) if e["type"] == "rejected"]
        assert [e["reason"] for e in rejected] == ["connection_limit"]

    arun(body())


BIG_ANSWER = encode_frame(make_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))


def _register_many(broker: RemotingClient):
    """A broker with 4000 topics: every topic-list answer (BIG_ANSWER's) is ~70 KB."""
    topics = [TopicConfig(f"Topic{i:04d}-with-a-longer-name", 8, 8) for i in range(4000)]
    topics[1] = TopicConfig("Topic0001", 8, 8)
    topics[2] = TopicConfig("Topic0002", 8, 8)
    return register(broker, topics=topics)


def test_a_client_that_never_reads_does_not_block_others(tmp_path):
    async def body():
        async with running(tmp_path, frame_timeout_ms=60_000) as ctl:
            broker = await RemotingClient.connect(ctl.host, ctl.port)
            await _register_many(broker)
            sock = socket.create_connection((ctl.host, ctl.port))
            sock.setblocking(False)
            burst = BIG_ANSWER * 200
            good = await RemotingClient.connect(ctl.host, ctl.port)
            deadline = time.monotonic() + 20
            while time.monotonic() < deadline:
                try:
                    sock.send(burst)
                except BlockingIOError:
                    break  # the server stopped reading the greedy client: TCP pushes back
                assert (await good.route("Topic0001")) is not None
            else:
                raise AssertionError("the greedy client was never pushed back")
            greedy = [c for c in ctl.open_channels() if c.paused_since is not None]
            assert len(greedy) == 1  # paused: its requests wait in the kernel, not in our memory
            for _ in range(20):  # while it stays paused, the good client is answered
                assert (await good.route("Topic0002")) is not None
            assert [c for c in ctl.open_channels() if c.paused_since is not None] == greedy
            sock.close()
            await good.close()
            await broker.close()

    arun(body())


def test_a_reader_whose_backlog_passes_the_hard_limit_is_dropped(tmp_path, monkeypatch):
    monkeypatch.setattr(channel_module, "WRITE_BUFFER_HARD_LIMIT", 256 * 1024)

    async def body():
        async with running(tmp_path) as ctl:
            broker = await RemotingClient.connect(ctl.host, ctl.port)
            await _register_many(broker)
            sock = socket.create_connection((ctl.host, ctl.port))
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.sendall(BIG_ANSWER * 500)  # 50 KB of requests: fits the kernel buffers
            dropped = []
            ctl_drop = ctl.drop_slow_reader
            ctl.drop_slow_reader = lambda channel: (dropped.append(channel), ctl_drop(channel))
            await wait_for(lambda: dropped and ctl.connection_count == 1, timeout=5)
            assert (await broker.get_broker_cluster_info()).code == ResponseCode.SUCCESS
            sock.close()
            await broker.close()
        assert [e["reason"] for e in events_of(tmp_path) if e["type"] == "rejected"] == ["slow_reader"]

    arun(body())


def test_stuck_reader_is_dropped_after_frame_timeout(tmp_path):
    async def body():
        async with running(tmp_path, frame_timeout_ms=400) as ctl:
            broker = await RemotingClient.connect(ctl.host, ctl.port)
            await _register_many(broker)
            sock = socket.create_connection((ctl.host, ctl.port))
            sock.setblocking(False)
            sock.send(BIG_ANSWER * 150)  # ~10 MB of answers: past the high mark, below the hard limit
            await wait_for(lambda: any(c.paused_since for c in ctl.open_channels()), timeout=5)
            await wait_for(lambda: ctl.connection_count == 1, timeout=5)
            sock.close()
            await broker.close()
        assert [e["reason"] for e in events_of(tmp_path) if e["type"] == "rejected"] == ["slow_reader"]

    arun(body())


def test_idle_close_is_a_channel_close(tmp_path):
    async def body():
        async with running(tmp_path, channel_idle_ms=300) as ctl:
            broker = await RemotingClient.connect(ctl.host, ctl.port)
            await register(broker)
            chatty = await RemotingClient.connect(ctl.host, ctl.port)
            for _ in range(8):
                await asyncio.sleep(0.1)
                assert (await chatty.get_broker_cluster_info()).code == ResponseCode.SUCCESS
            await asyncio.wait_for(broker.closed, 3)
            assert chatty.is_open
            assert await chatty.route("TopicA") is None
            await chatty.close()
        closes = [e for e in events_of(tmp_path) if e["type"] == "channel_close"]
        assert closes[0]["broker_addr"] == M

    arun(body())


def test_expiry_scan_on_its_ticks_closes_the_connection(tmp_path):
    async def body():
        async with running(tmp_path, broker_expiry_ms=500, scan_interval_ms=200, first_scan_delay_ms=100) as ctl:
            broker = await RemotingClient.connect(ctl.host, ctl.port)
            await register(broker)
            await asyncio.wait_for(broker.closed, 3)  # silent: expired, then closed by the server
            start = ctl.start_ts
        events = events_of(tmp_path)
        register_event = next(e for e in events if e["type"] == "register")
        expire = next(e for e in events if e["type"] == "expire")
        assert expire["last_update_ts"] == register_event["ts"]
        assert register_event["ts"] + 500 < expire["ts"] <= register_event["ts"] + 500 + 200 + 150
        assert (expire["ts"] - start - 100) % 200 < 150  # on a tick of start + 100 + k * 200
        close = next(e for e in events if e["type"] == "channel_close")
        assert close["broker_addr"] is None and close["seq"] == expire["seq"] + 1

    arun(body())


def test_internal_error_answers_system_error_and_serving_goes_on(tmp_path):
    async def body():
        async with running(tmp_path) as ctl:
            real = ctl.processor.process
            calls = []

            def flaky(cmd, conn, now):
                calls.append(cmd.code)
                if len(calls) == 1:
                    raise RuntimeError("bug")
                return real(cmd, conn, now)

            ctl.processor.process = flaky
            client = await RemotingClient.connect(ctl.host, ctl.port)
            answer = await client.get_broker_cluster_info()
            assert answer.code == ResponseCode.SYSTEM_ERROR and "bug" in answer.remark
            assert (await client.get_broker_cluster_info()).code == ResponseCode.SUCCESS
            await client.close()
        reasons = [e["reason"] for e in events_of(tmp_path) if e["type"] == "rejected"]
        assert reasons == ["internal_error"]

    arun(body())


def test_scan_ticks_are_aligned_to_ns_start():
    from nameserver.server.housekeeping import next_scan_tick

    # docs/nameserver-semantics.md §2.5: start + 5000, + 15000, ...; an entry expiring exactly on a
    # tick survives it (W17)
    assert [next_scan_tick(1000, 5000, 10000, t) for t in (0, 5999, 6000, 15999, 16000)] == [
        6000,
        6000,
        16000,
        16000,
        26000,
    ]


def test_event_log_failure_stops_the_server(tmp_path):
    from nameserver.eventlog.writer import EventLogError

    async def body():
        ctl = NameServerController("ns-t", tmp_path, NameServerConfig(listen="127.0.0.1:0"))
        await ctl.start()
        client = await RemotingClient.connect(ctl.host, ctl.port)
        assert (await client.get_broker_cluster_info()).code == ResponseCode.SUCCESS

        def broken(event):
            raise EventLogError("disk gone")

        ctl.writer.append = broken
        with pytest.raises(RemotingError):
            await register(client)  # the table changed but cannot be logged: no answer, no service
        await asyncio.wait_for(ctl.wait_stopped(), 10)
        assert isinstance(ctl.failure, EventLogError)
        await asyncio.wait_for(client.closed, 5)

    arun(body())
    assert "ns_stop" not in [e["type"] for e in events_of(tmp_path)]  # a crash, as the log sees it


# ---------------------------------------------------------------------- durability and shutdown


def test_a_refusal_event_holds_back_no_answer_but_a_change_does(tmp_path):
    async def body():
        ctl = NameServerController(
            "ns-t",
            tmp_path,
            NameServerConfig(listen="127.0.0.1:0"),
            EventLogConfig(durability="group", group_commit_ms=2000),
        )
        await ctl.start()
        client = await RemotingClient.connect(ctl.host, ctl.port)
        refused = await asyncio.wait_for(client.request(make_request(217, {})), 1)  # rejected/unknown_code
        looked_up = await asyncio.wait_for(client.get_route_info("TopicA"), 1)
        durable_then = ctl.writer.durable_seq
        assert ctl.writer.last_seq == 2 and durable_then < 2  # the refusal is logged, not yet fsynced
        registering = asyncio.ensure_future(register(client))
        await wait_for(lambda: ctl.writer.last_seq == 3)
        waits = asyncio.ensure_future(client.get_route_info("TopicA"))  # shows the registration
        await asyncio.sleep(0.3)
        assert not registering.done() and not waits.done()  # both wait for the fsync
        await registering
        assert (await waits).code == ResponseCode.SUCCESS
        await client.close()
        await ctl.shutdown("test end")
        return refused, looked_up

    refused, looked_up = arun(body())
    assert refused.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert looked_up.code == ResponseCode.TOPIC_NOT_EXIST


def test_answer_waits_for_durable_event_and_shutdown_finishes_it(tmp_path):
    async def body():
        ctl = NameServerController(
            "ns-t",
            tmp_path,
            NameServerConfig(listen="127.0.0.1:0"),
            EventLogConfig(durability="group", group_commit_ms=300),
        )
        await ctl.start()
        client = await RemotingClient.connect(ctl.host, ctl.port)
        pending = asyncio.ensure_future(register(client))
        await wait_for(lambda: ctl.writer.last_seq == 2)  # the register event is appended ...
        assert not pending.done() and ctl.writer.durable_seq < 2  # ... but not answered yet
        stop = asyncio.ensure_future(ctl.shutdown("SIGTERM"))
        await pending  # the in-flight request is answered during shutdown
        assert ctl.writer.durable_seq >= 2
        await stop
        await asyncio.wait_for(client.closed, 5)

    arun(body())
    events = events_of(tmp_path)
    assert [e["type"] for e in events] == ["ns_start", "register", "ns_stop"]  # no channel_close
    assert all(s.state == "closed" for s in list_segments(tmp_path, "ns-t"))


def test_shutdown_answers_every_request_already_received(tmp_path, monkeypatch):
    monkeypatch.setattr(channel_module, "MAX_FRAMES_PER_TURN", 5)

    async def body():
        ctl = NameServerController("ns-t", tmp_path, NameServerConfig(listen="127.0.0.1:0"))
        await ctl.start()
        conn = await RawConn.open(ctl)
        await conn.send(b"".join(encode_frame(make_request(106, opaque=i)) for i in range(100)))
        await wait_for(lambda: any(c.has_backlog for c in ctl.open_channels()), step=0)
        await ctl.shutdown("SIGTERM")  # mid-backlog: the rest is still handled and answered
        answers = [await conn.frame() for _ in range(100)]
        assert all(b'"code":0' in a for a in answers)
        assert await conn.closed_by_peer()

    arun(body())
    assert [e["type"] for e in events_of(tmp_path)] == ["ns_start", "ns_stop"]


# ------------------------------------------------------------ the process (docs/interfaces.md)


def start_server(
    events_dir: Path, ns_id: str, *args: str, config: Path | None = None
) -> tuple[subprocess.Popen, str, int]:
    """``python -m nameserver`` on 127.0.0.1:0; returns the process and the address of its ready line."""
    cmd = [
        sys.executable,
        "-m",
        "nameserver",
        "--ns-id",
        ns_id,
        "--listen",
        "127.0.0.1:0",
        "--events",
        str(events_dir),
        *args,
    ]
    if config is not None:
        cmd += ["--config", str(config)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    ready, _, _ = select.select([proc.stdout], [], [], 20)
    if not ready:
        proc.kill()
        raise AssertionError(f"no ready line: {proc.stderr.read()}")
    line = proc.stdout.readline().strip()
    prefix = f"nameserver {ns_id} listening on "
    assert line.startswith(prefix), (line, proc.stderr.read() if proc.poll() is not None else "")
    host, _, port = line[len(prefix) :].rpartition(":")
    return proc, host, int(port)


def stop_server(proc: subprocess.Popen, sig: int = signal.SIGTERM) -> int:
    proc.send_signal(sig)
    try:
        return proc.wait(15)
    finally:
        if proc.poll() is None:
            proc.kill()


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_process_ready_line_and_clean_stop(tmp_path, sig):
    proc, host, port = start_server(tmp_path, "ns-p")
    assert host == "127.0.0.1" and port > 0

    async def body():
        client = await RemotingClient.connect(host, port)
        await register(client)
        return client

    async def scenario():
        client = await body()
        assert stop_server(proc, sig) == 0
        await asyncio.wait_for(client.closed, 5)

    arun(scenario())
    events = events_of(tmp_path, "ns-p")
    assert [e["type"] for e in events] == ["ns_start", "register", "ns_stop"]  # broker still connected
    assert events[-1]["reason"] == signal.Signals(sig).name
    segments = list_segments(tmp_path, "ns-p")
    assert segments and all(s.state == "closed" for s in segments)
    assert not [p for p in Path(tmp_path).rglob("*.open")]
    assert "Traceback" not in proc.stderr.read()


@pytest.mark.slow
def test_process_crash_and_restart_continue_the_log(tmp_path):
    proc, host, port = start_server(tmp_path, "ns-k")

    async def register_once():
        client = await RemotingClient.connect(host, port)
        await register(client)
        client.abort()

    arun(register_once())
    time.sleep(0.2)
    proc.kill()  # SIGKILL: no ns_stop, the segment stays .open
    proc.wait(10)
    acked = events_of(tmp_path, "ns-k")
    assert [e["type"] for e in acked][:2] == ["ns_start", "register"]
    assert "ns_stop" not in [e["type"] for e in acked]
    proc2, host2, port2 = start_server(tmp_path, "ns-k")
    assert stop_server(proc2) == 0
    events = events_of(tmp_path, "ns-k")
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1))
    restart = events[len(acked)]
    assert restart["type"] == "ns_start" and events[-1]["type"] == "ns_stop"
    assert all(s.state == "closed" for s in list_segments(tmp_path, "ns-k"))


@pytest.mark.parametrize(
    "args, message",
    [
        (["--listen", "nope"], "--listen must be HOST:PORT"),
        (["--broker-expiry-ms", "0"], "--broker-expiry-ms: must be in 1..315360000000 (ten years), not 0"),
        (["--scan-interval-ms", "9" * 20], "--scan-interval-ms: must be in 1..315360000000 (ten years)"),
        (["--config", "/nonexistent/ns.toml"], "config file not found"),
    ],
)
def test_bad_flags_are_one_line_errors(tmp_path, args, message):
    cmd = [sys.executable, "-m", "nameserver", "--ns-id", "ns-x", "--events", str(tmp_path), *args]
    if "--listen" not in args:
        cmd += ["--listen", "127.0.0.1:0"]
    result = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_port_in_use_is_a_user_error(tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = subprocess.run(
            [
                sys.executable,
                "-m",
                "nameserver",
                "--ns-id",
                "ns-x",
                "--events",
                str(tmp_path),
                "--listen",
                f"127.0.0.1:{port}",
            ],
            capture_output=True,
            text=True,
            timeout=30,
        )
    assert result.returncode == 2 and "cannot start name server" in result.stderr
    assert "Traceback" not in result.stderr


def test_config_file_and_flags(tmp_path):
    config = tmp_path / "ns.toml"
    config.write_text(
        '[nameserver]\nbroker_expiry_ms = 7000\nscan_interval_ms = 3000\n[eventlog]\ndurability = "fsync"\n'
    )
    proc, host, port = start_server(tmp_path / "ev", "ns-c", "--scan-interval-ms", "2000", config=config)
    try:

        async def ask():
            client = await RemotingClient.connect(host, port)
            await register(client)
            text = (await client.get_namesrv_config()).body.decode()
            await client.close()
            return text

        text = arun(ask())
        assert "brokerExpiryMs=7000\n" in text and "scanIntervalMs=2000\n" in text
        assert f"listenPort={port}\n" in text
    finally:
        assert stop_server(proc) == 0
    start = events_of(tmp_path / "ev", "ns-c")[0]
    assert (start["broker_expiry_ms"], start["scan_interval_ms"]) == (7000, 2000)


def test_main_module_is_the_cli():
    result = subprocess.run([sys.executable, "-m", "nameserver", "--help"], capture_output=True, text=True, timeout=30)
    assert result.returncode == 0 and "--ns-id" in result.stdout
    assert os.path.exists(Path(__file__).resolve().parents[3] / "nameserver" / "__main__.py")
