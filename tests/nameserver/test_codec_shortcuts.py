"""The codec's shortcuts give exactly what the full path gives.

``ResponseFrame`` (an answer encoded once, the opaque filled in per request) against
``encode_frame``.
"""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nameserver.codec import (
    LanguageCode,
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
