"""Route lookups a connection sends again and again, answered from their bytes on a real socket.

A channel answers a lookup it has seen before (same header but for the opaque, same table
revision) without decoding it (``FrameDecoder.answer_known``): these tests send many lookups in
one write and check every answer against the full path (a fresh processor over the same
tables), across both header serializations, old and new request versions, table changes and
unknown topics; and that a malformed frame among them, or a request that changes the tables,
is handled as it would be without the shortcut.
"""

from __future__ import annotations

import dataclasses

import pytest

from nameserver.client import RemotingClient, register_broker_request
from nameserver.codec import FrameDecoder, RemotingCommand, encode_frame, make_request
from nameserver.server.processor import ConnectionContext, RequestProcessor
from tests.nameserver.codec.test_codec_shortcuts import frame
from tests.nameserver.server.test_server import JSON, ROCKETMQ, A, M, RawConn, arun, dv1, events_of, register, running

B = "10.0.0.2:10911"

# every flavour of GET_ROUTEINFO_BY_TOPIC whose answer differs: header type, the version that
# switches the route's JSON form (docs/remoting-protocol.md §10.3) or the flag asking for the
# standard form; and a topic that has no route (TOPIC_NOT_EXIST, never cached)
LOOKUPS = [
    make_request(105, ext, version=version, serialize_type=serialize_type)
    for serialize_type in (JSON, ROCKETMQ)
    for version in (317, 400, 407)
    for ext in ({"topic": "TopicA"}, {"topic": "TopicA", "acceptStandardJsonOnly": "true"}, {"topic": "NoSuchTopic"})
]


def full_path_answer(ctl, cmd: RemotingCommand) -> bytes:
    """What the ordinary path gives for ``cmd`` now: a fresh processor (no cache) over the tables."""
    outcome = RequestProcessor(ctl.routes).process(cmd, ConnectionContext("c0", "127.0.0.1:1"), 0)
    return encode_frame(outcome.response)


def decoded(answer: bytes) -> RemotingCommand:
    decoder = FrameDecoder()
    decoder.feed(answer)
    return decoder.next_command()


def body(answer: bytes) -> bytes | None:
    return decoded(answer).body


async def lookup_batch(ctl, conn: RawConn, first_opaque: int) -> list[tuple[bytes, bytes]]:
    """Every LOOKUP in one write; (answer, the full path's answer) for each, in order."""
    requests = [dataclasses.replace(cmd, opaque=first_opaque + i) for i, cmd in enumerate(LOOKUPS)]
    await conn.send(b"".join(encode_frame(cmd) for cmd in requests))
    answers = [await conn.frame() for _ in requests]
    return list(zip(answers, [full_path_answer(ctl, cmd) for cmd in requests], strict=True))


def test_pipelined_lookups_answer_as_the_full_path_before_and_after_a_table_change(tmp_path):
    async def run():
        async with running(tmp_path) as ctl:
            broker = await RemotingClient.connect(ctl.host, ctl.port)
            await register(broker)
            conn = await RawConn.open(ctl)
            calls = []  # the lookups that came the full way: decoded and handed to the controller
            answers = ctl.processor.route_answers
            frame = answers.frame

            def counted(cmd, key=None):
                if cmd.code == 105:
                    calls.append(cmd)
                return frame(cmd, key)

            answers.frame = counted
            before = await lookup_batch(ctl, conn, 1)
            assert len(calls) == len(LOOKUPS)  # the first time, each is decoded and handled
            for opaque in (100, 2**31 - len(LOOKUPS), -(2**31), 0):
                calls.clear()
                again = await lookup_batch(ctl, conn, opaque)
                assert all(answer == expected for answer, expected in again)
                # only the unknown topic (never cached) came the full way
                assert {cmd.ext_fields["topic"] for cmd in calls} == {"NoSuchTopic"}
            assert all(answer == expected for answer, expected in before)
            # a second broker for TopicA: a new revision, every known answer is dropped
            await register(broker, B, "broker-b")
            calls.clear()
            after = await lookup_batch(ctl, conn, 500)
            assert all(answer == expected for answer, expected in after)
            assert len(calls) == len(LOOKUPS)
            changed = [
                i for i, ((old, _), (new, _)) in enumerate(zip(before, after, strict=True)) if body(old) != body(new)
            ]
            assert changed == [i for i, cmd in enumerate(LOOKUPS) if cmd.ext_fields["topic"] == "TopicA"]
            conn.close()
            await broker.close()

    arun(run())


@pytest.mark.parametrize("addr, name", [(M, "broker-a"), (B, "broker-b")], ids=["same-route", "new-route"])
def test_a_registration_in_the_same_read_is_answered_first_and_seen_by_the_lookups_after_it(tmp_path, addr, name):
    """Lookup, registration, lookup in one write: the answers keep their order (the
    registration's waits for its event's fsync, and the lookup after it waits behind it, even
    when the route stays the same), and the second lookup shows the registration."""

    async def run():
        async with running(tmp_path) as ctl:
            broker = await RemotingClient.connect(ctl.host, ctl.port)
            await register(broker)
            conn = await RawConn.open(ctl)
            lookup = make_request(105, {"topic": "TopicA"})
            await lookup_batch(ctl, conn, 1)  # known from now on
            before = full_path_answer(ctl, dataclasses.replace(lookup, opaque=2))
            registration = register_broker_request("C1", addr, name, 0, addr.replace("10911", "10912"), dv1, [A])
            registration.opaque = 3
            await conn.send(
                encode_frame(dataclasses.replace(lookup, opaque=2))
                + encode_frame(registration)
                + encode_frame(dataclasses.replace(lookup, opaque=4))
            )
            answers = [await conn.frame() for _ in range(3)]
            assert [decoded(answer).opaque for answer in answers] == [2, 3, 4]
            assert decoded(answers[1]).code == 0
            assert answers[0] == before
            assert answers[2] == full_path_answer(ctl, dataclasses.replace(lookup, opaque=4))
            assert (body(answers[2]) == body(before)) == (name == "broker-a")
            conn.close()
            await broker.close()

    arun(run())


@pytest.mark.parametrize(
    "bad",
    [
        # the known header with an opaque outside int32: refused by the decoder
        # (docs/remoting-protocol.md §9.1)
        frame(
            encode_frame(make_request(105, {"topic": "TopicA"}, opaque=1))[8:].replace(
                b'"opaque":1,', b'"opaque":2147483648,'
            )
        ),
        bytes.fromhex("00000006020000027b7d"),  # an unknown serialize type (D5d)
    ],
    ids=["opaque-out-of-range", "unknown-serialize-type"],
)
def test_a_malformed_frame_among_known_lookups_closes_only_its_connection(tmp_path, bad):
    async def run():
        async with running(tmp_path) as ctl:
            broker = await RemotingClient.connect(ctl.host, ctl.port)
            await register(broker)
            conn, other = await RawConn.open(ctl), await RawConn.open(ctl)
            lookup = make_request(105, {"topic": "TopicA"})
            await lookup_batch(ctl, conn, 1)
            await conn.send(
                b"".join(encode_frame(dataclasses.replace(lookup, opaque=i)) for i in (20, 21))
                + bad
                + encode_frame(dataclasses.replace(lookup, opaque=22))
            )
            answers = [await conn.frame() for _ in range(2)]
            assert answers == [full_path_answer(ctl, dataclasses.replace(lookup, opaque=i)) for i in (20, 21)]
            assert await conn.closed_by_peer()
            # the other connection, and the broker's, go on
            await other.send(encode_frame(dataclasses.replace(lookup, opaque=30)))
            assert await other.frame() == full_path_answer(ctl, dataclasses.replace(lookup, opaque=30))
            assert await broker.route("TopicA") is not None
            other.close()
            await broker.close()
        rejected = [e for e in events_of(tmp_path) if e["type"] == "rejected"]
        assert [e["reason"] for e in rejected] == ["malformed_frame"]

    arun(run())
