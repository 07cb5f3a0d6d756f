"""The codec's shortcuts give exactly what the full path gives.

``ResponseFrame`` (an answer encoded once, the opaque filled in per request) against
``encode_frame``; ``HeaderMemo`` (JSON headers decoded once, recalled when only the opaque's
digits differ) against a decoder without one, including headers built to fool it.
"""

from __future__ import annotations

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
)

JSON, ROCKETMQ = SerializeType.JSON, SerializeType.ROCKETMQ
_int32 = st.integers(-(2**31), 2**31 - 1)
_int16 = st.integers(-(2**15), 2**15 - 1)
_text = st.text(max_size=20)
_ext = st.none() | st.dictionaries(_text, _text, max_size=4)
_body = st.none() | st.binary(min_size=1, max_size=64)
_responses = st.builds(
    RemotingCommand, code=_int16, language=st.sampled_from(list(LanguageCode)), version=_int16, opaque=_int32,
    flag=_int32, remark=st.none() | _text, ext_fields=_ext, body=_body,
    serialize_type=st.sampled_from([JSON, ROCKETMQ]),
)


def frame(header: bytes, body: bytes = b"") -> bytes:
    """A JSON-header frame from raw header bytes (§2)."""
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
        ResponseFrame(RemotingCommand(40_000, serialize_type=ROCKETMQ))  # an int16 code (§5)
    with pytest.raises(ValueError):
        ResponseFrame(RemotingCommand(0, body=b"x" * (16 * 1024 * 1024 - 80)))  # over 16 MiB with a long opaque
    encoded = ResponseFrame(RemotingCommand(0))
    for opaque in (2**31, -(2**31) - 1):
        with pytest.raises(ValueError):
            encoded.frame(opaque)


# ---------------------------------------------------------------------- HeaderMemo

LOOKUP = (b'{"code":105,"extFields":{"topic":"TopicA"},"flag":0,"language":"JAVA","opaque":%s,'
          b'"serializeTypeCurrentRPC":"JSON","version":407}')


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
DIGITS = [b"5", b"6", b"0", b"-0", b"007", b"12", b"2147483647", b"2147483648", b"-2147483649", b"99999999999",
          b"1.0", b"1e2", b""]


@pytest.mark.parametrize("header", TRICKS)
def test_memo_is_never_fooled(header):
    for first in DIGITS:
        for second in DIGITS:
            memo = HeaderMemo()
            stream = frame(header % first) + frame(header % second)
            assert decode_all(stream, memo) == decode_all(stream, None), (first, second)


@given(st.lists(st.tuples(st.sampled_from([105, 103, 34]), st.sampled_from(["TopicA", "Topic\u00e9", 'T"q']),
                          st.sampled_from(list(LanguageCode)), _int32, st.none() | _text), min_size=1, max_size=8),
       st.integers(1, 3))
def test_memo_decodes_like_no_memo(requests, bound):
    stream = b"".join(encode_frame(RemotingCommand(code, language, 407, opaque, 0, remark, {"topic": topic}))
                      for code, topic, language, opaque, remark in requests)
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
