"""The remoting wire codec (docs/remoting-protocol.md): commands, frames, headers, bodies.

Pure code: bytes in, bytes out, no sockets, clocks or files. One import point for the whole
codec, which lives in small modules by subject; the comment above each import below says what
the module holds and where the protocol describes it. ``nameserver.codec.fastjson`` (JSON bodies,
§10) is not re-exported.

Example:
    >>> request = make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, opaque=1)
    >>> decoder = FrameDecoder()
    >>> decoder.feed(encode_frame(request))
    >>> list(decoder) == [request]
    True
"""

from __future__ import annotations

# command and frame encoding (§2-§5)
from nameserver.codec.command import (
    RemotingCommand,
    ResponseFrame,
    encode_frame,
    encode_header,
    make_request,
    make_response,
    mark_protocol_type,
)

# JSON and ROCKETMQ headers decoded, malformed frames (§4, §5, §9.1)
from nameserver.codec.command_header import (
    REASON_FRAME_TOO_LARGE,
    REASON_HEADER_LENGTH_OVERRUN,
    REASON_JSON_HEADER_FIELD,
    REASON_JSON_HEADER_INVALID,
    REASON_JSON_HEADER_NOT_OBJECT,
    REASON_LENGTH_TOO_SMALL,
    REASON_ROCKETMQ_HEADER_LEFTOVER,
    REASON_ROCKETMQ_HEADER_LENGTH,
    REASON_ROCKETMQ_HEADER_SHORT,
    REASON_UNKNOWN_SERIALIZE_TYPE,
    MalformedFrame,
)

# codes, languages, versions, flags, limits
from nameserver.codec.constants import (
    LANGUAGE_BY_NAME,
    MAX_FRAME_BYTES,
    MAX_FRAME_LENGTH,
    MAX_HEADER_LENGTH,
    ROCKETMQ_FIXED_HEADER_BYTES,
    RPC_ONEWAY,
    RPC_TYPE,
    SERVER_VERSION,
    UNKNOWN_LANGUAGE,
    LanguageCode,
    RequestCode,
    ResponseCode,
    SerializeType,
    Version,
    is_oneway,
    is_response,
)

# incremental frame decoding
from nameserver.codec.decoder import FrameDecoder, RequestKey, decode_frame

# custom headers <-> extFields (§6)
from nameserver.codec.headers import (
    BOOL,
    DOUBLE,
    INT32,
    INT64,
    REQUEST_HEADERS,
    STRING,
    BadHeader,
    HeaderField,
    RequestError,
    decode_custom_header,
    format_ext_value,
    parse_bool,
    parse_double,
    parse_int32,
    parse_int64,
    to_ext_fields,
)

# JSON headers decoded before, recalled by the decoder
from nameserver.codec.memo import HeaderMemo

# ``.properties`` bodies (318/319)
from nameserver.codec.properties import PropertiesError, format_properties, parse_properties

# REGISTER_BROKER / DataVersion bodies (§8)
from nameserver.codec.register import (
    HEAD_INPUT_BYTES,
    MAX_INFLATED_BYTES,
    NO_LIMITS,
    BadBody,
    CrcMismatch,
    RegisterBrokerBody,
    RegisterLimits,
    RegisterTooLarge,
    body_crc32,
    check_body_crc32,
    check_topic_head,
    decode_data_version_body,
    decode_register_body,
    encode_register_body,
    inflate,
    inflate_chunks,
    parse_data_version,
    parse_topic_config_text,
    topic_config_json,
    topic_config_text,
)

__all__ = [
    # command and frames
    "RemotingCommand",
    "ResponseFrame",
    "encode_frame",
    "encode_header",
    "make_request",
    "make_response",
    "mark_protocol_type",
    "FrameDecoder",
    "HeaderMemo",
    "MalformedFrame",
    "RequestKey",
    "decode_frame",
    "REASON_FRAME_TOO_LARGE",
    "REASON_HEADER_LENGTH_OVERRUN",
    "REASON_JSON_HEADER_FIELD",
    "REASON_JSON_HEADER_INVALID",
    "REASON_JSON_HEADER_NOT_OBJECT",
    "REASON_LENGTH_TOO_SMALL",
    "REASON_ROCKETMQ_HEADER_LEFTOVER",
    "REASON_ROCKETMQ_HEADER_LENGTH",
    "REASON_ROCKETMQ_HEADER_SHORT",
    "REASON_UNKNOWN_SERIALIZE_TYPE",
    # constants
    "LANGUAGE_BY_NAME",
    "MAX_FRAME_BYTES",
    "MAX_FRAME_LENGTH",
    "MAX_HEADER_LENGTH",
    "ROCKETMQ_FIXED_HEADER_BYTES",
    "RPC_ONEWAY",
    "RPC_TYPE",
    "SERVER_VERSION",
    "UNKNOWN_LANGUAGE",
    "LanguageCode",
    "RequestCode",
    "ResponseCode",
    "SerializeType",
    "Version",
    "is_oneway",
    "is_response",
    # custom headers
    "BOOL",
    "DOUBLE",
    "INT32",
    "INT64",
    "STRING",
    "REQUEST_HEADERS",
    "BadHeader",
    "HeaderField",
    "RequestError",
    "decode_custom_header",
    "format_ext_value",
    "parse_bool",
    "parse_double",
    "parse_int32",
    "parse_int64",
    "to_ext_fields",
    # bodies
    "HEAD_INPUT_BYTES",
    "MAX_INFLATED_BYTES",
    "NO_LIMITS",
    "BadBody",
    "CrcMismatch",
    "RegisterBrokerBody",
    "RegisterLimits",
    "RegisterTooLarge",
    "body_crc32",
    "check_body_crc32",
    "check_topic_head",
    "decode_data_version_body",
    "decode_register_body",
    "encode_register_body",
    "inflate",
    "inflate_chunks",
    "parse_data_version",
    "parse_topic_config_text",
    "topic_config_json",
    "topic_config_text",
    "PropertiesError",
    "format_properties",
    "parse_properties",
]
