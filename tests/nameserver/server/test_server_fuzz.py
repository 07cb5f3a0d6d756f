"""Fuzzing a running server with over 10,000 bad frames while a good client keeps being served.

Two kinds of bad input (docs/remoting-protocol.md §9):

* **refused requests** (§9.2): well-formed frames the server must answer with an error and log as
  ``rejected`` (unknown codes, missing or unparsable required fields, undecodable or
  CRC-mismatched REGISTER_BROKER bodies, negative versions, bad QUERY_DATA_VERSION bodies).
  Batched, many per connection.
* **malformed frames** (§9.1): bad lengths, header overruns, unknown serialize types, broken
  JSON or binary headers. Each closes its connection and is logged ``rejected``
  ``malformed_frame``; one connection each.

Plus truncated frames followed by end of stream, which are ordinary closes (no event). Afterwards
the log must hold exactly one ``rejected`` event per refusal, and the server must still be up.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
import time
from collections import Counter

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from nameserver.client import register_broker_request, route_request
from nameserver.codec import (
    REQUEST_HEADERS,
    FrameDecoder,
    RemotingCommand,
    RequestCode,
    SerializeType,
    body_crc32,
    encode_frame,
    encode_register_body,
)
from nameserver.eventlog.writer import read_events
from nameserver.model import DataVersion, TopicConfig
from nameserver.server.processor import SUPPORTED_CODES
from tests.nameserver.server.test_server import start_server, stop_server

GUARD_TOPIC = "FuzzGuardTopic-7f3a9c"
GUARD_ADDR = "10.250.250.250:10911"
EXAMPLES = 280
REFUSED_PER_BATCH = (30, 40)
MALFORMED_PER_BATCH = (7, 11)

# ---------------------------------------------------------------------- a blocking client


class SyncConn:
    """A blocking socket speaking frames, for the fuzzer's sequential batches."""

    def __init__(self, host: str, port: int) -> None:
        self.sock = socket.create_connection((host, port), timeout=10)
        self.decoder = FrameDecoder()

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def recv_commands(self, count: int) -> list[RemotingCommand]:
        out: list[RemotingCommand] = []
        while len(out) < count:
            out.extend(self.decoder)
            if len(out) >= count:
                break
            data = self.sock.recv(1 << 16)
            if not data:
                raise AssertionError(f"server closed after {len(out)} of {count} answers")
            self.decoder.feed(data)
        return out

    def close(self) -> None:
        self.sock.close()


def closed_by_server(host: str, port: int, data: bytes, half_close: bool = False, timeout: float = 5) -> None:
    """Send ``data`` on a fresh connection and wait until the server ends it."""
    with socket.create_connection((host, port), timeout=timeout) as sock:
        try:
            sock.sendall(data)
            if half_close:
                sock.shutdown(socket.SHUT_WR)
        except (BrokenPipeError, ConnectionResetError):
            return  # the server refused the frame while we were still sending it
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                if sock.recv(1 << 16) == b"":
                    return
            except ConnectionResetError:
                return
            except TimeoutError:
                break
        raise AssertionError(f"server kept the connection open after {data[:32].hex()}")


# ---------------------------------------------------------------------- refused requests (§9.2)

texts = st.text(max_size=12)
serialize_types = st.sampled_from([SerializeType.JSON, SerializeType.ROCKETMQ])
# flag bits 0 (response) and 1 (oneway) clear: every refused request gets an answer (§3.2)
flags = st.integers(0, 2**31 - 1).map(lambda f: f & ~3)
int16 = st.integers(-(2**15), 2**15 - 1)


def command(code, ext, body, version, flag, stype) -> RemotingCommand:
    return RemotingCommand(code, 0, version, 0, flag, None, ext, body or None, stype)


@st.composite
def unknown_code(draw):
    code = draw(int16.filter(lambda c: c not in SUPPORTED_CODES))
    ext = draw(st.dictionaries(texts, texts, max_size=3))
    return command(
        code, ext, draw(st.binary(max_size=24)), draw(st.integers(0, 500)), draw(flags), draw(serialize_types)
    )


def _valid_values(code: int) -> dict[str, str]:
    values = {}
    for field in REQUEST_HEADERS[code]:
        if field.required:
            values[field.name] = "0" if field.kind in ("int32", "int64") else f"v-{field.name}"
    return values


@st.composite
def missing_required(draw):
    code = draw(st.sampled_from(sorted(c for c, fields in REQUEST_HEADERS.items() if any(f.required for f in fields))))
    values = _valid_values(code)
    keep = draw(st.sets(st.sampled_from(sorted(values)), max_size=len(values) - 1))
    ext = {k: values[k] for k in keep}
    ext.update(draw(st.dictionaries(st.sampled_from(["x", "lo", "AccessKey", "bname"]), texts, max_size=2)))
    return command(code, ext, None, draw(st.integers(0, 500)), draw(flags), draw(serialize_types))


@st.composite
def unparsable_broker_id(draw):
    code = draw(
        st.sampled_from([RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER, RequestCode.QUERY_DATA_VERSION])
    )
    ext = _valid_values(code)
    ext["brokerId"] = draw(
        st.one_of(
            st.text(min_size=1, max_size=8).filter(lambda t: not t.strip("+-").isdigit() or not t.isascii()),
            st.integers(2**63, 2**70).map(str),
        )
    )
    return command(code, ext, None, 407, draw(flags), draw(serialize_types))


def _register_ext(**overrides) -> dict[str, str]:
    ext = {
        "brokerName": "fuzz-broker",
        "brokerAddr": "10.251.0.1:10911",
        "clusterName": "FuzzCluster",
        "haServerAddr": "10.251.0.1:10912",
        "brokerId": "0",
    }
    ext.update(overrides)
    return ext


@st.composite
def bad_register_body(draw):
    compressed = draw(st.booleans())
    body = (b"\x00" if compressed else b"[") + draw(st.binary(max_size=40))
    ext = _register_ext(compressed="true" if compressed else "false")
    return command(103, ext, body, draw(st.integers(0, 32767)), draw(flags), draw(serialize_types))


@st.composite
def crc_mismatch(draw):
    topics = [TopicConfig(f"Fz{draw(st.integers(0, 99))}", 4, 4)]
    compressed = draw(st.booleans())
    body = encode_register_body(DataVersion(1, 1), topics, compressed=compressed)
    crc = draw(st.integers(-(2**31), 2**31 - 1).filter(lambda c: c not in (0, body_crc32(body))))
    ext = _register_ext(compressed=str(compressed).lower(), bodyCrc32=str(crc))
    return command(103, ext, body, 407, draw(flags), draw(serialize_types))


@st.composite
def negative_version(draw):
    body = encode_register_body(DataVersion(1, 1), [TopicConfig("FzNeg", 4, 4)])
    stype = draw(serialize_types)
    low = -(2**15) if stype == SerializeType.ROCKETMQ else -(2**31)
    return command(103, _register_ext(), body, draw(st.integers(low, -1)), draw(flags), stype)


@st.composite
def bad_data_version_body(draw):
    body = draw(st.one_of(st.just(b""), st.binary(max_size=30).map(lambda b: b"[" + b)))
    return command(322, _valid_values(322), body, 407, draw(flags), draw(serialize_types))


refused_requests = st.one_of(
    unknown_code(),
    missing_required(),
    unparsable_broker_id(),
    bad_register_body(),
    crc_mismatch(),
    negative_version(),
    bad_data_version_body(),
)

# ---------------------------------------------------------------------- malformed frames (§9.1)

U32 = struct.Struct(">I")
tails = st.binary(max_size=24)


def prefix(length: int, stype: int, header_length: int) -> bytes:
    return U32.pack(length) + U32.pack((stype << 24) | header_length)


@st.composite
def bad_length(draw):  # random bytes whose length field is < 4 or over 16 MiB
    length = draw(st.one_of(st.integers(0, 3), st.integers(16_777_213, 2**32 - 1)))
    return U32.pack(length) + draw(tails)


@st.composite
def header_overrun(draw):
    length = draw(st.integers(4, 64))
    header_length = draw(st.integers(length - 3, 0xFFFFFF))
    return prefix(length, draw(st.sampled_from([0, 1])), header_length) + draw(st.binary(max_size=length - 4))


@st.composite
def unknown_serialize_type(draw):
    header = draw(st.binary(max_size=40))
    return prefix(4 + len(header), draw(st.integers(2, 255)), len(header)) + header


def json_text(value) -> bytes:
    """Compact JSON of any value, integers beyond 64 bits included."""
    return json.dumps(value, separators=(",", ":")).encode()


def json_header_frame(header: bytes, body: bytes = b"") -> bytes:
    return prefix(4 + len(header) + len(body), 0, len(header)) + header + body


@st.composite
def json_not_json(draw):  # starts with '{' and ends with ',': never valid JSON
    return json_header_frame(b"{" + draw(st.binary(max_size=40)) + b",")


json_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(max_size=8),
)


@st.composite
def json_not_object(draw):
    value = draw(st.one_of(json_scalars, st.lists(json_scalars, max_size=4)))
    return json_header_frame(json_text(value))


@st.composite
def json_wrong_field(draw):
    header = {"code": 105, "flag": 0, "language": "JAVA", "opaque": 1, "version": 407, "extFields": {"topic": "T"}}
    if draw(st.booleans()):
        bad = draw(
            st.one_of(
                st.text(max_size=5),
                st.booleans(),
                st.floats(allow_nan=False, allow_infinity=False),
                st.lists(st.integers(), max_size=2),
                st.integers(2**31, 2**60),
                st.integers(-(2**60), -(2**31) - 1),
            )
        )
        header[draw(st.sampled_from(["code", "flag", "opaque", "version"]))] = bad
    elif draw(st.booleans()):
        header["extFields"] = draw(
            st.one_of(st.text(max_size=5), st.integers(), st.lists(st.text(), max_size=2), st.booleans())
        )
    else:
        header["extFields"]["nested"] = draw(
            st.one_of(st.dictionaries(texts, texts, max_size=2), st.lists(texts, max_size=2))
        )
    return json_header_frame(json_text(header))


RMQ_FIXED = struct.Struct(">hBhiii")


@st.composite
def rocketmq_bad_header(draw):
    def fixed(remark_length):
        return RMQ_FIXED.pack(105, 0, 407, 1, 0, remark_length)

    kind = draw(
        st.sampled_from(
            ["short", "remark_negative", "remark_overrun", "ext_negative", "ext_overrun", "entry_overrun", "leftover"]
        )
    )
    if kind == "short":
        header = draw(st.binary(max_size=20))
    elif kind == "remark_negative":
        header = fixed(draw(st.integers(-(2**31), -1))) + U32.pack(0)
    elif kind == "remark_overrun":
        remark = draw(st.binary(max_size=10))
        header = fixed(len(remark) + draw(st.integers(1, 1000))) + remark + U32.pack(0)
    elif kind == "ext_negative":
        header = fixed(0) + struct.pack(">i", draw(st.integers(-(2**31), -1)))
    elif kind == "ext_overrun":
        ext = draw(st.binary(max_size=10))
        header = fixed(0) + struct.pack(">i", len(ext) + draw(st.integers(1, 1000))) + ext
    elif kind == "entry_overrun":
        ext = struct.pack(">h", draw(st.integers(5, 200))) + b"abcd"
        header = fixed(0) + struct.pack(">i", len(ext)) + ext
    else:
        header = fixed(0) + U32.pack(0) + draw(st.binary(min_size=1, max_size=10))
    return prefix(4 + len(header), 1, len(header)) + header


malformed_frames = st.one_of(
    bad_length(),
    header_overrun(),
    unknown_serialize_type(),
    json_not_json(),
    json_not_object(),
    json_wrong_field(),
    rocketmq_bad_header(),
)


@st.composite
def truncated_frame(draw):
    frame = encode_frame(route_request("T", serialize_type=draw(serialize_types)))
    return frame[: draw(st.integers(1, len(frame) - 1))]


# ---------------------------------------------------------------------- the good client


class Guard(threading.Thread):
    """A well-formed client asking for its route and the cluster info, checking exact answers."""

    def __init__(self, host: str, port: int, expected_route: bytes, expected_cluster: bytes) -> None:
        super().__init__(daemon=True)
        self.conn = SyncConn(host, port)
        self.expected = {105: expected_route, 106: expected_cluster}
        self.stop_flag = threading.Event()
        self.answers = 0
        self.failures: list[str] = []

    def run(self) -> None:
        opaque = 0
        while not self.stop_flag.is_set():
            code = 105 if opaque % 2 == 0 else 106
            opaque += 1
            cmd = route_request(GUARD_TOPIC) if code == 105 else RemotingCommand(106, 0, 407, 0, 0)
            cmd.opaque = opaque
            try:
                self.conn.send(encode_frame(cmd))
                (answer,) = self.conn.recv_commands(1)
            except Exception as exc:  # noqa: BLE001 - recorded, asserted by the test
                self.failures.append(f"{type(exc).__name__}: {exc}")
                return
            if answer.opaque != opaque or answer.code != 0 or answer.body != self.expected[code]:
                self.failures.append(f"wrong answer to {code}: {answer}")
            self.answers += 1
            time.sleep(0.003)


# ---------------------------------------------------------------------- the test


@pytest.mark.slow
def test_fuzzed_frames_are_refused_logged_and_survived(tmp_path):
    proc, host, port = start_server(tmp_path, "ns-fuzz")
    try:
        broker = SyncConn(host, port)  # stays open: the guard's broker must not leave
        broker.send(
            encode_frame(
                register_broker_request(
                    "GuardCluster",
                    GUARD_ADDR,
                    "guard-broker",
                    0,
                    "10.250.250.250:10912",
                    DataVersion(1, 1),
                    [TopicConfig(GUARD_TOPIC, 8, 8)],
                )
            )
        )
        assert broker.recv_commands(1)[0].code == 0
        probe = SyncConn(host, port)
        probe.send(encode_frame(route_request(GUARD_TOPIC)) + encode_frame(RemotingCommand(106, 0, 407, 1, 0)))
        route_answer, cluster_answer = probe.recv_commands(2)
        probe.close()
        guard = Guard(host, port, route_answer.body, cluster_answer.body)
        guard.start()
        sent = Counter()

        @settings(
            max_examples=EXAMPLES,
            deadline=None,
            database=None,
            phases=[Phase.generate],
            suppress_health_check=list(HealthCheck),
        )
        @given(
            refused=st.lists(refused_requests, min_size=REFUSED_PER_BATCH[0], max_size=REFUSED_PER_BATCH[1]),
            malformed=st.lists(malformed_frames, min_size=MALFORMED_PER_BATCH[0], max_size=MALFORMED_PER_BATCH[1]),
            truncated=st.lists(truncated_frame(), max_size=1),
        )
        def one_batch(refused, malformed, truncated):
            conn = SyncConn(host, port)
            for opaque, cmd in enumerate(refused, start=1):
                cmd.opaque = opaque
            conn.send(b"".join(encode_frame(cmd) for cmd in refused))
            answers = conn.recv_commands(len(refused))
            conn.close()
            by_opaque = {a.opaque: a for a in answers}
            for cmd in refused:
                answer = by_opaque[cmd.opaque]
                expected = 3 if cmd.code not in SUPPORTED_CODES else 1
                assert answer.code == expected, (cmd, answer)
                assert answer.serialize_type == cmd.serialize_type and answer.flag == 1
            sent["refused"] += len(refused)
            for frame in malformed:
                closed_by_server(host, port, frame)
            sent["malformed"] += len(malformed)
            for frame in truncated:
                closed_by_server(host, port, frame, half_close=True)
            sent["truncated"] += len(truncated)

        one_batch()
        guard.stop_flag.set()
        guard.join(10)
        assert sent["refused"] + sent["malformed"] >= 10_000, sent
        assert guard.failures == [] and guard.answers > 100, (guard.failures[:3], guard.answers)
        assert proc.poll() is None  # still up
        # every refusal is in the log, exactly once
        deadline, logged = time.monotonic() + 10, sent["refused"] + sent["malformed"]
        while True:
            events = list(read_events(tmp_path, "ns-fuzz"))
            reasons = Counter(e["reason"] for e in events if e["type"] == "rejected")
            if sum(reasons.values()) >= logged or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        assert reasons["malformed_frame"] == sent["malformed"], (reasons, sent)
        assert sum(reasons.values()) - reasons["malformed_frame"] == sent["refused"], (reasons, sent)
        assert set(reasons) <= {"malformed_frame", "unknown_code", "bad_header", "bad_body", "crc_mismatch"}
        assert [e["broker_addr"] for e in events if e["type"] in ("register", "heartbeat")] == [GUARD_ADDR]
        assert not [e for e in events if e["type"] in ("unregister", "expire", "delete_topic", "wipe_write_perm")]
        print(
            f"fuzz: {sent['refused']} refused + {sent['malformed']} malformed + {sent['truncated']} truncated "
            f"frames; guard {guard.answers} answers"
        )
        broker.close()
    finally:
        assert stop_server(proc) == 0
