"""fastjson-compatible bodies: golden texts of docs/remoting-protocol.md §11 (T12-T14, T16, G10, D3)
and §10 rules."""

from __future__ import annotations

from dataclasses import dataclass, field

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from nameserver.codec import fastjson as fj
from nameserver.model import DataVersion, QueueData


# Stand-ins with exactly the shapes nameserver.routes.manager returns (duck typed by the encoder).
@dataclass
class BrokerData:
    cluster: str
    broker_name: str
    broker_addrs: dict[int, str] = field(default_factory=dict)


@dataclass
class TopicRouteData:
    broker_datas: list[BrokerData]
    queue_datas: list[QueueData]
    filter_server_table: dict[str, list[str]]


@dataclass
class ClusterInfo:
    broker_addr_table: dict[str, BrokerData]
    cluster_addr_table: dict[str, list[str]]


G10A = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster","enableActingMaster":false}],"filterServerTable":{},"queueDatas":[{"brokerName":'
    b'"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,"writeQueueNums":4}]}'
)
G10B = G10A.replace(b'{0:"127.0.0.1:10911",1:', b'{"0":"127.0.0.1:10911","1":')
G10C = (
    b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},"brokerName":"broker-a",'
    b'"cluster":"DefaultCluster"}],"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,'
    b'"readQueueNums":4,"topicSynFlag":0,"writeQueueNums":4}]}'
)
G10D = (
    b'{"bname":"broker-a","currIdMap":{0:0,1:1},"dirty":false,"epoch":1,"scope":"__global__",'
    b'"topic":"StaticTopic","totalQueues":4}'
)
D3_STANDARD = (
    b'{"brokerDatas":[{"brokerAddrs":{"0":"192.168.0.10:10911"},"brokerName":"broker-a","cluster":"DefaultCluster"}],'
    b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,"topicSysFlag":0,'
    b'"writeQueueNums":4}]}'
)
D3_DEFAULT = D3_STANDARD.replace(b'{"0":', b"{0:")

ROUTE_A = {
    "broker_datas": [
        {
            "cluster": "DefaultCluster",
            "broker_name": "broker-a",
            "broker_addrs": {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"},
        }
    ],
    "queue_datas": [
        {"broker_name": "broker-a", "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6, "topic_sys_flag": 0}
    ],
    "filter_server_table": {},
}


def d3_route() -> TopicRouteData:
    return TopicRouteData(
        [BrokerData("DefaultCluster", "broker-a", {0: "192.168.0.10:10911"})], [QueueData("broker-a", 4, 4, 6, 0)], {}
    )


# --- golden texts -----------------------------------------------------------------------------


def test_d3_route_bodies_exact_in_both_forms():
    assert len(D3_STANDARD) == 238 and len(D3_DEFAULT) == 236
    assert fj.encode_route(d3_route(), standard=True) == D3_STANDARD
    assert fj.encode_route(d3_route(), standard=False) == D3_DEFAULT


def test_route_from_plain_dicts_equals_route_from_dataclasses():
    as_dicts = {
        "broker_datas": [
            {"cluster": "DefaultCluster", "broker_name": "broker-a", "broker_addrs": {0: "192.168.0.10:10911"}}
        ],
        "queue_datas": [
            {"broker_name": "broker-a", "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6, "topic_sys_flag": 0}
        ],
        "filter_server_table": {},
    }
    assert fj.encode_route(as_dicts, standard=True) == D3_STANDARD


def test_g10a_and_g10b_parse_to_the_same_route():
    assert fj.parse_route(G10A) == fj.parse_route(G10B) == ROUTE_A
    assert fj.parse_route(G10A.decode()) == ROUTE_A  # text input too


def test_g10c_old_spelling_topic_syn_flag_is_read():
    assert fj.parse_route(G10C) == ROUTE_A
    unit = fj.parse_route(G10C.replace(b'"topicSynFlag":0', b'"topicSynFlag":1'))
    assert unit["queue_datas"][0]["topic_sys_flag"] == 1
    both = G10C.replace(b'"topicSynFlag":0', b'"topicSynFlag":1,"topicSysFlag":2')
    assert fj.parse_route(both)["queue_datas"][0]["topic_sys_flag"] == 2


def test_g10d_static_topic_mapping_parses_leniently():
    assert fj.loads(G10D)["currIdMap"] == {"0": 0, "1": 1}
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(G10D)  # why the lenient path exists


def test_g10e_topic_list_and_kv_table():
    assert fj.encode_topic_list(["TopicTest"]) == b'{"topicList":["TopicTest"]}'
    assert (
        fj.encode_kv_table({"TopicTest": "broker-a:4;broker-b:4"}) == b'{"table":{"TopicTest":"broker-a:4;broker-b:4"}}'
    )
    assert fj.parse_topic_list(b'{"topicList":["TopicTest"]}') == {"topic_list": ["TopicTest"], "broker_addr": None}
    assert fj.parse_kv_table(b'{"table":{"TopicTest":"broker-a:4;broker-b:4"}}') == {
        "TopicTest": "broker-a:4;broker-b:4"
    }


def test_topic_list_sorted_with_broker_addr_for_304():
    body = fj.encode_topic_list({"b", "a", "TBW102"}, broker_addr="10.0.0.1:10911")
    assert body == b'{"brokerAddr":"10.0.0.1:10911","topicList":["TBW102","a","b"]}'
    assert fj.parse_topic_list(body) == {"topic_list": ["TBW102", "a", "b"], "broker_addr": "10.0.0.1:10911"}
    assert fj.encode_topic_list([]) == b'{"topicList":[]}'


def test_g10f_data_version_4x_form():
    assert fj.encode_data_version(DataVersion(1700000000000, 3)) == b'{"counter":3,"timestamp":1700000000000}'


def test_g10g_cluster_info_always_default_form():
    info = ClusterInfo(
        {"broker-a": BrokerData("DefaultCluster", "broker-a", {1: "127.0.0.1:10921", 0: "127.0.0.1:10911"})},
        {"DefaultCluster": ["broker-a"]},
    )
    body = fj.encode_cluster_info(info)
    assert body == (
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{0:"127.0.0.1:10911",1:"127.0.0.1:10921"},'
        b'"brokerName":"broker-a","cluster":"DefaultCluster"}},"clusterAddrTable":{"DefaultCluster":["broker-a"]}}'
    )
    assert fj.parse_cluster_info(body) == {
        "broker_addr_table": {
            "broker-a": {
                "cluster": "DefaultCluster",
                "broker_name": "broker-a",
                "broker_addrs": {0: "127.0.0.1:10911", 1: "127.0.0.1:10921"},
            }
        },
        "cluster_addr_table": {"DefaultCluster": ["broker-a"]},
    }


def test_cluster_info_sorts_tables_and_sets_and_allows_dangling_names():
    info = {
        "broker_addr_table": {"b": BrokerData("c1", "b", {0: "x:2"}), "a": BrokerData("c1", "a", {0: "x:1"})},
        "cluster_addr_table": {"c2": {"z", "ghost"}, "c1": {"b", "a"}},
    }
    body = fj.encode_cluster_info(info)
    assert body.index(b'"a":{') < body.index(b'"b":{')
    assert body.endswith(b'"clusterAddrTable":{"c1":["a","b"],"c2":["ghost","z"]}}')


def test_t12_t13_long_keyed_map_default_and_standard_form():
    assert fj.dumps({0: "Test"}) == b'{0:"Test"}'
    assert fj.dumps({0: "Test"}, standard=True) == b'{"0":"Test"}'
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(fj.dumps({0: "Test"}))  # a strict parser rejects the default form
    assert orjson.loads(fj.dumps({0: "Test"}, standard=True)) == {"0": "Test"}
    assert fj.loads(b'{0:"Test"}') == fj.loads(b'{"0":"Test"}') == {"0": "Test"}


def test_t14_string_list_compact_and_pretty():
    compact = b'{"stringList":["a","o","e","i","u","v"]}'
    assert fj.dumps({"stringList": ["a", "o", "e", "i", "u", "v"]}) == compact
    pretty = '{\n\t"stringList":[\n\t\t"a",\n\t\t"o",\n\t\t"e",\n\t\t"i",\n\t\t"u",\n\t\t"v"\n\t]\n}'
    assert fj.loads(pretty) == fj.loads(compact) == {"stringList": ["a", "o", "e", "i", "u", "v"]}


@pytest.mark.parametrize("standard", [False, True])
def test_t16_route_json_round_trip(standard):
    route = TopicRouteData(
        [BrokerData("DefaultCluster", "broker-a", {0: "192.168.0.47:10911", 1: "192.168.0.47:10921"})],
        [QueueData("broker-a", 8, 8, 6, 0)],
        {},
    )
    parsed = fj.parse_route(fj.encode_route(route, standard))
    assert parsed["broker_datas"] == [
        {
            "cluster": "DefaultCluster",
            "broker_name": "broker-a",
            "broker_addrs": {0: "192.168.0.47:10911", 1: "192.168.0.47:10921"},
        }
    ]
    assert [QueueData(**q) for q in parsed["queue_datas"]] == route.queue_datas
    assert parsed["filter_server_table"] == {}


# --- §10.1 output rules -----------------------------------------------------------------------


def test_route_lists_sorted_by_broker_name_and_ids_numerically():
    route = TopicRouteData(
        [BrokerData("c", "broker-b", {10: "h:10", 2: "h:2"}), BrokerData("c", "broker-a", {0: "h:0"})],
        [QueueData("broker-b", 1, 1, 6, 0), QueueData("broker-a", 2, 2, 6, 0)],
        {"h:2": ["f:2", "f:1"], "h:0": ["f:0"]},
    )
    text = fj.encode_route(route).decode()
    assert text.index('"brokerName":"broker-a","cluster"') < text.index('"brokerName":"broker-b","cluster"')
    assert '{2:"h:2",10:"h:10"}' in text
    assert '"filterServerTable":{"h:0":["f:0"],"h:2":["f:2","f:1"]}' in text  # lists as given
    assert text.index('"queueDatas":[{"brokerName":"broker-a"') > 0


def test_null_fields_and_null_map_values_are_omitted():
    route = {
        "broker_datas": [{"cluster": None, "broker_name": "b", "broker_addrs": {0: "a", 1: None}}],
        "queue_datas": [],
        "filter_server_table": None,
    }
    assert (
        fj.encode_route(route)
        == b'{"brokerDatas":[{"brokerAddrs":{0:"a"},"brokerName":"b"}],"filterServerTable":{},"queueDatas":[]}'
    )
    assert fj.encode_kv_table({"k": "v", "gone": None}) == b'{"table":{"k":"v"}}'
    assert fj.dumps({"b": None, "a": [None, 1]}) == b'{"a":[null,1]}'


def test_string_escapes_default_form_as_fastjson():
    text = 'q"b\\s/\b\f\n\r\t\x00\x07\x0b\x1f\x7f\x9f\xa0é\u2028\u2029😀'
    expected = '"q\\"b\\\\s/\\b\\f\\n\\r\\t\\u0000\\u0007\\u000B\\u001F\\u007F\\u009F\xa0é\\u2028\\u2029😀"'
    assert fj.quote(text) == expected
    assert fj.dumps(text) == expected.encode()


def test_string_escapes_standard_form_as_browser_compatible():
    text = 'q"b\\s/\n\x00\x7f\xa0é\u2028😀'
    expected = '"q\\"b\\\\s\\/\\n\\u0000\\u007F\\u00A0\\u00E9\\u2028\\uD83D\\uDE00"'
    assert fj.quote(text, standard=True) == expected
    assert orjson.loads(expected) == text


def test_standard_form_route_with_non_ascii_is_ascii_only():
    route = TopicRouteData([BrokerData("集群", "broker/é", {0: "h:1"})], [QueueData("broker/é", 1, 1, 6, 0)], {})
    body = fj.encode_route(route, standard=True)
    assert body.isascii() and b"\\/" in body and b"\\u00E9" in body
    default = fj.encode_route(route)
    assert "集群".encode() in default and b"broker/\xc3\xa9" in default
    assert fj.parse_route(body) == fj.parse_route(default)


@pytest.mark.parametrize(
    "value, text",
    [
        (0.618, "0.618"),
        (5.0, "5.0"),
        (1e7, "1.0E7"),
        (1e10, "1.0E10"),
        (1.5e-5, "1.5E-5"),
        (0.001, "0.001"),
        (-2.5e-4, "-2.5E-4"),
        (123456789.125, "1.23456789125E8"),
        (0.0, "0.0"),
        (-0.0, "-0.0"),
        (float("nan"), "NaN"),
        (float("inf"), "Infinity"),
        (float("-inf"), "-Infinity"),
    ],
)
def test_java_double_text(value, text):
    assert fj.java_double_text(value) == text


def test_dumps_refuses_unknown_types():
    with pytest.raises(TypeError):
        fj.dumps({"a": object()})


# --- §10.2 input rules ------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ('{0:"a",-1:"b"}', {"0": "a", "-1": "b"}),
        ('{ 0 : "a" ,\n\t1\t:"b"}', {"0": "a", "1": "b"}),
        ('{"k":"{0:1,2:3}",5:"x"}', {"k": "{0:1,2:3}", "5": "x"}),
        ('{"k":"\\",0:"}', {"k": '",0:'}),
        ("[{1:[{2:3}]}]", [{"1": [{"2": 3}]}]),
        ('{"a":[1,2],"b":{}}', {"a": [1, 2], "b": {}}),
    ],
)
def test_loads_accepts_bare_integer_keys_only_outside_strings(text, expected):
    assert fj.loads(text) == expected
    assert fj.loads(text.encode()) == expected


@pytest.mark.parametrize("text", ['{a:"b"}', "{0:}", "[1,2:3]", "NaN", "", "{'a':1}", '{"a":1', "{0:1}}"])
def test_loads_rejects_what_is_not_json_nor_default_form(text):
    with pytest.raises(fj.FastjsonError):
        fj.loads(text)


def test_loads_replaces_invalid_utf8_and_takes_lone_surrogate_escapes():
    assert fj.loads(b'{"a":"x\xff",0:1}') == {"a": "x\ufffd", "0": 1}
    assert fj.loads(b'{"a":"\\ud800"}') == {"a": "\ud800"}


@pytest.mark.parametrize(
    "text",
    ["[]", '{"brokerDatas":[1]}', '{"brokerDatas":[{"brokerAddrs":{"x":"a"}}]}', '{"queueDatas":[{"perm":"6"}]}'],
)
def test_parse_route_rejects_wrong_shapes(text):
    with pytest.raises(fj.FastjsonError):
        fj.parse_route(text)


def test_parse_route_defaults_missing_parts():
    assert fj.parse_route("{}") == {"broker_datas": [], "queue_datas": [], "filter_server_table": {}}


# --- properties (hypothesis) ------------------------------------------------------------------

_int_keys = st.integers(-(2**40), 2**40)
_keys = st.one_of(st.text(max_size=8), _int_keys)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1), st.text(max_size=12))
_values = st.recursive(
    _scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.text(max_size=8), inner, max_size=4),
        st.dictionaries(st.integers(-(2**40), 2**40), inner, max_size=4),
    ),
    max_leaves=20,
)


def _as_parsed(value):
    """What a parser returns for ``value``: map keys as strings, null map values gone."""
    if isinstance(value, dict):
        return {str(k): _as_parsed(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_as_parsed(v) for v in value]
    return value


@given(_values, st.booleans())
def test_dumps_then_loads_round_trips_in_both_forms(value, standard):
    text = fj.dumps(value, standard)
    assert fj.loads(text) == _as_parsed(value)
    if standard:
        assert text.isascii()
        assert orjson.loads(text) == _as_parsed(value)  # the standard form is strict JSON


@given(st.dictionaries(_int_keys, st.text(max_size=5), max_size=6))
def test_int_keys_are_sorted_numerically(mapping):
    parsed = fj.loads(fj.dumps(mapping))
    assert [int(k) for k in parsed] == sorted(mapping)


@given(st.text(), st.booleans())
def test_quote_is_valid_json_for_any_text(text, standard):
    assert orjson.loads(fj.quote(text, standard)) == text


_names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=10)


@given(
    st.dictionaries(
        _names, st.tuples(_names, st.dictionaries(st.integers(0, 2**40), _names, min_size=1, max_size=3)), max_size=4
    ),
    st.booleans(),
)
def test_encode_then_parse_route_round_trips(groups, standard):
    route = TopicRouteData(
        [BrokerData(cluster, name, addrs) for name, (cluster, addrs) in groups.items()],
        [QueueData(name, 4, 8, 6, i % 4) for i, name in enumerate(groups)],
        {f"h:{i}": [f"f:{i}"] for i in range(len(groups))},
    )
    parsed = fj.parse_route(fj.encode_route(route, standard))
    assert parsed["broker_datas"] == [
        {"cluster": b.cluster, "broker_name": b.broker_name, "broker_addrs": dict(sorted(b.broker_addrs.items()))}
        for b in sorted(route.broker_datas, key=lambda b: b.broker_name)
    ]
    assert [QueueData(**q) for q in parsed["queue_datas"]] == sorted(route.queue_datas, key=lambda q: q.broker_name)
    assert parsed["filter_server_table"] == route.filter_server_table
