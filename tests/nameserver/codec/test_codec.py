"""The wire codec against docs/remoting-protocol.md §11 (T1-T11, T15, T18, G1-G9, D1-D5) and the
§2-§9 rules."""

from __future__ import annotations

import os
import zlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from nameserver import codec
from nameserver.codec import (
    REQUEST_HEADERS,
    BadBody,
    BadHeader,
    CrcMismatch,
    FrameDecoder,
    HeaderField,
    LanguageCode,
    MalformedFrame,
    RegisterBrokerBody,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    decode_frame,
    decode_register_body,
    encode_frame,
    encode_register_body,
    make_request,
    make_response,
)
from nameserver.codec.fastjson import encode_data_version
from nameserver.codec.register.compressed import CHUNK_BYTES
from nameserver.model import ZERO_DATA_VERSION, DataVersion, TopicConfig

JSON, ROCKETMQ = SerializeType.JSON, SerializeType.ROCKETMQ
NOW = 1_795_219_200_000  # the "server clock" handed to decoders


def hx(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", "").replace("|", ""))


def frame(serialize_type: int, header: bytes, body: bytes = b"") -> bytes:
    """Frame raw header bytes by hand (§2), independent of the encoder."""
    length = 4 + len(header) + len(body)
    return length.to_bytes(4, "big") + ((serialize_type << 24) | len(header)).to_bytes(4, "big") + header + body


# --- §11.2 / §11.3 vectors --------------------------------------------------------------------

G1 = hx(
    "00000087 00000083 7b22636f6465223a3130352c226578744669656c6473223a7b22746f706963223a22546f70696354657374227d"
    "2c22666c6167223a302c226c616e6775616765223a224a415641222c226f7061717565223a312c2273657269616c697a655479706543"
    "757272656e74525043223a224a534f4e222c2276657273696f6e223a3430317d"
)
G2 = hx(
    "0000002d 01000029 | 0069 00 0191 00000001 00000000 | 00000000 | "
    "00000014 0005 746f706963 00000009 546f70696354657374"
)
G3 = hx("0000001c 01000016 | 0011 00 0191 00000001 00000001 | 00000001 78 | 00000000 | 7b7d")
G5 = (
    '{"brokerId":"0","bodyCrc32":"1308328594","clusterName":"DefaultCluster","brokerAddr":"192.168.0.10:10911",'
    '"enableActingMaster":"false","haServerAddr":"192.168.0.10:10912","compressed":"false","brokerName":"broker-a"}'
)
G6 = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"stateVersion":0,'
    b'"timestamp":1700000000000},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000001},'
    b'"topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,'
    b'"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}},'
    b'"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}'
)
G7 = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},'
    b'"topicConfigTable":{"TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
    b'"topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}'
)
G8 = hx(
    "78da636060b0a8564ace2fcd2b492d52b232d6512a2e492c490d4b2d2acecccf53b232d0512ac9cc4d050ae6162859199a1b20402d03"
    "03032310cb86e41764268700d5289800a19942b0a79fbb8f6b7c88a3bb4235481153742c90640000532f1b63"
)
G8_CONTENT = hx(
    "00000038 7b22636f756e746572223a332c22737461746556657273696f6e223a302c2274696d657374616d70223a3137303030303030"
    "30303030307d 00000001 0000001d 546f706963546573742034203420362053494e474c455f544147207b7d 00000002 5b5d 00000000"
)
G9 = hx(
    "78da63606050af564ace2fcd2b492d52b232d6512ac9cc4d2d2e49cc2d50b232343740805a0606064620960ac92fc84c0e01aa513001"
    "423385604f3f771fd7f8104777a02c53742c00803f1456"
)
G9_CONTENT = hx(
    "00000027 7b22636f756e746572223a332c2274696d657374616d70223a313730303030303030303030307d 00000001"
    " 0000001a 546f706963546573742034203420362053494e474c455f544147 00000002 5b5d"
)
TOPIC_TEST = TopicConfig("TopicTest", 4, 4, 6, 0, False, "SINGLE_TAG")
G_RESULT = RegisterBrokerBody(DataVersion(1700000000000, 3), (TOPIC_TEST,), [])
D2B_EXT = {
    "bodyCrc32": "416932168",
    "brokerAddr": "192.168.0.10:10911",
    "brokerId": "0",
    "brokerName": "broker-a",
    "clusterName": "DefaultCluster",
    "compressed": "false",
    "haServerAddr": "192.168.0.10:10912",
}
D2B_HEADER = (
    b'{"code":103,"extFields":{"bodyCrc32":"416932168","brokerAddr":"192.168.0.10:10911","brokerId":"0",'
    b'"brokerName":"broker-a","clusterName":"DefaultCluster","compressed":"false","haServerAddr":"192.168.0.10:10912"},'
    b'"flag":0,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":407}'
)


def test_g1_json_request_frame():
    request = make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"}, opaque=1, version=401)
    assert encode_frame(request) == G1
    assert decode_frame(G1) == request


def test_g2_rocketmq_request_frame():
    request = make_request(105, {"topic": "TopicTest"}, opaque=1, version=401, serialize_type=ROCKETMQ)
    assert encode_frame(request) == G2
    assert decode_frame(G2) == request


def test_g3_rocketmq_response_frame():
    response = RemotingCommand(17, LanguageCode.JAVA, 401, 1, 1, "x", None, b"{}", ROCKETMQ)
    assert encode_frame(response) == G3
    assert decode_frame(G3) == response


@pytest.mark.parametrize(
    "cmd, header, frame_hex",
    [
        (
            make_response(make_request(105, opaque=1), ResponseCode.SUCCESS, version=401),
            b'{"code":0,"flag":1,"language":"JAVA","opaque":1,"serializeTypeCurrentRPC":"JSON","version":401}',
            "00000063 0000005f",
        ),
        (
            make_response(
                make_request(105, opaque=1),
                ResponseCode.TOPIC_NOT_EXIST,
                version=401,
                remark="No topic route info in name server for the topic: TopicTest",
            ),
            b'{"code":17,"flag":1,"language":"JAVA","opaque":1,"remark":"No topic route info in name server '
            b'for the topic: TopicTest","serializeTypeCurrentRPC":"JSON","version":401}',
            "000000ab 000000a7",
        ),
        (
            make_request(RequestCode.BROKER_HEARTBEAT, opaque=7, version=479, oneway=True),
            b'{"code":904,"flag":2,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":479}',
            "00000065 00000061",
        ),
    ],
    ids=["D1a", "D1b", "D1c"],
)
def test_g4_d1_json_headers_framed(cmd, header, frame_hex):
    assert encode_frame(cmd) == hx(frame_hex) + header
    assert decode_frame(encode_frame(cmd)) == cmd


def test_d2a_5x_register_frame_decodes():
    header = (
        '{"code":103,"extFields":' + G5 + ',"flag":0,"language":"JAVA","opaque":2,'
        '"serializeTypeCurrentRPC":"JSON","version":479}'
    ).encode()
    assert len(header) == 326 and len(G6) == 449
    raw = frame(JSON, header, G6)
    assert raw[:8] == hx("0000030b 00000146")
    cmd = decode_frame(raw)
    assert (cmd.code, cmd.version, cmd.opaque, cmd.flag, cmd.body) == (103, 479, 2, 0, G6)
    fields = codec.decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.REGISTER_BROKER])
    assert fields == {
        "brokerName": "broker-a",
        "brokerAddr": "192.168.0.10:10911",
        "clusterName": "DefaultCluster",
        "haServerAddr": "192.168.0.10:10912",
        "brokerId": 0,
        "compressed": False,
        "bodyCrc32": 1308328594,
    }
    body = decode_register_body(
        cmd.body, version=cmd.version, compressed=fields["compressed"], now=NOW, body_crc32=fields["bodyCrc32"]
    )
    assert body == G_RESULT  # stateVersion and mapping sections dropped


def test_d2b_4x_register_frame_exact():
    request = make_request(RequestCode.REGISTER_BROKER, D2B_EXT, G7, opaque=3, version=407)
    raw = encode_frame(request)
    assert raw[:8] == hx("00000240 00000128")
    assert raw[8:] == D2B_HEADER + G7
    assert decode_register_body(G7, version=407, compressed=False, now=NOW, body_crc32=416932168) == G_RESULT


def test_d2b_responses_exact():
    request = decode_frame(frame(JSON, D2B_HEADER, G7))
    ok = encode_frame(make_response(request, ResponseCode.SUCCESS, ext_fields={}))
    assert ok[:8] == hx("00000072 0000006e")
    assert ok[8:] == (
        b'{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":3,'
        b'"serializeTypeCurrentRPC":"JSON","version":407}'
    )
    error = encode_frame(make_response(request, ResponseCode.SYSTEM_ERROR, remark="crc32 not match", ext_fields={}))
    assert error[8:] == (
        b'{"code":1,"extFields":{},"flag":1,"language":"JAVA","opaque":3,"remark":"crc32 not match",'
        b'"serializeTypeCurrentRPC":"JSON","version":407}'
    )
    assert len(error) - 8 == 137


def test_d2b_crc_mismatch_is_refused_before_decoding():
    with pytest.raises(CrcMismatch) as info:
        decode_register_body(G7, version=407, compressed=False, now=NOW, body_crc32=416932169)
    assert info.value.remark == "crc32 not match" and info.value.reason == "crc_mismatch"
    with pytest.raises(CrcMismatch):  # checked before decoding: even an undecodable body
        decode_register_body(b"garbage", version=407, compressed=False, now=NOW, body_crc32=1)


def test_d2b_as_version_36_is_the_version_0_trap():
    body = decode_register_body(G7, version=36, compressed=False, now=NOW, body_crc32=416932168)
    assert body == RegisterBrokerBody(DataVersion(NOW, 0), (), None)


def test_d2c_compressed_4x_register():
    ext = dict(D2B_EXT, bodyCrc32="817412665", compressed="true")
    raw = encode_frame(make_request(RequestCode.REGISTER_BROKER, ext, G9, opaque=4, version=407))
    assert raw[:8] == hx("00000178 00000127")
    cmd = decode_frame(raw)
    fields = codec.decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.REGISTER_BROKER])
    assert fields["compressed"] is True and fields["bodyCrc32"] == 817412665
    assert decode_register_body(cmd.body, version=407, compressed=True, now=NOW, body_crc32=817412665) == G_RESULT


def test_g6_crc_needs_the_31_bit_mask():
    assert zlib.crc32(G6) == 3455812242
    assert codec.body_crc32(G6) == 1308328594
    codec.check_body_crc32(G6, 1308328594)
    with pytest.raises(CrcMismatch):
        codec.check_body_crc32(G6, 3455812242 - 2**32)  # the unmasked value as a Java int never matches


def test_g7_encoded_exactly_by_our_broker_side_encoder():
    assert len(G7) == 276 and codec.body_crc32(G7) == 416932168
    assert encode_register_body(DataVersion(1700000000000, 3), [TOPIC_TEST], []) == G7


@pytest.mark.parametrize(
    "compressed, content, crc, version",
    [(G8, G8_CONTENT, 2117459578, 479), (G9, G9_CONTENT, 817412665, 407)],
    ids=["G8", "G9"],
)
def test_g8_g9_compressed_bodies(compressed, content, crc, version):
    assert codec.body_crc32(compressed) == crc
    assert zlib.decompress(compressed) == content
    assert decode_register_body(compressed, version=version, compressed=True, now=NOW, body_crc32=crc) == G_RESULT
    ours = encode_register_body(DataVersion(1700000000000, 3), [TOPIC_TEST], [], version=version, compressed=True)
    assert ours[:2] == b"\x78\xda" and zlib.decompress(ours) == content  # compare inflated content only


def test_d3_route_response_frame_prefix():
    request = make_request(105, {"topic": "TopicTest"}, opaque=5, version=407)
    body = b"x" * 238
    raw = encode_frame(make_response(request, ResponseCode.SUCCESS, body=body))
    assert raw[:8] == hx("00000151 0000005f")
    assert (
        raw[8:103] == b'{"code":0,"flag":1,"language":"JAVA","opaque":5,"serializeTypeCurrentRPC":"JSON","version":407}'
    )


def test_d4_query_data_version_body():
    body = b'{"counter":3,"timestamp":1700000000000}'
    assert len(body) == 39
    assert codec.decode_data_version_body(body, NOW) == DataVersion(1700000000000, 3)
    assert encode_data_version(codec.decode_data_version_body(body, NOW)) == body
    assert codec.decode_data_version_body(b'{"counter":4,"timestamp":1700000000000}', NOW) != DataVersion(
        1700000000000, 3
    )


# --- §11.1 vectors from RocketMQ's tests --------------------------------------------------------


def test_t1_t2_header_length_word():
    assert codec.mark_protocol_type(261, JSON) == hx("00000105")
    assert codec.mark_protocol_type(16777215, ROCKETMQ) == hx("01ffffff")


def test_t3_request_and_response_flags():
    request = make_request(RequestCode.REGISTER_BROKER, version=2333)
    assert request.flag & 1 == 0 and not request.is_response and request.version == 2333
    response = make_response(request, ResponseCode.SUCCESS, version=2333)
    assert response.flag == 1 and response.is_response and response.version == 2333
    assert codec.is_response(response.flag) and not codec.is_oneway(response.flag)
    oneway = make_request(RequestCode.BROKER_HEARTBEAT, oneway=True)
    assert oneway.is_oneway and codec.is_oneway(oneway.flag) and not oneway.is_response


@pytest.mark.parametrize("serialize_type", [JSON, ROCKETMQ])
def test_t5_encode_decode_with_and_without_body(serialize_type):
    empty = make_request(103, body=b"", serialize_type=serialize_type)
    assert decode_frame(encode_frame(empty)).body is None
    with_body = make_request(103, body=bytes([0, 1, 2, 3, 4]), serialize_type=serialize_type)
    decoded = decode_frame(encode_frame(with_body))
    assert decoded.serialize_type == serialize_type and decoded.body == hx("0001020304")


def test_t6_t7_custom_header_fields():
    fields = (
        HeaderField("stringValue", required=True),
        HeaderField("intValue", codec.INT32, required=True),
        HeaderField("longValue", codec.INT64, required=True),
        HeaderField("booleanValue", codec.BOOL),
        HeaderField("doubleValue", codec.DOUBLE),
    )
    typed = {
        "stringValue": "bilibili",
        "intValue": 2333,
        "longValue": 23333333,
        "booleanValue": True,
        "doubleValue": 0.618,
    }
    ext = codec.to_ext_fields(typed)
    ext["key"] = "value"
    assert ext == {
        "stringValue": "bilibili",
        "intValue": "2333",
        "longValue": "23333333",
        "booleanValue": "true",
        "doubleValue": "0.618",
        "key": "value",
    }
    cmd = decode_frame(encode_frame(make_request(1, ext)))
    assert codec.decode_custom_header(cmd.ext_fields, fields) == typed
    # T7: parent-class and own fields both written; None fields omitted.
    assert codec.to_ext_fields({"name": "12321", "value": 111, "unset": None}) == {"name": "12321", "value": "111"}


T8_T11 = [
    ("T8", {}, "0067 00 091d 01020304 00000000 00000000 00000000", 21),
    (
        "T9",
        {"remark": "Sample Remark"},
        "0067 00 091d 01020304 00000000 0000000d 53616d706c652052656d61726b 00000000",
        34,
    ),
    (
        "T10",
        {"ext_fields": {"key": "value"}},
        "0067 00 091d 01020304 00000000 00000000 0000000e 0003 6b6579 00000005 76616c7565",
        35,
    ),
]


@pytest.mark.parametrize("name, extra, header_hex, size", T8_T11, ids=[t[0] for t in T8_T11])
def test_t8_t10_rocketmq_header_bytes(name, extra, header_hex, size):
    cmd = RemotingCommand(103, LanguageCode.JAVA, 2333, 0x01020304, 0, serialize_type=ROCKETMQ, **extra)
    header = codec.encode_header(cmd)
    assert header == hx(header_hex) and len(header) == size
    decoded = decode_frame(encode_frame(cmd))
    assert decoded == cmd
    if name == "T8":
        assert decoded.remark is None and decoded.ext_fields is None


def test_t11_rocketmq_header_sorted_entries_round_trip():
    cmd = RemotingCommand(1, LanguageCode.JAVA, 99, 1001, 3, "remark", {"str": "s1", "num": "100"}, None, ROCKETMQ)
    header = codec.encode_header(cmd)
    assert header == hx(
        "0001 00 0063 000003e9 00000003 00000006 72656d61726b 00000017 0003 6e756d 00000003 313030"
        " 0003 737472 00000002 7331"
    )
    assert len(header) == 50 and decode_frame(encode_frame(cmd)) == cmd


def test_t15_data_version_equality_after_decoding():
    parse = codec.parse_data_version
    assert parse(b'{"counter":3,"timestamp":1}', NOW) == parse(b'{"timestamp":1,"counter":3}', NOW)
    assert parse(b'{"counter":3,"timestamp":1}', NOW) != parse(b'{"counter":4,"timestamp":1}', NOW)
    assert parse(b'{"timestamp":1}', NOW) == parse(b'{"timestamp":1,"counter":0}', NOW)  # absent -> 0
    assert parse(b'{"counter":3,"stateVersion":9,"timestamp":1}', NOW) == DataVersion(1, 3)
    assert parse(b'{"counter":"3"}', NOW) == DataVersion(NOW, 3)  # missing timestamp -> the clock


def test_t18_ten_thousand_default_topics_compressed():
    topics = [TopicConfig(f"topic-{i:05d}") for i in range(10000)]
    body = encode_register_body(DataVersion(1700000000000, 1), topics, [], version=413, compressed=True)
    decoded = decode_register_body(body, version=413, compressed=True, now=NOW, body_crc32=codec.body_crc32(body))
    assert len(decoded.topics) == 10000
    assert decoded.topics == tuple(topics) and decoded.topics[0].read_queue_nums == 16


# --- D5 and the other §9.1 malformed frames -----------------------------------------------------

D5 = [
    ("D5a", "00000002 0000", codec.REASON_LENGTH_TOO_SMALL, {"frame_length": 2}),
    ("D5b", "00fffffd", codec.REASON_FRAME_TOO_LARGE, {"frame_length": 16777213}),
    (
        "D5c",
        "00000008 00000010 7b7d7b7d",
        codec.REASON_HEADER_LENGTH_OVERRUN,
        {"frame_length": 8, "serialize_type": 0, "header_length": 16},
    ),
    (
        "D5d",
        "00000006 02000002 7b7d",
        codec.REASON_UNKNOWN_SERIALIZE_TYPE,
        {"frame_length": 6, "serialize_type": 2, "header_length": 2},
    ),
    (
        "D5e",
        "00000006 00000002 5b5d",
        codec.REASON_JSON_HEADER_NOT_OBJECT,
        {"frame_length": 6, "serialize_type": 0, "header_length": 2},
    ),
    (
        "D5f",
        "00000008 01000004 00690000",
        codec.REASON_ROCKETMQ_HEADER_SHORT,
        {"frame_length": 8, "serialize_type": 1, "header_length": 4},
    ),
]


@pytest.mark.parametrize("name, data, reason, decoded", D5, ids=[d[0] for d in D5])
def test_d5_malformed_frames(name, data, reason, decoded):
    decoder = FrameDecoder()
    decoder.feed(hx(data))
    with pytest.raises(MalformedFrame) as info:
        decoder.next_command()
    assert info.value.reason == reason and info.value.decoded_so_far == decoded
    with pytest.raises(MalformedFrame):  # the decoder stays failed
        decoder.feed(b"\x00")


def test_oversized_length_is_refused_from_its_four_bytes_alone():
    decoder = FrameDecoder()
    for byte in hx("00fffffd")[:3]:
        decoder.feed(bytes([byte]))
        assert decoder.next_command() is None
    decoder.feed(b"\xfd")
    with pytest.raises(MalformedFrame, match="frame_too_large"):
        decoder.next_command()
    largest = FrameDecoder()
    largest.feed(hx("00fffffc 01000015"))  # 16777212 is allowed: it waits for the body
    assert largest.next_command() is None and largest.buffered == 8


def test_header_word_is_checked_before_the_body_arrives():
    decoder = FrameDecoder()
    decoder.feed(hx("00100000 00200000"))  # header length beyond the frame; 1 MiB body not sent
    with pytest.raises(MalformedFrame, match="header_length_overrun"):
        decoder.next_command()


def test_configured_frame_limit():
    decoder = FrameDecoder(max_frame_bytes=1024)
    decoder.feed(hx("000003fd"))
    with pytest.raises(MalformedFrame, match="frame_too_large"):
        decoder.next_command()


def rmq(fixed_tail: str) -> bytes:
    """A ROCKETMQ header: code 105, JAVA, version 401, opaque 1, flag 0, then ``fixed_tail``."""
    return hx("0069 00 0191 00000001 00000000" + fixed_tail)


@pytest.mark.parametrize(
    "header, reason",
    [
        (rmq("ffffffff 00000000"), codec.REASON_ROCKETMQ_HEADER_LENGTH),  # negative remark length
        (rmq("00000005 78 00000000"), codec.REASON_ROCKETMQ_HEADER_LENGTH),  # remark overruns
        (rmq("00000000 ffffffff"), codec.REASON_ROCKETMQ_HEADER_LENGTH),  # negative ext length
        (rmq("00000000 00000009 0001 6b 00000001 76"), codec.REASON_ROCKETMQ_HEADER_LENGTH),  # ext overruns
        (rmq("00000000 00000008 0001 6b 00000002 76"), codec.REASON_ROCKETMQ_HEADER_LENGTH),  # value overruns
        (rmq("00000000 00000001 00"), codec.REASON_ROCKETMQ_HEADER_LENGTH),  # half a key length
        (rmq("00000000 00000004 ffff 0000"), codec.REASON_ROCKETMQ_HEADER_LENGTH),  # negative key length
        (rmq("00000000 00000000 00"), codec.REASON_ROCKETMQ_HEADER_LEFTOVER),  # a byte left over
    ],
    ids=[
        "negative-remark",
        "remark-overrun",
        "negative-ext",
        "ext-overrun",
        "value-overrun",
        "half-key-length",
        "negative-key",
        "leftover",
    ],
)
def test_rocketmq_header_strictness(header, reason):
    with pytest.raises(MalformedFrame) as info:
        decode_frame(frame(ROCKETMQ, header))
    assert info.value.reason == reason
    assert info.value.decoded_so_far["code"] == 105 and info.value.decoded_so_far["opaque"] == 1


@pytest.mark.parametrize(
    "header, reason",
    [
        (b"", codec.REASON_JSON_HEADER_INVALID),
        (b"{", codec.REASON_JSON_HEADER_INVALID),
        (b'{0:"a"}', codec.REASON_JSON_HEADER_INVALID),
        (b"NaN", codec.REASON_JSON_HEADER_INVALID),
        (b'"code"', codec.REASON_JSON_HEADER_NOT_OBJECT),
        (b'{"code":"105"}', codec.REASON_JSON_HEADER_FIELD),
        (b'{"code":105.0}', codec.REASON_JSON_HEADER_FIELD),
        (b'{"code":true}', codec.REASON_JSON_HEADER_FIELD),
        (b'{"opaque":2147483648}', codec.REASON_JSON_HEADER_FIELD),
        (b'{"version":[1]}', codec.REASON_JSON_HEADER_FIELD),
        (b'{"extFields":{"a":{"b":"c"}}}', codec.REASON_JSON_HEADER_FIELD),
        (b'{"extFields":{"a":["b"]}}', codec.REASON_JSON_HEADER_FIELD),
        (b'{"extFields":"topic"}', codec.REASON_JSON_HEADER_FIELD),
    ],
)
def test_json_header_malformed(header, reason):
    with pytest.raises(MalformedFrame) as info:
        decode_frame(frame(JSON, header))
    assert info.value.reason == reason


def test_good_frames_before_a_bad_one_come_out_first():
    good = encode_frame(make_request(105, {"topic": "a"}, opaque=1))
    decoder = FrameDecoder()
    decoder.feed(good + good + hx("00000006 02000002 7b7d") + good)
    seen = []
    with pytest.raises(MalformedFrame):
        for cmd in decoder:
            seen.append(cmd.opaque)
    assert seen == [1, 1]
    with pytest.raises(MalformedFrame):
        decoder.next_command()


def test_end_of_stream_mid_frame_is_just_buffered():
    raw = encode_frame(make_request(105, {"topic": "a"}))
    decoder = FrameDecoder()
    decoder.feed(raw[:-1])
    assert list(decoder) == [] and decoder.buffered == len(raw) - 1
    decoder.feed(raw[-1:])
    assert len(list(decoder)) == 1 and decoder.buffered == 0


def _large_request(size: int = 100 * 1024, opaque: int = 7):
    request = make_request(310, {"brokerName": "b"})
    request.body, request.opaque = os.urandom(size), opaque
    return request


def test_a_large_frame_is_offered_from_its_start_once_and_its_skipped_rest_is_never_buffered():
    request = _large_request()
    raw, after = encode_frame(request), encode_frame(make_request(105, {"topic": "a"}))
    header_end = len(raw) - len(request.body)
    decoder = FrameDecoder()
    decoder.feed(raw[: header_end + 100])
    assert decoder.next_command() is None
    assert decoder.frame_head(64 * 1024, 1024) is None  # not 1 KiB of its body yet
    decoder.feed(raw[header_end + 100 : header_end + 2048])
    assert decoder.next_command() is None
    assert decoder.frame_head(len(raw), 1024) is None  # shorter than asked for
    head = decoder.frame_head(64 * 1024, 1024)
    assert (head.code, head.opaque, head.ext_fields, head.body) == (310, 7, {"brokerName": "b"}, request.body[:2048])
    assert decoder.frame_head(64 * 1024, 1024) is None  # once
    decoder.skip_frame()
    assert (decoder.buffered, decoder.in_frame, decoder.last_key) == (0, True, None)
    rest = raw[header_end + 2048 :] + after
    decoder.feed(rest[:50_000])
    assert decoder.next_command() is None and (decoder.buffered, decoder.in_frame) == (0, True)
    decoder.feed(rest[50_000:])  # the skipped frame's last bytes and the next frame in one read
    assert decoder.next_command().code == 105
    assert (decoder.buffered, decoder.in_frame) == (0, False)


def test_a_large_frame_offered_but_not_skipped_comes_out_whole_and_the_next_is_offered_too():
    first, second = _large_request(opaque=1), _large_request(opaque=2)
    raw = encode_frame(first) + encode_frame(second)
    decoder = FrameDecoder()
    decoder.feed(raw[:4096])
    assert decoder.next_command() is None
    assert decoder.frame_head(64 * 1024, 1024).opaque == 1
    decoder.feed(raw[4096 : len(raw) - 1000])
    assert decoder.next_command().body == first.body
    assert decoder.next_command() is None
    assert decoder.frame_head(64 * 1024, 1024).opaque == 2
    decoder.feed(raw[len(raw) - 1000 :])
    assert decoder.next_command().body == second.body and not decoder.in_frame


# --- lenient decoding (§4, §5) -------------------------------------------------------------------


def test_json_header_defaults_unknown_keys_and_coercions():
    cmd = decode_frame(
        frame(
            JSON,
            b'{"extFields":{"n":5,"b":true,"f":0.5,"gone":null,"s":"x"},"language":"KLINGON",'
            b'"serializeTypeCurrentRPC":"ROCKETMQ","extra":[1]}',
        )
    )
    assert (cmd.code, cmd.flag, cmd.opaque, cmd.version, cmd.remark) == (0, 0, 0, 0, None)
    assert cmd.language == codec.UNKNOWN_LANGUAGE and cmd.serialize_type == JSON
    assert cmd.ext_fields == {"n": "5", "b": "true", "f": "0.5", "s": "x"}
    assert decode_frame(frame(JSON, b'{"code":1,"extFields":null}')).ext_fields is None
    assert decode_frame(frame(JSON, b'{"remark":12}')).remark == "12"


def test_json_header_invalid_utf8_is_replaced():
    cmd = decode_frame(frame(JSON, b'{"code":1,"remark":"a\xffb"}'))
    assert cmd.remark == "a\ufffdb"


def test_rocketmq_header_null_entries_unknown_language_and_bad_utf8():
    header = hx(
        "0069 c8 0191 ffffffff 00000002 00000002 61ff 00000017 0000 00000001 76 0001 6b 00000000 0001 6b 00000002 7676"
    )
    cmd = decode_frame(frame(ROCKETMQ, header))
    assert cmd.language == 200 and cmd.opaque == -1 and cmd.flag == 2
    assert cmd.remark == "a\ufffd" and cmd.ext_fields == {"k": "vv"}
    negative = decode_frame(frame(ROCKETMQ, hx("8000 00 ffff 00000000 00000000 00000000 00000000")))
    assert negative.code == -32768 and negative.version == -1


def test_unknown_languages_are_sent_as_other():
    cmd = RemotingCommand(1, codec.UNKNOWN_LANGUAGE)
    assert b'"language":"OTHER"' in codec.encode_header(cmd)
    assert codec.encode_header(RemotingCommand(1, 300, serialize_type=ROCKETMQ))[2] == LanguageCode.OTHER
    assert decode_frame(encode_frame(RemotingCommand(1, 200, serialize_type=ROCKETMQ))).language == 200


def test_encoder_refuses_what_the_header_cannot_carry():
    with pytest.raises(ValueError):
        encode_frame(RemotingCommand(200050, serialize_type=ROCKETMQ))  # §5: codes above 32767
    with pytest.raises(ValueError):
        encode_frame(RemotingCommand(1, opaque=2**31))
    with pytest.raises(ValueError):
        encode_frame(RemotingCommand(1, body=b"\0" * codec.MAX_FRAME_LENGTH))
    with pytest.raises(ValueError):
        encode_frame(RemotingCommand(1, serialize_type=2))


def test_rocketmq_encoder_skips_null_and_empty_strings():
    cmd = RemotingCommand(1, remark="", ext_fields={"a": "", "": "b", "c": "d"}, serialize_type=ROCKETMQ)
    decoded = decode_frame(encode_frame(cmd))
    assert decoded.remark is None and decoded.ext_fields == {"c": "d"}


def test_json_header_extfields_sorted_and_escaped():
    header = codec.encode_header(RemotingCommand(1, ext_fields={"b": 'q"/\n', "a": "é"}, remark="\u2028"))
    assert header.startswith('{"code":1,"extFields":{"a":"é","b":"q\\"/\\n"},'.encode())
    assert b'"remark":"\\u2028"' in header


# --- round trips at any split point (hypothesis) ------------------------------------------------

_int32 = st.integers(-(2**31), 2**31 - 1)
_int16 = st.integers(-(2**15), 2**15 - 1)
_text = st.text(max_size=20)
_ext = st.none() | st.dictionaries(_text, _text, max_size=5)
_body = st.none() | st.binary(min_size=1, max_size=64)

_json_commands = st.builds(
    RemotingCommand,
    code=_int32,
    language=st.sampled_from(list(LanguageCode)),
    version=_int32,
    opaque=_int32,
    flag=_int32,
    remark=st.none() | _text,
    ext_fields=_ext,
    body=_body,
    serialize_type=st.just(JSON),
)
_rocketmq_commands = st.builds(
    RemotingCommand,
    code=_int16,
    language=st.integers(0, 255),
    version=_int16,
    opaque=_int32,
    flag=_int32,
    remark=st.none() | _text,
    ext_fields=_ext,
    body=_body,
    serialize_type=st.just(ROCKETMQ),
)


def _after_round_trip(cmd: RemotingCommand) -> RemotingCommand:
    """What decoding gives back: ROCKETMQ drops empty remarks and entries (§5)."""
    if cmd.serialize_type == JSON:
        return cmd
    ext = {k: v for k, v in (cmd.ext_fields or {}).items() if k and v} or None
    language = LanguageCode(cmd.language) if cmd.language < len(LanguageCode) else cmd.language
    return RemotingCommand(
        cmd.code, language, cmd.version, cmd.opaque, cmd.flag, cmd.remark or None, ext, cmd.body, cmd.serialize_type
    )


@given(st.lists(_json_commands | _rocketmq_commands, min_size=1, max_size=6), st.data())
def test_commands_round_trip_through_any_split(commands, data):
    stream = b"".join(encode_frame(cmd) for cmd in commands)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=8)))
    decoder = FrameDecoder()
    decoded: list[RemotingCommand] = []
    for start, end in zip([0, *cuts], [*cuts, len(stream)], strict=True):
        decoder.feed(stream[start:end])
        decoded.extend(decoder)
    assert decoded == [_after_round_trip(cmd) for cmd in commands]
    assert decoder.buffered == 0


@given(_json_commands | _rocketmq_commands)
def test_byte_by_byte_feeding(cmd):
    raw = encode_frame(cmd)
    decoder = FrameDecoder()
    out = []
    for i in range(len(raw)):
        decoder.feed(raw[i : i + 1])
        out.extend(decoder)
    assert out == [_after_round_trip(cmd)]


# --- custom header parsing (§6) -----------------------------------------------------------------


@pytest.mark.parametrize(
    "text, value",
    [("2333", 2333), ("+5", 5), ("-0", 0), ("007", 7), ("2147483647", 2**31 - 1), ("-2147483648", -(2**31))],
)
def test_parse_int32_accepts(text, value):
    assert codec.parse_int32(text) == value


@pytest.mark.parametrize("text", ["", " 5", "5 ", "5\n", "1.0", "0x10", "2147483648", "-2147483649", "٥", "+", "1_0"])
def test_parse_int32_refuses(text):
    with pytest.raises(ValueError):
        codec.parse_int32(text)


def test_parse_int64_range():
    assert codec.parse_int64("9223372036854775807") == 2**63 - 1
    assert codec.parse_int64("-9223372036854775808") == -(2**63)
    with pytest.raises(ValueError):
        codec.parse_int64("9223372036854775808")


@pytest.mark.parametrize(
    "text, value",
    [
        ("true", True),
        ("TRUE", True),
        ("tRuE", True),
        ("yes", False),
        ("1", False),
        (" true", False),
        ("", False),
        (None, False),
    ],
)
def test_parse_bool_is_java_parse_boolean(text, value):
    assert codec.parse_bool(text) is value


@pytest.mark.parametrize(
    "text, value",
    [
        ("0.618", 0.618),
        (" 1e3 ", 1000.0),
        ("5.", 5.0),
        (".5", 0.5),
        ("2.5f", 2.5),
        ("-Infinity", float("-inf")),
        ("0x1p3", 8.0),
    ],
)
def test_parse_double_like_java(text, value):
    assert codec.parse_double(text) == value


def test_parse_double_refuses_garbage():
    with pytest.raises(ValueError):
        codec.parse_double("1,5")


def test_required_field_missing_names_it():
    with pytest.raises(BadHeader) as info:
        codec.decode_custom_header({"brokerName": "a"}, REQUEST_HEADERS[RequestCode.REGISTER_BROKER])
    assert info.value.field == "brokerAddr" and info.value.remark == "the custom field brokerAddr is null"
    assert info.value.reason == "bad_header"
    with pytest.raises(BadHeader, match="the custom field topic is null"):
        codec.decode_custom_header(None, REQUEST_HEADERS[RequestCode.GET_ROUTEINFO_BY_TOPIC])


def test_required_field_unparsable_and_optional_unparsable():
    ext = dict(D2B_EXT, brokerId="x")
    with pytest.raises(BadHeader) as info:
        codec.decode_custom_header(ext, REQUEST_HEADERS[RequestCode.REGISTER_BROKER])
    assert info.value.field == "brokerId" and "brokerId" in info.value.remark
    lenient = codec.decode_custom_header(
        dict(D2B_EXT, bodyCrc32="-", compressed="yes"), REQUEST_HEADERS[RequestCode.REGISTER_BROKER]
    )
    assert lenient["bodyCrc32"] == 0 and lenient["compressed"] is False  # defaults kept


def test_route_request_header_accept_standard_json_only():
    fields = REQUEST_HEADERS[RequestCode.GET_ROUTEINFO_BY_TOPIC]
    assert codec.decode_custom_header({"topic": "T", "acceptStandardJsonOnly": "True"}, fields) == {
        "topic": "T",
        "acceptStandardJsonOnly": True,
    }
    assert codec.decode_custom_header({"topic": "T", "lo": "x"}, fields)["acceptStandardJsonOnly"] is False


def test_format_ext_value():
    assert [codec.format_ext_value(v) for v in (True, False, 7, 1e10, "s")] == ["true", "false", "7", "1.0E10", "s"]
    with pytest.raises(TypeError):
        codec.format_ext_value([1])


# --- REGISTER_BROKER body rules (§8) ---------------------------------------------------------------


def test_no_body_in_either_format():
    assert decode_register_body(None, version=407, compressed=True, now=NOW) == RegisterBrokerBody(
        ZERO_DATA_VERSION, (), []
    )
    assert decode_register_body(b"", version=0, compressed=False, now=NOW) == RegisterBrokerBody(
        ZERO_DATA_VERSION, (), None
    )


def test_negative_version_is_a_bad_header():
    with pytest.raises(BadHeader) as info:
        decode_register_body(G7, version=-1, compressed=False, now=NOW)
    assert info.value.field == "version" and info.value.reason == "bad_header"


def test_bare_wrapper_before_version_37():
    wrapper = b'{"dataVersion":{"counter":2},"topicConfigTable":{"T":{"perm":7}}}'
    body = decode_register_body(wrapper, version=36, compressed=True, now=NOW)  # compressed ignored
    assert body == RegisterBrokerBody(DataVersion(NOW, 2), (TopicConfig("T", perm=7),), None)
    assert encode_register_body(DataVersion(5, 2), [TopicConfig("T")], version=0) == (
        b'{"dataVersion":{"counter":2,"timestamp":5},"topicConfigTable":{"T":{"order":false,"perm":6,'
        b'"readQueueNums":16,"topicFilterType":"SINGLE_TAG","topicName":"T","topicSysFlag":0,"writeQueueNums":16}}}'
    )


def test_json_body_defaults_and_topic_name_from_key():
    body = b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"K":{"topicSysFlag":1,"order":true},"Z":null}}}'
    decoded = decode_register_body(body, version=407, compressed=False, now=NOW)
    assert decoded == RegisterBrokerBody(DataVersion(NOW, 0), (TopicConfig("K", 16, 16, 6, 1, True),), [])
    assert decode_register_body(b"{}", version=407, compressed=False, now=NOW) == RegisterBrokerBody(
        DataVersion(NOW, 0), (), []
    )
    null_filter = decode_register_body(b'{"filterServerList":null}', version=407, compressed=False, now=NOW)
    assert null_filter.filter_servers is None


def test_json_body_with_5x_unquoted_mapping_keys_and_filter_servers():
    body = (
        b'{"filterServerList":["10.0.0.1:1"],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1,"timestamp":2},'
        b'"topicConfigTable":{},"topicQueueMappingInfoMap":{"S":{"currIdMap":{0:0,1:1}}}}}'
    )
    decoded = decode_register_body(body, version=479, compressed=False, now=NOW)
    assert decoded == RegisterBrokerBody(DataVersion(2, 1), (), ["10.0.0.1:1"])


@pytest.mark.parametrize(
    "body",
    [
        b"not json",
        b"[]",
        b'{"topicConfigSerializeWrapper":[]}',
        b'{"topicConfigSerializeWrapper":{"dataVersion":5}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":"x"}}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"perm":4294967296}}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":{"T":{"topicFilterType":"ALL"}}}}',
        b'{"topicConfigSerializeWrapper":{"topicConfigTable":[]}}',
        b'{"filterServerList":"a"}',
        b'{"filterServerList":[["a"]]}',
    ],
)
def test_undecodable_json_bodies(body):
    with pytest.raises(BadBody) as info:
        decode_register_body(body, version=407, compressed=False, now=NOW)
    assert info.value.reason == "bad_body" and info.value.remark


def test_deflated_body_labelled_uncompressed_is_a_bad_body():
    with pytest.raises(BadBody):
        decode_register_body(G8, version=479, compressed=False, now=NOW)


def _content(*blocks: bytes, count: int | None = None, tail: bytes = b"") -> bytes:
    """Inflated §8.3 content: DataVersion, topic count, topics, filter list."""
    dv, *topics, filters = blocks

    def block(b):
        return len(b).to_bytes(4, "big") + b

    n = len(topics) if count is None else count
    return block(dv) + n.to_bytes(4, "big", signed=True) + b"".join(map(block, topics)) + block(filters) + tail


def _decode_content(content: bytes) -> RegisterBrokerBody:
    return decode_register_body(zlib.compress(content), version=407, compressed=True, now=NOW)


def test_compressed_lenient_parts():
    dv = b'{"counter":1,"timestamp":2}'
    five_x = _content(dv, b'A 1 2 6 MULTI_TAG {"k":"v"} extra', b"B 1 1 6 SINGLE_TAG  ", b"[]", tail=b"\0\0\0\1junk")
    assert _decode_content(five_x).topics == (
        TopicConfig("A", 1, 2, 6, topic_filter_type="MULTI_TAG"),
        TopicConfig("B", 1, 1, 6),
    )
    assert _decode_content(_content(dv, b"A 1 1 6 SINGLE_TAG", b"{oops")).filter_servers == []
    assert _decode_content(_content(dv, b"null")).filter_servers is None
    duplicate = _content(dv, b"A 1 1 6 SINGLE_TAG", b"A 2 2 6 SINGLE_TAG", b"[]")
    assert _decode_content(duplicate).topics == (TopicConfig("A", 2, 2, 6),)  # the last one wins
    trailing = zlib.compress(_content(dv, b"[]")) + b"trailing"
    assert decode_register_body(trailing, version=407, compressed=True, now=NOW).data_version == DataVersion(2, 1)


@pytest.mark.parametrize(
    "content",
    [
        _content(b'{"counter":1}', b"A 1 1 6", b"[]"),  # 4 tokens
        _content(b'{"counter":1}', b"A 1 1 6 NO_TAG", b"[]"),
        _content(b'{"counter":1}', b"A x 1 6 SINGLE_TAG", b"[]"),
        _content(b'{"counter":1}', b"A 1 1 99999999999 SINGLE_TAG", b"[]"),
        _content(b'{"counter":1}', b"[]", count=-1),
        _content(b'{"counter":1}', b"[]", count=3),  # truncated topics
        _content(b'{"counter":1}', b"[]")[:-3],  # truncated filter list
        _content(b"[]", b"[]"),  # DataVersion not an object
        b"\x00\x00",
    ],
)
def test_compressed_undecodable(content):
    with pytest.raises(BadBody):
        _decode_content(content)


def test_compressed_bad_streams():
    for bad in (b"\x78\xda\x01\x02", G9[:-6], b"plain"):
        with pytest.raises(BadBody):
            decode_register_body(bad, version=407, compressed=True, now=NOW)
    bomb = zlib.compress(b"\0" * 10000)
    with pytest.raises(codec.RegisterTooLarge, match="inflates beyond 1000 bytes > max_register_body_bytes 1000"):
        decode_register_body(bomb, version=407, compressed=True, now=NOW, limits=codec.RegisterLimits(10, 1000))


# ---------------------------------------------------------------------- caps on registrations


def _topics(n: int) -> list[TopicConfig]:
    return [TopicConfig(f"T{i:04d}", 4, 4) for i in range(n)]


@pytest.mark.parametrize("version, compressed", [(407, False), (407, True), (36, False)])
def test_a_registration_at_the_topic_cap_passes_and_one_more_is_refused(version, compressed):
    limits = codec.RegisterLimits(max_topics=50, max_body_bytes=1 << 20)
    at_cap = encode_register_body(DataVersion(1, 1), _topics(50), [], version=version, compressed=compressed)
    assert (
        len(decode_register_body(at_cap, version=version, compressed=compressed, now=NOW, limits=limits).topics) == 50
    )
    over = encode_register_body(DataVersion(1, 1), _topics(51), [], version=version, compressed=compressed)
    with pytest.raises(codec.RegisterTooLarge, match="51 topics > max_register_topics 50") as err:
        decode_register_body(over, version=version, compressed=compressed, now=NOW, limits=limits)
    assert err.value.reason == "register_too_large"


def test_an_uncompressed_body_over_the_byte_cap_is_refused_before_its_crc_and_parse():
    body = encode_register_body(DataVersion(1, 1), _topics(20), [])
    limits = codec.RegisterLimits(max_topics=100, max_body_bytes=len(body))
    assert decode_register_body(body, version=407, compressed=False, now=NOW, limits=limits)
    padded = body + b" not json"  # one byte over would do; neither its CRC nor its JSON is looked at
    with pytest.raises(codec.RegisterTooLarge, match=f"{len(padded)} bytes > max_register_body_bytes {len(body)}"):
        decode_register_body(padded, version=407, compressed=False, now=NOW, limits=limits, body_crc32=1)


def test_a_compressed_body_is_refused_by_its_count_before_the_rest_is_inflated():
    # a million topics announced, and a stream far larger than the cap: the count is read from the
    # first bytes, so the refusal names the topics, not the bytes
    content = _content(b'{"counter":1}', b"[]", count=1_000_000, tail=b"x" * (8 << 20))
    body = zlib.compress(content)
    limits = codec.RegisterLimits(max_topics=1000, max_body_bytes=1 << 20)
    with pytest.raises(codec.RegisterTooLarge, match="1000000 topics"):
        decode_register_body(body, version=407, compressed=True, now=NOW, limits=limits)


def test_a_compressed_body_is_refused_by_its_count_wherever_the_count_sits():
    # a data version padded with whitespace far past the first pieces inflated: the count that
    # follows it is still read, and refused, before a topic is parsed
    topics = [b"T%03d 4 4 6 SINGLE_TAG" % i for i in range(51)]
    content = _content(b'{"counter":1' + b" " * 200_000 + b"}", *topics, b"[]")
    limits = codec.RegisterLimits(max_topics=50, max_body_bytes=1 << 20)
    with pytest.raises(codec.RegisterTooLarge, match="51 topics > max_register_topics 50"):
        decode_register_body(zlib.compress(content), version=407, compressed=True, now=NOW, limits=limits)
    at_cap = _content(b'{"counter":1' + b" " * 200_000 + b"}", *topics[:50], b"[]")
    decoded = decode_register_body(zlib.compress(at_cap), version=407, compressed=True, now=NOW, limits=limits)
    assert len(decoded.topics) == 50


def test_a_compressed_body_over_the_topic_cap_is_refused_before_its_crc_when_its_head_says_so():
    # the count sits in the first bytes of every real body: read there, the refusal comes before
    # the CRC is computed, as an uncompressed body's size does
    limits = codec.RegisterLimits(max_topics=50, max_body_bytes=1 << 20)
    over = encode_register_body(DataVersion(1, 1), _topics(51), [], compressed=True)
    with pytest.raises(codec.RegisterTooLarge, match="51 topics > max_register_topics 50"):
        codec.check_topic_head(over, limits)
    with pytest.raises(codec.RegisterTooLarge, match="51 topics > max_register_topics 50"):
        decode_register_body(over, version=407, compressed=True, now=NOW, limits=limits, body_crc32=1)
    codec.check_topic_head(encode_register_body(DataVersion(1, 1), _topics(50), [], compressed=True), limits)
    # a count past the head is read while inflating, after the CRC; a stream zlib cannot read
    # passes the head to the checks that name what is wrong with it
    late = _content(b'{"counter":1' + b" " * 200_000 + b"}", *(b"T%03d 4 4 6 SINGLE_TAG" % i for i in range(51)), b"[]")
    codec.check_topic_head(zlib.compress(late), limits)
    with pytest.raises(codec.CrcMismatch):
        decode_register_body(zlib.compress(late), version=407, compressed=True, now=NOW, limits=limits, body_crc32=1)
    codec.check_topic_head(b"plain", limits)


def test_inflation_hands_out_bounded_pieces_and_nothing_beyond_the_cap():
    # incompressible and repetitive parts, so that zlib's input and output run at different paces
    content = _content(b'{"counter":1}', b"A 1 1 6 SINGLE_TAG", b"[]", tail=os.urandom(100_000) + b"x" * 300_000)
    body = zlib.compress(content) + b"after the stream"  # ignored, as InflaterInputStream does
    exact = codec.RegisterLimits(max_topics=10, max_body_bytes=len(content))
    pieces = list(codec.inflate_chunks(body, exact))
    assert b"".join(pieces) == content == codec.inflate(body, exact)
    assert max(map(len, pieces)) <= CHUNK_BYTES
    handed: list[bytes] = []
    with pytest.raises(codec.RegisterTooLarge, match=f"inflates beyond {len(content) - 1} bytes"):
        handed.extend(codec.inflate_chunks(body, codec.RegisterLimits(max_topics=10, max_body_bytes=len(content) - 1)))
    assert len(content) - CHUNK_BYTES <= sum(map(len, handed)) < len(content)
    with pytest.raises(BadBody, match="truncated"):
        codec.inflate(zlib.compress(content)[:-100], exact)


def test_a_compressed_body_of_exactly_the_byte_cap_passes():
    content = _content(b'{"counter":1}', b"A 1 1 6 SINGLE_TAG", b"[]")
    body = zlib.compress(content)
    exact = codec.RegisterLimits(max_topics=10, max_body_bytes=len(content))
    assert decode_register_body(body, version=407, compressed=True, now=NOW, limits=exact).topics[0].topic == "A"
    short = codec.RegisterLimits(max_topics=10, max_body_bytes=len(content) - 1)
    with pytest.raises(codec.RegisterTooLarge):
        decode_register_body(body, version=407, compressed=True, now=NOW, limits=short)


def test_topic_config_text_both_forms():
    assert codec.topic_config_text(TOPIC_TEST) == "TopicTest 4 4 6 SINGLE_TAG"
    assert codec.topic_config_text(TOPIC_TEST, with_attributes=True) == "TopicTest 4 4 6 SINGLE_TAG {}"
    assert codec.parse_topic_config_text("TopicTest 4 4 6 SINGLE_TAG {}") == TOPIC_TEST


def test_query_data_version_needs_a_body():
    for body in (None, b"", b"[1]", b"nope"):
        with pytest.raises(BadBody):
            codec.decode_data_version_body(body, NOW)


def test_crc_zero_means_no_check_and_no_body_has_crc_zero():
    assert codec.body_crc32(None) == 0 and codec.body_crc32(b"") == 0
    codec.check_body_crc32(b"anything", 0)
    with pytest.raises(CrcMismatch):
        codec.check_body_crc32(b"anything", -5)


@given(
    st.lists(
        st.builds(
            TopicConfig,
            topic=st.from_regex(r"[%|a-zA-Z0-9_-]{1,20}", fullmatch=True),
            read_queue_nums=_int32,
            write_queue_nums=_int32,
            perm=st.integers(0, 15),
            topic_filter_type=st.sampled_from(["SINGLE_TAG", "MULTI_TAG"]),
        ),
        max_size=5,
        unique_by=lambda t: t.topic,
    ),
    st.builds(DataVersion, st.integers(0, 2**62), st.integers(0, 2**62)),
    st.none() | st.lists(st.text(max_size=10), max_size=3),
    st.sampled_from([37, 315, 407, 413, 479]),
    st.booleans(),
)
def test_register_body_round_trip(topics, data_version, filters, version, compressed):
    body = encode_register_body(data_version, topics, filters, version=version, compressed=compressed)
    decoded = decode_register_body(
        body, version=version, compressed=compressed, now=NOW, body_crc32=codec.body_crc32(body)
    )
    assert decoded.data_version == data_version
    assert decoded.topics == tuple(sorted(topics, key=lambda t: t.topic))
    assert decoded.filter_servers == (filters if filters is not None else ([] if not compressed else None))


# --- .properties (318/319) ---------------------------------------------------------------------------


def test_parse_properties_rules():
    text = (
        "# comment\n! also comment \\\n  \n"
        "a=1\n"
        "b : 2\n"
        "c 3\n"
        "d\t=  spaced value  \n"
        "e=line\\\n    continued\\\n  again\n"
        "f\\=g\\:h=x\\ty\\u00e9\\\\\n"
        "  #indented=comment\r\n"
        "empty=\n"
        "lonekey\n"
        "a=last\r"
        "surrogate=\\uD83D\\uDE00\n"
        "trail=end\\"
    )
    assert codec.parse_properties(text.encode()) == {
        "a": "last",
        "b": "2",
        "c": "3",
        "d": "spaced value  ",
        "e": "linecontinuedagain",
        "f=g:h": "x\tyé\\",
        "empty": "",
        "lonekey": "",
        "surrogate": "😀",
        "trail": "end",
    }


def test_parse_properties_blank_continuation_and_comment_not_continued():
    assert codec.parse_properties("a=1\\\n\nb=2\n#c=3\\\nd=4") == {"a": "1", "b": "2", "d": "4"}
    assert codec.parse_properties("a=1\\\n  #2") == {"a": "1#2"}  # not a comment inside a continuation
    assert codec.parse_properties("名前=値".encode()) == {"名前": "値"}  # UTF-8 kept, unlike 4.9.7


@pytest.mark.parametrize("text", ["a=\\u12", "a=\\uXYZW", "\\u=1"])
def test_parse_properties_malformed_unicode_escape(text):
    with pytest.raises(codec.PropertiesError):
        codec.parse_properties(text)


def test_format_properties():
    assert codec.format_properties({"b": 2, "a": "x", "flag": True, "none": None}) == b"a=x\nb=2\nflag=true\n"
    assert codec.format_properties({}) == b""
    assert codec.parse_properties(codec.format_properties({"k": "v", "n": "9876"})) == {"k": "v", "n": "9876"}
