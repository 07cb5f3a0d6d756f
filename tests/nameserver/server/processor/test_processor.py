"""The request processor alone: pure, one command in, response + events out
(docs/remoting-protocol.md §7, §9.2).

Byte vectors are docs/remoting-protocol.md §11 (G5-G9, D2-D4); the server tests import them
from here to replay the same requests over a socket.
"""

from __future__ import annotations

import pytest

from nameserver.client import register_broker_request, simple_request
from nameserver.codec import (
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    decode_frame,
    encode_frame,
    fastjson,
    make_request,
)
from nameserver.model import DataVersion, TopicConfig
from nameserver.routes.manager import RouteInfoManager
from nameserver.server.processor import SUPPORTED_CODES, ConnectionContext, RequestProcessor

# -------------------------------------------- docs/remoting-protocol.md vectors (§11.2, §11.3)

G5_EXT = (
    '{"brokerId":"0","bodyCrc32":"1308328594","clusterName":"DefaultCluster","brokerAddr":"192.168.0.10:10911",'
    '"enableActingMaster":"false","haServerAddr":"192.168.0.10:10912","compressed":"false","brokerName":"broker-a"}'
)
G6_BODY = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"stateVersion":0,'
    b'"timestamp":1700000000000},"mappingDataVersion":{"counter":0,"stateVersion":0,"timestamp":1700000000001},'
    b'"topicConfigTable":{"TopicTest":{"attributes":{},"order":false,"perm":6,"readQueueNums":4,'
    b'"topicFilterType":"SINGLE_TAG","topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}},'
    b'"topicQueueMappingDetailMap":{},"topicQueueMappingInfoMap":{}}}'
)
G7_BODY = (
    b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":3,"timestamp":1700000000000},'
    b'"topicConfigTable":{"TopicTest":{"order":false,"perm":6,"readQueueNums":4,"topicFilterType":"SINGLE_TAG",'
    b'"topicName":"TopicTest","topicSysFlag":0,"writeQueueNums":4}}}}'
)
G9_BODY = bytes.fromhex(
    "78da63606050af564ace2fcd2b492d52b232d6512ac9cc4d2d2e49cc2d50b232343740805a0606064620960ac92fc84c0e01aa51"
    "3001423385604f3f771fd7f8104777a02c53742c00803f1456"
)
D2B_EXT = (
    '{"bodyCrc32":"416932168","brokerAddr":"192.168.0.10:10911","brokerId":"0","brokerName":"broker-a",'
    '"clusterName":"DefaultCluster","compressed":"false","haServerAddr":"192.168.0.10:10912"}'
)


def json_frame(header: str, body: bytes = b"") -> bytes:
    """A JSON-header frame from header text (§2)."""
    raw = header.encode()
    return (4 + len(raw) + len(body)).to_bytes(4, "big") + len(raw).to_bytes(4, "big") + raw + body


def d2a_frame() -> bytes:
    header = (
        '{"code":103,"extFields":' + G5_EXT + ',"flag":0,"language":"JAVA","opaque":2,'
        '"serializeTypeCurrentRPC":"JSON","version":479}'
    )
    return json_frame(header, G6_BODY)


def d2b_frame(crc: str = "416932168", version: int = 407, opaque: int = 3) -> bytes:
    ext = D2B_EXT.replace("416932168", crc)
    header = (
        f'{{"code":103,"extFields":{ext},"flag":0,"language":"JAVA","opaque":{opaque},'
        f'"serializeTypeCurrentRPC":"JSON","version":{version}}}'
    )
    return json_frame(header, G7_BODY)


def d2c_frame() -> bytes:
    ext = D2B_EXT.replace("416932168", "817412665").replace('"compressed":"false"', '"compressed":"true"')
    header = (
        '{"code":103,"extFields":' + ext + ',"flag":0,"language":"JAVA","opaque":4,'
        '"serializeTypeCurrentRPC":"JSON","version":407}'
    )
    return json_frame(header, G9_BODY)


D2B_RESPONSE = json_frame(
    '{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":3,"serializeTypeCurrentRPC":"JSON","version":407}'
)
D2B_CRC_RESPONSE = json_frame(
    '{"code":1,"extFields":{},"flag":1,"language":"JAVA","opaque":3,"remark":"crc32 not match",'
    '"serializeTypeCurrentRPC":"JSON","version":407}'
)
D3_HEADER = '{"code":0,"flag":1,"language":"JAVA","opaque":5,"serializeTypeCurrentRPC":"JSON","version":407}'
D3_STANDARD_BODY = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"192.168.0.10:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
    b'"writeQueueNums":4}]}'
)
D3_DEFAULT_BODY = D3_STANDARD_BODY.replace(b'{"0":', b"{0:")
FAQ_REMARK = (
    "No topic route info in name server for the topic: {}\n"
    "See http://rocketmq.apache.org/docs/faq/ for further details."
)


def route_frame(topic: str, version: int, opaque: int = 5, accept: str | None = None) -> bytes:
    ext = f'"topic":"{topic}"' if accept is None else f'"acceptStandardJsonOnly":"{accept}","topic":"{topic}"'
    return json_frame(
        f'{{"code":105,"extFields":{{{ext}}},"flag":0,"language":"JAVA","opaque":{opaque},'
        f'"serializeTypeCurrentRPC":"JSON","version":{version}}}'
    )


# ---------------------------------------------------------------------- helpers

M, S = "10.0.0.1:10911", "10.0.0.2:10911"
dv1 = DataVersion(100, 1)
A = TopicConfig("TopicA", 8, 8)
B = TopicConfig("TopicB", 4, 4)
C1 = ConnectionContext("c1", "127.0.0.1:50001")
C2 = ConnectionContext("c2", "127.0.0.1:50002")


@pytest.fixture
def proc() -> RequestProcessor:
    return RequestProcessor(RouteInfoManager())


def run(proc: RequestProcessor, cmd: RemotingCommand | bytes, now: int = 1000, conn: ConnectionContext = C1):
    """Process a command (or a frame, decoded first) and return the outcome."""
    if isinstance(cmd, bytes):
        cmd = decode_frame(cmd)
    return proc.process(cmd, conn, now)


def reg(proc, addr=M, name="broker-a", broker_id=0, dv=dv1, topics=(A,), now=1000, conn=C1, **kw):
    ha = addr.replace("10911", "10912")
    return run(proc, register_broker_request("C1", addr, name, broker_id, ha, dv, topics, **kw), now, conn)


# ---------------------------------------------------------------------- registration vectors (D2)


@pytest.mark.parametrize("frame, request_version", [(d2a_frame(), 479), (d2b_frame(), 407), (d2c_frame(), 407)])
def test_d2_registrations_give_the_same_tables(proc, frame, request_version):
    outcome = run(proc, frame, now=5000)
    assert outcome.response.code == ResponseCode.SUCCESS
    assert outcome.response.ext_fields == {} and outcome.response.body is None
    assert outcome.changed
    (event,) = outcome.events
    assert event["type"] == "register" and event["request_version"] == request_version
    assert event["data_version"] == DataVersion(1700000000000, 3)  # D2a's stateVersion dropped
    routes = proc.routes
    assert {c: sorted(n) for c, n in routes.cluster_addr_table.items()} == {"DefaultCluster": ["broker-a"]}
    assert routes.broker_addr_table["broker-a"].broker_addrs == {0: "192.168.0.10:10911"}
    queue = routes.topic_queue_table["TopicTest"]["broker-a"]
    assert (queue.read_queue_nums, queue.write_queue_nums, queue.perm, queue.topic_sys_flag) == (4, 4, 6, 0)
    assert encode_frame(outcome.response) == D2B_RESPONSE.replace(
        b'"opaque":3', f'"opaque":{decode_frame(frame).opaque}'.encode()
    )
    assert run(proc, frame, now=6000).events[0]["type"] == "heartbeat"


def test_d2b_response_bytes(proc):
    assert encode_frame(run(proc, d2b_frame()).response) == D2B_RESPONSE


def test_crc_mismatch_refused_without_change_w27(proc):
    outcome = run(proc, d2b_frame(crc="416932169"))
    assert encode_frame(outcome.response) == D2B_CRC_RESPONSE
    assert [e["reason"] for e in outcome.events] == ["crc_mismatch"]
    assert outcome.events[0]["broker_addr"] == "192.168.0.10:10911"
    assert not proc.routes.broker_live_table and not proc.routes.topic_queue_table
    # W27 step 2: without bodyCrc32 (or 0) there is no check
    accepted = run(proc, d2b_frame(crc="0"), now=2000)
    assert accepted.response.code == ResponseCode.SUCCESS and accepted.events[0]["type"] == "register"


def test_version_36_reads_the_old_body_format(proc):
    outcome = run(proc, d2b_frame(version=36), now=4242)
    assert outcome.response.code == ResponseCode.SUCCESS
    event = outcome.events[0]
    assert event["topics"] == () and event["filter_servers"] is None
    assert event["data_version"] == DataVersion(4242, 0)  # the server's clock, counter 0
    assert not proc.routes.topic_queue_table


def test_negative_version_and_bad_bodies_are_refused(proc):
    neg = register_broker_request(
        "C1", M, "broker-a", 0, "h", dv1, [A], version=-1, serialize_type=SerializeType.ROCKETMQ
    )
    outcome = run(proc, neg)
    assert outcome.response.code == ResponseCode.SYSTEM_ERROR and outcome.response.ext_fields is None
    assert outcome.events[0]["reason"] == "bad_header"
    bad = register_broker_request("C1", M, "broker-a", 0, "h", dv1, [A], with_crc=False)
    bad.body = b"[not json"
    outcome = run(proc, bad)
    assert outcome.response.code == ResponseCode.SYSTEM_ERROR and outcome.response.ext_fields is None
    assert outcome.events[0]["reason"] == "bad_body" and outcome.events[0]["detail"]
    bad = register_broker_request("C1", M, "broker-a", 0, "h", dv1, [A], compressed=True, with_crc=False)
    bad.body = bad.body[:-5]
    assert run(proc, bad).events[0]["reason"] == "bad_body"
    assert not proc.routes.broker_live_table


def test_missing_and_unparsable_required_fields(proc):
    outcome = run(proc, simple_request(RequestCode.UNREGISTER_BROKER, {"brokerName": "a", "brokerAddr": M}))
    assert outcome.response.code == ResponseCode.SYSTEM_ERROR
    assert outcome.response.remark == "the custom field clusterName is null"
    assert outcome.events[0] | {"ts": 0} == {
        "ts": 0,
        "type": "rejected",
        "request_code": 104,
        "channel": "c1",
        "remote": "127.0.0.1:50001",
        "reason": "bad_header",
        "detail": "the custom field clusterName is null",
        "broker_name": "a",
        "broker_addr": M,
        "request_version": 407,
    }
    outcome = run(
        proc,
        simple_request(
            RequestCode.UNREGISTER_BROKER, {"brokerName": "a", "brokerAddr": M, "clusterName": "C1", "brokerId": "x1"}
        ),
    )
    assert outcome.response.code == ResponseCode.SYSTEM_ERROR and "brokerId" in outcome.response.remark
    assert outcome.events[0]["reason"] == "bad_header"


def test_slave_learns_its_master_and_order_topic_config_is_returned(proc):
    reg(proc)
    outcome = reg(proc, addr=S, broker_id=1, conn=C2, now=2000)
    assert outcome.response.ext_fields == {"haServerAddr": "10.0.0.1:10912", "masterAddr": M}
    run(
        proc,
        simple_request(
            RequestCode.PUT_KV_CONFIG, {"namespace": "ORDER_TOPIC_CONFIG", "key": "TopicA", "value": "broker-a:8"}
        ),
    )
    outcome = reg(proc, now=3000)
    assert outcome.response.body == b'{"table":{"TopicA":"broker-a:8"}}'


# ---------------------------------------------------------------------- lookups (105, 106, lists)


def test_route_forms_d3(proc):
    run(proc, d2b_frame())
    header = D3_HEADER.encode()
    for frame, body in [
        (route_frame("TopicTest", 401), D3_STANDARD_BODY),
        (route_frame("TopicTest", 400, accept="true"), D3_STANDARD_BODY),
        (route_frame("TopicTest", 400, accept="TRUE"), D3_STANDARD_BODY),
        (route_frame("TopicTest", 400), D3_DEFAULT_BODY),
        (route_frame("TopicTest", 400, accept="yes"), D3_DEFAULT_BODY),
    ]:
        response = run(proc, frame).response
        response.version = 407
        expected = (4 + len(header) + len(body)).to_bytes(4, "big") + len(header).to_bytes(4, "big") + header + body
        assert encode_frame(response) == expected
    assert encode_frame(run(proc, route_frame("TopicTest", 407)).response)[:8] == bytes.fromhex("000001510000005f")


def test_unknown_topic_remark(proc):
    response = run(proc, simple_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "Nope"})).response
    assert response.code == ResponseCode.TOPIC_NOT_EXIST and response.remark == FAQ_REMARK.format("Nope")


def test_route_cache_follows_table_changes(proc):
    reg(proc, topics=(A, B))

    def route():
        return run(proc, simple_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"})).response

    assert b'"perm":6' in route().body
    run(proc, simple_request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}))
    assert b'"perm":4' in route().body
    proc.on_channel_close(C1, 3000)
    assert route().code == ResponseCode.TOPIC_NOT_EXIST


def test_cluster_info_is_always_default_form(proc):
    reg(proc)
    body = run(proc, simple_request(RequestCode.GET_BROKER_CLUSTER_INFO, version=479)).response.body
    assert body == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"10.0.0.1:10911"},"brokerName":"broker-a",'
        b'"cluster":"C1"}},"clusterAddrTable":{"C1":["broker-a"]}}'
    )


def test_listings(proc):
    reg(proc, topics=(A, B, TopicConfig("TopicU", 4, 4, topic_sys_flag=1)))

    def body(code, ext=None):
        return run(proc, simple_request(code, ext)).response.body

    assert body(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER) == b'{"topicList":["TopicA","TopicB","TopicU"]}'
    assert body(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "C1"}) == b'{"topicList":["TopicA","TopicB","TopicU"]}'
    assert body(RequestCode.GET_TOPICS_BY_CLUSTER, {"cluster": "C9"}) == b'{"topicList":[]}'
    assert (
        body(RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS)
        == b'{"brokerAddr":"10.0.0.1:10911","topicList":["C1","broker-a"]}'
    )
    assert body(RequestCode.GET_UNIT_TOPIC_LIST) == b'{"topicList":["TopicU"]}'
    assert body(RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST) == b'{"topicList":[]}'


# ---------------------------------------------------------------------- broker keep-alives (322, 904)


def test_query_data_version_d4(proc):
    run(proc, d2b_frame(), now=1000)
    same = simple_request(
        RequestCode.QUERY_DATA_VERSION,
        {"brokerName": "broker-a", "brokerAddr": "192.168.0.10:10911", "clusterName": "DefaultCluster", "brokerId": 0},
        b'{"counter":3,"timestamp":1700000000000}',
    )
    outcome = run(proc, same, now=9000)
    assert outcome.response.ext_fields == {"changed": "false"}
    assert outcome.response.body == b'{"counter":3,"timestamp":1700000000000}'
    assert proc.routes.broker_live_table["192.168.0.10:10911"].last_update == 9000
    same.body = b'{"counter":4,"timestamp":1700000000000}'
    outcome = run(proc, same, now=10000)
    assert outcome.response.ext_fields == {"changed": "true"}
    assert outcome.response.body == b'{"counter":3,"timestamp":1700000000000}'
    assert proc.routes.broker_live_table["192.168.0.10:10911"].last_update == 9000
    same.body = None
    outcome = run(proc, same)
    assert outcome.response.code == ResponseCode.SYSTEM_ERROR and outcome.events[0]["reason"] == "bad_body"


def test_broker_heartbeat_oneway(proc):
    reg(proc)
    hb = simple_request(
        RequestCode.BROKER_HEARTBEAT, {"clusterName": "C1", "brokerAddr": M, "brokerName": "broker-a"}, oneway=True
    )
    outcome = run(proc, hb, now=50_000, conn=C2)
    assert outcome.response is None and outcome.events[0]["type"] == "heartbeat"
    live = proc.routes.broker_live_table[M]
    assert live.last_update == 50_000 and live.channel == "c1"


# ---------------------------------------------------------------------- admin (205, 216, 327, 104)


def test_wipe_add_delete_unregister(proc):
    reg(proc, topics=(A, B))
    wipe = run(proc, simple_request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"}))
    assert wipe.response.ext_fields == {"wipeTopicCount": "2"} and wipe.events[0]["type"] == "wipe_write_perm"
    add = run(proc, simple_request(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "broker-x"}))
    assert add.response.ext_fields == {"addTopicCount": "0"}
    delete = run(proc, simple_request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "TopicA"}))
    assert delete.response.code == ResponseCode.SUCCESS and delete.events[0]["cluster"] is None
    assert sorted(proc.routes.topic_queue_table) == ["TopicB"]
    unreg = run(
        proc,
        simple_request(
            RequestCode.UNREGISTER_BROKER,
            {"brokerName": "broker-a", "brokerAddr": M, "clusterName": "C1", "brokerId": 0},
        ),
    )
    assert unreg.response.code == ResponseCode.SUCCESS and unreg.response.ext_fields is None
    assert unreg.events[0]["type"] == "unregister" and not proc.routes.broker_addr_table


# ---------------------------------------------------------------------- KV and own config


def test_kv_config(proc):
    def req(code, **ext):
        return run(proc, simple_request(code, ext)).response

    missing = req(RequestCode.GET_KV_CONFIG, namespace="ns", key="k")
    assert missing.code == ResponseCode.QUERY_NOT_FOUND and missing.ext_fields == {}
    assert missing.remark == "No config item, Namespace: ns Key: k"
    listing = req(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="ns")
    assert listing.code == ResponseCode.QUERY_NOT_FOUND and listing.remark == "No config item, Namespace: ns"
    assert req(RequestCode.PUT_KV_CONFIG, namespace="ns", key="k", value="v").code == ResponseCode.SUCCESS
    assert req(RequestCode.GET_KV_CONFIG, namespace="ns", key="k").ext_fields == {"value": "v"}
    assert req(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="ns").body == b'{"table":{"k":"v"}}'
    assert req(RequestCode.DELETE_KV_CONFIG, namespace="ns", key="k").code == ResponseCode.SUCCESS
    assert req(RequestCode.DELETE_KV_CONFIG, namespace="zz", key="k").code == ResponseCode.SUCCESS
    assert req(RequestCode.GET_KVLIST_BY_NAMESPACE, namespace="ns").body == b'{"table":{}}'  # emptied, kept
    assert req(RequestCode.PUT_KV_CONFIG, namespace="ns", key="k").remark == "the custom field value is null"


def test_namesrv_config(proc):
    def update(text):
        return run(proc, simple_request(RequestCode.UPDATE_NAMESRV_CONFIG, None, text)).response

    assert update(None).code == ResponseCode.SUCCESS
    assert update(b"kvConfigPath=/tmp/x").remark == "Can not update config path"
    assert update(b"configBlackList=x").remark == "Can not update config in black list."
    forbidden = update(b"brokerExpiryMs=1")
    assert forbidden.code == ResponseCode.NO_PERMISSION and forbidden.remark == "Can not update config in black list."
    bad = update(b"a=\\u12")
    assert bad.code == ResponseCode.SYSTEM_ERROR and bad.remark == "string2Properties error"
    assert update(b"enableTopicList = true\n# c\nproductEnvName:test").code == ResponseCode.SUCCESS
    body = run(proc, simple_request(RequestCode.GET_NAMESRV_CONFIG)).response.body
    assert b"enableTopicList=true\n" in body and b"productEnvName=test\n" in body
    lines = body.decode().splitlines()
    assert lines == sorted(lines)
    # config changes log nothing and touch no route
    assert run(proc, simple_request(RequestCode.UPDATE_NAMESRV_CONFIG, None, b"x=1")).events == []


# ---------------------------------------------------------------------- dispatch and errors


@pytest.mark.parametrize("code", [217, 901, 905, 99999, -5, 215])
def test_unknown_codes_w28(proc, code):
    outcome = run(proc, make_request(code, {"topic": "T"}, opaque=9))
    assert outcome.response.code == ResponseCode.REQUEST_CODE_NOT_SUPPORTED
    assert outcome.response.remark == f" request type {code} not supported"
    assert outcome.response.opaque == 9 and outcome.response.flag == 1
    assert [e["reason"] for e in outcome.events] == ["unknown_code"] and not outcome.changed
    oneway = run(proc, make_request(code, oneway=True))
    assert oneway.response is None and oneway.events[0]["reason"] == "unknown_code"


def test_dispatch_covers_protocol_section_7():
    assert SUPPORTED_CODES == {
        100,
        101,
        102,
        103,
        104,
        105,
        106,
        205,
        206,
        216,
        219,
        224,
        304,
        311,
        312,
        313,
        318,
        319,
        322,
        327,
        904,
    }


def test_stray_response_is_dropped(proc):
    cmd = make_request(105, {"topic": "T"})
    cmd.flag = 1
    outcome = run(proc, cmd)
    assert outcome.response is None and outcome.events == [] and not outcome.changed


def test_internal_error_becomes_system_error(proc, monkeypatch):
    def boom(*args, **kwargs):
        raise KeyError("broken")

    monkeypatch.setattr(proc.routes, "get_all_topic_list", boom)
    outcome = run(proc, simple_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER))
    assert outcome.response.code == ResponseCode.SYSTEM_ERROR and "broken" in outcome.response.remark
    assert outcome.events[0]["reason"] == "internal_error"


def test_responses_use_the_request_serialize_type(proc):
    request = simple_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicTest"})
    request.serialize_type = SerializeType.ROCKETMQ
    request.opaque = 1
    response = run(proc, request).response
    assert response.serialize_type == SerializeType.ROCKETMQ
    frame = encode_frame(response)
    assert decode_frame(frame).remark == FAQ_REMARK.format("TopicTest")
    assert fastjson.loads(b'{"a":1}') == {"a": 1}  # the lenient reader the tests rely on


# ---------------------------------------------------------------------- shortcuts must not change answers


def test_register_body_cache_recalls_but_still_checks_crc(proc):
    first = reg(proc, now=1000)
    assert proc.register_bodies.misses == 1
    again = reg(proc, now=2000)
    assert proc.register_bodies.hits == 1
    assert again.events[0]["topics_digest"] == first.events[0]["topics_digest"]
    bad = register_broker_request("C1", M, "broker-a", 0, "h", dv1, [A])
    bad.ext_fields["bodyCrc32"] = str((int(bad.ext_fields["bodyCrc32"]) + 1) % 2**31)
    assert run(proc, bad).events[0]["reason"] == "crc_mismatch"  # a cached body is CRC-checked too
    # a DataVersion without timestamp takes the clock: such a body is never recalled
    body = b'{"filterServerList":[],"topicConfigSerializeWrapper":{"dataVersion":{"counter":1},"topicConfigTable":{}}}'

    def req():
        return simple_request(
            RequestCode.REGISTER_BROKER,
            {"brokerName": "broker-b", "brokerAddr": S, "clusterName": "C1", "haServerAddr": "h", "brokerId": 0},
            body,
        )

    assert run(proc, req(), now=5000).events[0]["data_version"] == DataVersion(5000, 1)
    assert run(proc, req(), now=6000).events[0]["data_version"] == DataVersion(6000, 1)


def test_register_body_cache_is_bounded():
    from nameserver.server.bodycache import RegisterBodyCache

    cache = RegisterBodyCache(max_topics=25)
    for n in range(10):
        body = register_broker_request("C1", M, "a", 0, "h", DataVersion(1, n), [A, B]).body
        cache.decode(body, version=407, compressed=False, body_crc32=0, now=0)
    assert cache.topic_count <= 25 and len(cache) == 8  # (2 topics + 1) per entry


def test_register_body_cache_is_bounded_by_bytes_and_recalls_only_equal_bytes():
    from nameserver.server.bodycache import RegisterBodyCache

    cache = RegisterBodyCache(max_topics=1000, max_bytes=10_000)
    plain = register_broker_request("C1", M, "a", 0, "h", DataVersion(1, 0), [A]).body
    for n in range(10):  # few topics, many bytes: whitespace the JSON allows
        body = plain[:-1] + b" " * (3000 + n) + b"}"
        cache.decode(body, version=407, compressed=False, body_crc32=0, now=0)
    assert cache.byte_count <= 10_000 and len(cache) == 3
    first, _ = cache.decode(plain, version=407, compressed=False, body_crc32=0, now=0)
    assert cache.decode(bytes(plain), version=407, compressed=False, body_crc32=0, now=0)[0] is first
    assert cache.decode(bytearray(plain), version=407, compressed=False, body_crc32=0, now=0)[0] is first
    other = plain.replace(b'"counter":0', b'"counter":1')
    assert cache.decode(other, version=407, compressed=False, body_crc32=0, now=0)[0] is not first


def test_register_body_cache_recalls_bodies_of_one_length_after_evictions():
    # bodies of equal length (counters 0..9), three held at a time: the newest are recalled, the
    # evicted ones decoded afresh
    from nameserver.server.bodycache import RegisterBodyCache

    cache = RegisterBodyCache(max_topics=6)  # (1 topic + 1) per entry
    bodies = [register_broker_request("C1", M, "a", 0, "h", DataVersion(1, n), [A]).body for n in range(10)]
    assert len(set(map(len, bodies))) == 1
    for body in bodies:
        cache.decode(body, version=407, compressed=False, body_crc32=0, now=0)
    assert [cache.holds(body, version=407, compressed=False) for body in bodies] == [False] * 7 + [True] * 3
    misses = cache.misses
    cache.decode(bodies[9], version=407, compressed=False, body_crc32=0, now=0)
    assert (cache.hits, cache.misses) == (1, misses)
    cache.decode(bodies[0], version=407, compressed=False, body_crc32=0, now=0)  # evicts bodies[7]
    assert cache.misses == misses + 1
    assert [cache.holds(body, version=407, compressed=False) for body in bodies[7:]] == [False, True, True]
    assert cache.holds(bodies[0], version=407, compressed=False)


@pytest.mark.parametrize("opaque", [0, 1, -1, 2**31 - 1, -(2**31), 123456])
@pytest.mark.parametrize("body", [None, b"", b'{"x":1}'])
def test_encode_response_shortcut_is_encode_frame(opaque, body):
    from nameserver.codec import make_response
    from nameserver.server.channel import encode_response

    request = make_request(105, {"topic": "T"}, opaque=opaque)
    for response in (
        make_response(request, 0, body=body),
        make_response(request, 17, remark="r"),
        make_response(request, 0, ext_fields={}, body=body),
    ):
        assert encode_response(response) == encode_frame(response)
    request.serialize_type = SerializeType.ROCKETMQ
    response = make_response(request, 0, body=body)
    assert encode_response(response) == encode_frame(response)


def test_route_shortcut_still_reports_a_missing_topic(proc):
    outcome = run(proc, simple_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"acceptStandardJsonOnly": "true"}))
    assert outcome.response.code == ResponseCode.SYSTEM_ERROR
    assert outcome.response.remark == "the custom field topic is null"
    assert outcome.events[0]["reason"] == "bad_header"
