"""The codec's shortcuts give exactly what the full path gives.

``ResponseFrame`` (an answer encoded once, the opaque filled in per request) against
``encode_frame``; ``HeaderMemo`` (JSON headers decoded once, recalled when only the opaque's
digits differ) against a decoder without one, including headers built to fool it;
``FrameDecoder.answer_known`` (requests seen before answered from their bytes) against decoding
them and encoding their answers.
"""

from __future__ import annotations

import contextlib
import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nameserver.codec import (
    FrameDecoder,
    HeaderMemo,
    LanguageCode,
    MalformedFrame,
    RemotingCommand,
    ResponseFrame,
    SerializeType,
    encode_frame,
    make_response,
)

JSON, ROCKETMQ = SerializeType.JSON, SerializeType.ROCKETMQ
_int32 = st.integers(-(2**31), 2**31 - 1)
_int16 = st.integers(-(2**15), 2**15 - 1)
_text = st.text(max_size=20)
_ext = st.none() | st.dictionaries(_text, _text, max_size=4)
_body = st.none() | st.binary(min_size=1, max_size=64)
_responses = st.builds(
    RemotingCommand,
    code=_int16,
    language=st.sampled_from(list(LanguageCode)),
    version=_int16,
    opaque=_int32,
    flag=_int32,
    remark=st.none() | _text,
    ext_fields=_ext,
    body=_body,
    serialize_type=st.sampled_from([JSON, ROCKETMQ]),
)


def frame(header: bytes, body: bytes = b"") -> bytes:
    """A JSON-header frame from raw header bytes (docs/remoting-protocol.md §2)."""
    return (4 + len(header) + len(body)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header + body


def decode_all(data: bytes, memo: HeaderMemo | None) -> list:
    """Commands, then the error if any, of a stream."""
    decoder = FrameDecoder(memo=memo)
    out: list = []
    try:
        decoder.feed(data)
        out.extend(decoder)
    except MalformedFrame as exc:
        out.append((exc.reason, exc.decoded_so_far, exc.detail))
    return out


# ---------------------------------------------------------------------- ResponseFrame


@given(_responses, st.lists(_int32, min_size=1, max_size=4))
def test_response_frame_is_encode_frame_for_every_opaque(cmd, opaques):
    encoded = ResponseFrame(cmd)
    for opaque in opaques:
        assert encoded.frame(opaque) == encode_frame(dataclasses.replace(cmd, opaque=opaque))


@pytest.mark.parametrize("opaque", [0, 9, 10, -9, -10, 2**31 - 1, -(2**31)])
def test_response_frame_every_digit_count(opaque):
    cmd = RemotingCommand(0, flag=1, body=b'{"x":1}')
    encoded = ResponseFrame(cmd)
    for other in (opaque, 1, opaque):  # each length prefix is made once and reused
        assert encoded.frame(other) == encode_frame(dataclasses.replace(cmd, opaque=other))


def test_response_frame_refuses_what_encode_frame_refuses():
    with pytest.raises(ValueError):
        # an int16 code (docs/remoting-protocol.md §5)
        ResponseFrame(RemotingCommand(40_000, serialize_type=ROCKETMQ))
    with pytest.raises(ValueError):
        ResponseFrame(RemotingCommand(0, body=b"x" * (16 * 1024 * 1024 - 80)))  # over 16 MiB with a long opaque
    encoded = ResponseFrame(RemotingCommand(0))
    for opaque in (2**31, -(2**31) - 1):
        with pytest.raises(ValueError):
            encoded.frame(opaque)


# ---------------------------------------------------------------------- HeaderMemo

LOOKUP = (
    b'{"code":105,"extFields":{"topic":"TopicA"},"flag":0,"language":"JAVA","opaque":%s,'
    b'"serializeTypeCurrentRPC":"JSON","version":407}'
)


def test_memo_recalls_a_header_that_differs_only_in_the_opaque():
    memo = HeaderMemo()
    stream = b"".join(frame(LOOKUP % digits) for digits in (b"1", b"22", b"-7", b"2147483647", b"0"))
    decoded = decode_all(stream, memo)
    assert decoded == decode_all(stream, None)
    assert [cmd.opaque for cmd in decoded] == [1, 22, -7, 2**31 - 1, 0]
    assert len(memo) == 1
    decoded[1].ext_fields["topic"] = "changed"  # each command has its own extFields, recalled or not
    decoded[0].ext_fields["topic"] = "changed"
    assert decode_all(frame(LOOKUP % b"3"), memo)[0].ext_fields == {"topic": "TopicA"}


def test_memo_keeps_no_header_of_a_request_with_a_body():
    # a registration's header names its body's CRC: it changes with the body, so it is not kept
    memo = HeaderMemo()
    stream = b"".join(frame(LOOKUP % digits, b"{}") for digits in (b"1", b"2"))
    assert decode_all(stream, memo) == decode_all(stream, None)
    assert len(memo) == 0


# Headers that look alike but for the opaque's digits where the memo must not be fooled: the
# digits that change are not the opaque (duplicates, nested, escaped keys), the new digits are
# not a valid int32, or the JSON is not what the pattern expects. Each "%s" is filled with two
# different digit strings, the first decoded (and maybe kept), the second possibly recalled.
TRICKS = [
    b'{"code":105,"opaque":%s,"opaque":5}',
    b'{"code":105,"opaque":5,"opaque":%s}',
    b'{"code":105,"extFields":{"opaque":%s},"opaque":5}',
    b'{"code":105,"extFields":{"opaque":%s}}',
    b'{"code":105,"more":{"opaque":%s}}',
    b'{"code":105,"extFields":{"opaque":"x"},"opaque":%s}',
    b'{"op\\u0061que":5,"extFields":{"opaque":%s}}',
    b'{"code":105,"opaque":%s,"remark":"\\"opaque\\":1"}',
    b'{"code":105,"remark":"\\"opaque\\":%s,","opaque":5}',
    b'{"code":105,"opaque":%s}',
    b'{"code":105,"opaque":%s }',
    b'{"code":105,"opaque": %s}',
    b'{"code":"105","flag":1.5,"opaque":%s}',
    b'{"code":105,"extFields":{"a":1,"b":null},"opaque":%s}',
    b'{"code":105,"extFields":[],"opaque":%s}',
    b'{"code":105,"language":"GO","remark":7,"opaque":%s,"version":2147483648}',
    b'[{"opaque":%s}]',
]
DIGITS = [
    b"5",
    b"6",
    b"0",
    b"-0",
    b"007",
    b"12",
    b"2147483647",
    b"2147483648",
    b"-2147483649",
    b"99999999999",
    b"1.0",
    b"1e2",
    b"",
]


@pytest.mark.parametrize("header", TRICKS)
def test_memo_is_never_fooled(header):
    for first in DIGITS:
        for second in DIGITS:
            memo = HeaderMemo()
            stream = frame(header % first) + frame(header % second)
            assert decode_all(stream, memo) == decode_all(stream, None), (first, second)


@given(
    st.lists(
        st.tuples(
            st.sampled_from([105, 103, 34]),
            st.sampled_from(["TopicA", "Topic\u00e9", 'T"q']),
            st.sampled_from(list(LanguageCode)),
            _int32,
            st.none() | _text,
        ),
        min_size=1,
        max_size=8,
    ),
    st.integers(1, 3),
)
def test_memo_decodes_like_no_memo(requests, bound):
    stream = b"".join(
        encode_frame(RemotingCommand(code, language, 407, opaque, 0, remark, {"topic": topic}))
        for code, topic, language, opaque, remark in requests
    )
    assert decode_all(stream, HeaderMemo(max_entries=bound)) == decode_all(stream, None)


def test_memo_is_bounded():
    memo = HeaderMemo(max_entries=2, max_header_bytes=200)
    lookups = [frame(LOOKUP.replace(b"TopicA", b"T%d" % i) % b"1") for i in range(3)]
    decode_all(lookups[0] + lookups[0] + lookups[1], memo)
    assert len(memo) == 2
    decode_all(lookups[2], memo)
    assert len(memo) == 1  # emptied when full, then the third kept
    memo = HeaderMemo(max_header_bytes=200)
    decode_all(frame(LOOKUP.replace(b"TopicA", b"T" * 200) % b"1"), memo)
    assert len(memo) == 0  # too long to keep


def test_memo_stands_aside_when_it_keeps_more_than_it_recalls():
    memo = HeaderMemo(max_entries=2)
    lookups = [frame(LOOKUP.replace(b"TopicA", b"T%d" % i) % b"1") for i in range(3)]
    decode_all(b"".join(lookups), memo)  # full at the third, nothing recalled: emptied, aside for 8
    assert len(memo) == 1
    for _ in range(8):
        assert decode_all(lookups[0], memo) == decode_all(lookups[0], None)
        assert len(memo) == 1  # not kept while aside
    decode_all(lookups[0], memo)
    assert len(memo) == 2


# ---------------------------------------------------------------------- FrameDecoder.answer_known


def answer_to(cmd: RemotingCommand) -> RemotingCommand:
    """An answer that depends on every field of the request but its opaque (as a lookup's does on
    the ones it reads), so an answer given for the wrong request shows."""
    fields = dataclasses.replace(cmd, opaque=0, body=None)
    return make_response(cmd, 0, body=repr(fields).encode())


def known_from(data: bytes) -> dict:
    """What a server would keep after answering the frames of ``data`` the full way."""
    decoder = FrameDecoder(memo=HeaderMemo())
    decoder.feed(data)
    known: dict = {}
    with contextlib.suppress(MalformedFrame):  # a malformed frame is not answered: nothing kept
        while (cmd := decoder.next_command()) is not None:
            if decoder.last_key is not None:
                known[decoder.last_key] = ResponseFrame(answer_to(cmd)).splice_parts()
    return known


def answered_known(
    data: bytes, known: dict, max_frames: int = 1000, max_bytes: int = 1 << 30
) -> tuple[int, bytes, FrameDecoder]:
    decoder = FrameDecoder(memo=HeaderMemo())
    decoder.feed(data)
    out: list[bytes] = []
    count, added = decoder.answer_known(known, out, max_frames, max_bytes)
    assert added == len(b"".join(out))
    return count, b"".join(out), decoder


def check_known_answers(seen: bytes, stream: bytes) -> int:
    """The frames of ``stream`` answer_known answers (after ``seen`` was answered the full way)
    get exactly the full path's answers, and the full decoder reads the rest as it would have."""
    count, answers, decoder = answered_known(stream, known_from(seen))
    full = decode_all(stream, None)
    expected = b"".join(encode_frame(answer_to(cmd)) for cmd in full[:count])
    assert all(isinstance(cmd, RemotingCommand) for cmd in full[:count])  # none of them malformed
    assert answers == expected
    rest: list = []
    try:
        rest.extend(decoder)
    except MalformedFrame as exc:
        rest.append((exc.reason, exc.decoded_so_far, exc.detail))
    assert rest == full[count:]
    return count


def test_answer_known_answers_requests_seen_before_as_the_full_path():
    lookups = [
        RemotingCommand(105, LanguageCode.JAVA, version, 1, 0, None, ext, None, serialize_type)
        for version in (317, 400, 407)
        for serialize_type in (JSON, ROCKETMQ)
        for ext in (
            {"topic": "TopicA"},
            {"topic": "TopicA", "acceptStandardJsonOnly": "true"},
            {"topic": "Topic\u00e9"},
        )
    ]
    seen = b"".join(encode_frame(cmd) for cmd in lookups)
    opaques = [0, 7, -1, 10, 2**31 - 1, -(2**31), 123456]
    stream = b"".join(encode_frame(dataclasses.replace(cmd, opaque=opaque)) for opaque in opaques for cmd in lookups)
    assert check_known_answers(seen, stream) == len(opaques) * len(lookups)
    # after a request never seen (another topic), the decoder reads on the full way
    other = encode_frame(dataclasses.replace(lookups[0], ext_fields={"topic": "TopicB"}))
    assert check_known_answers(seen, other + stream) == 0
    assert check_known_answers(seen, stream[:-1]) == len(opaques) * len(lookups) - 1  # the last incomplete


def test_answer_known_stops_at_a_body_an_incomplete_frame_and_its_limits():
    seen = encode_frame(RemotingCommand(105, ext_fields={"topic": "TopicA"}))
    again = encode_frame(RemotingCommand(105, opaque=5, ext_fields={"topic": "TopicA"}))
    with_body = encode_frame(RemotingCommand(105, opaque=6, ext_fields={"topic": "TopicA"}, body=b"x"))
    assert check_known_answers(seen, again + with_body + again) == 1
    assert check_known_answers(seen, again[:-1]) == 0
    known = known_from(seen)
    count, _, decoder = answered_known(again * 5, known, max_frames=3)
    assert count == 3 and decoder.buffered == 2 * len(again)
    count, _, decoder = answered_known(again * 5, known, max_bytes=1)
    assert count == 1 and decoder.buffered == 4 * len(again)


@pytest.mark.parametrize("header", TRICKS + [LOOKUP])
def test_answer_known_is_never_fooled(header):
    """Headers built to fool the JSON key (see TRICKS): a frame is answered only when the full
    decoder reads it as the request seen before, but for the opaque; never a malformed one."""
    for first in DIGITS:
        for second in DIGITS:
            check_known_answers(frame(header % first), frame(header % second) + frame(header % first))
    assert check_known_answers(frame(LOOKUP % b"1"), frame(LOOKUP % b"22")) == 1


_lookups = st.builds(
    RemotingCommand,
    code=st.sampled_from([105, 34]),
    language=st.sampled_from(list(LanguageCode)),
    version=_int16,
    opaque=_int32,
    flag=st.sampled_from([0, 1, 2]),
    remark=st.none() | _text,
    ext_fields=st.none()
    | st.dictionaries(st.sampled_from(["topic", "acceptStandardJsonOnly", "x"]), _text, max_size=3),
    serialize_type=st.sampled_from([JSON, ROCKETMQ]),
)


@given(
    st.lists(_lookups, min_size=1, max_size=4),
    st.lists(st.tuples(st.integers(0, 3), _int32), max_size=8),
    st.binary(max_size=12),
)
def test_answer_known_answers_like_the_full_path(requests, picks, junk):
    seen = b"".join(encode_frame(cmd) for cmd in requests)
    stream = (
        b"".join(encode_frame(dataclasses.replace(requests[i % len(requests)], opaque=opaque)) for i, opaque in picks)
        + junk
    )
    check_known_answers(seen, stream)


def test_last_key_is_kept_only_when_exact():
    decoder = FrameDecoder(memo=HeaderMemo())
    decoder.feed(
        frame(LOOKUP % b"1")
        + frame(TRICKS[0] % b"1")
        + frame(LOOKUP % b"2", b"x")
        + encode_frame(RemotingCommand(105, opaque=3, serialize_type=ROCKETMQ))
    )
    keys = [(cmd.opaque, decoder.last_key) for cmd in decoder]
    assert keys[0][1] == tuple(LOOKUP.split(b'"opaque":%s'))  # the header around the opaque
    assert keys[1][1] is None and keys[2][1] is None  # "opaque" twice; a body
    assert keys[3][1] is not None and keys[3][1][:1] == b"\x01"  # ROCKETMQ: the serialize type leads
    assert FrameDecoder().last_key is None
