"""The v1 event schema: the writer's real output fits both derived forms, and they do not drift.

Events come from the real route table through the real writer, so a key the route table starts
emitting without a schema entry fails here. Spark stays out: the StructType is checked as data.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
import pytest
from pyspark.sql import types as T

from common.config import EventLogConfig
from nameserver.acl import AccessController, SecretStore
from nameserver.codec import MalformedFrame, make_request
from nameserver.collect.live.judge import LiveJudge
from nameserver.collect.record import ObservedServer
from nameserver.collect.view import ServerView, broker_entry, route_entry
from nameserver.eventlog.writer import EventLogWriter, read_events
from nameserver.model import DataVersion, TopicConfig
from nameserver.routes.manager import RequestContext, RouteInfoManager, ns_start_event, ns_stop_event, rejected_event
from nameserver.server.journal import Outage, log_unavailable_event
from nameserver.server.processor import ConnectionContext, RequestProcessor, connection_event, malformed_frame_event
from schemas import events as schema

T0 = 1795219200000
A, S, B = "10.0.0.5:10911", "10.0.0.6:10911", "10.0.0.7:10911"


def ctx(code: int, channel: str = "c1") -> RequestContext:
    return RequestContext(channel, "10.0.0.5:50112", code)


def route_table_events() -> list[dict]:
    """At least one event of every type, as the route table returns them."""
    rt = RouteInfoManager(broker_expiry_ms=120_000)
    topics = [TopicConfig("TopicTest", 8, 8), TopicConfig("TopicOrder", 4, 4, perm=7, topic_sys_flag=1, order=True)]
    dv = DataVersion(T0 - 100_000, 3)
    out = [ns_start_event(T0, 120_000, 10_000, "0.1.0")]
    out += rt.register_broker("C1", A, "broker-a", 0, "10.0.0.5:10912", dv, topics, [], T0 + 1, ctx(103)).events
    out += rt.register_broker("C1", A, "broker-a", 0, "10.0.0.5:10912", dv, topics, [], T0 + 2, ctx(103)).events
    out += rt.register_broker("C1", S, "broker-a", 1, None, dv, topics, None, T0 + 3, ctx(103, "c2")).events
    out += rt.broker_heartbeat("C1", A, "broker-a", T0 + 4, ctx(904))
    out += rt.query_data_version("C1", A, "broker-a", 0, dv, T0 + 5, ctx(322))[2]
    out += rt.wipe_write_perm_of_broker("broker-a", T0 + 6, ctx(205, "admin"))[1]
    out += rt.add_write_perm_of_broker("broker-a", T0 + 7, ctx(327, "admin"))[1]
    out += rt.delete_topic("TopicOrder", None, T0 + 8, ctx(216, "admin"))
    out += rt.delete_topic("TopicTest", "C1", T0 + 9, ctx(216, "admin"))
    out += rt.unregister_broker("C1", S, "broker-a", 1, T0 + 10, ctx(104, "c2"))
    out += rt.on_channel_close("c1", T0 + 11, "10.0.0.5:50112")
    out += rt.on_channel_close("c9", T0 + 12, "10.0.0.9:50000")
    out += rt.register_broker("C1", B, "broker-b", 0, "10.0.0.7:10912", dv, [], [], T0 + 13, ctx(103, "c3")).events
    out += rt.scan_not_active_broker(T0 + 200_000)[0]
    out.append(rejected_event(T0 + 200_001, "unknown request code 9999", ctx(9999, "c4")))
    out.append(rejected_event(T0 + 200_002, "bad frame", None))
    out += server_rejections(T0 + 200_003)
    out += observation_events(T0 + 200_005)
    out.append(ns_stop_event(T0 + 200_010, "SIGTERM", silent_closes=12))
    return out


def observation_events(now: int) -> list[dict]:
    """Every ``observe_*``/``observed_*`` shape, as ``nsaudit collect`` writes them."""
    server = ObservedServer("10.0.0.2:9876", interval_ms=10_000)
    broker = {"cluster": "C1", "broker_name": "broker-a", "broker_addrs": {0: A, 1: S}}
    route = {
        "broker_datas": [broker],
        "filter_server_table": {A: ["10.0.0.5:30000"]},
        "queue_datas": [
            {"broker_name": "broker-a", "read_queue_nums": 8, "write_queue_nums": 8, "perm": 6, "topic_sys_flag": 0}
        ],
    }
    full = ServerView({"broker-a": broker_entry(broker)}, {"TopicTest": route_entry(route), "Gone": None})
    emptied = ServerView({}, {"TopicTest": None})
    # the live judge's live_incident events: the only group loses its master on this server, then comes back
    judge = LiveJudge(grace_ms=0)
    live = [e for _, e in judge.observed("obs-a", now + 1, full) + judge.observed("obs-a", now + 2, emptied)]
    return (
        server.start(now)
        + server.observed(full, now + 1, 1)
        + server.observed(emptied, now + 2, 2)
        + live
        + server.failed(now + 3, 3, "timeout", "no answer to GET_BROKER_CLUSTER_INFO within 5 s")
        + server.stop(now + 4, "SIGTERM")
    )


def server_rejections(now: int) -> list[dict]:
    """The server's own ``rejected`` shapes: a malformed frame and refused connections."""
    conn = ConnectionContext("c5", "10.0.0.9:50001")
    bad_header = MalformedFrame(
        "json_header_field",
        {"frame_length": 30, "serialize_type": 0, "header_length": 22, "code": 105, "version": 401, "opaque": 3},
        "flag",
    )
    return [
        malformed_frame_event(now, conn, bad_header),
        malformed_frame_event(now + 1, conn, MalformedFrame("frame_too_large", {"frame_length": 1 << 30}, "")),
        connection_event(now + 2, conn, "connection_limit", max_connections=10),
        connection_event(now + 3, conn, "slow_reader", write_buffer_bytes=1 << 26),
        connection_event(now + 4, conn, "frame_timeout", frame_timeout_ms=30_000),
        *acl_rejection(now + 5, conn),
        log_unavailable_event(now + 6, Outage(now - 5000, "[Errno 28] No space left on device", refused=7, unlogged=2)),
        log_unavailable_event(
            now + 7,
            Outage(now - 5000, "[Errno 28] No space left on device", refused=3),
            [{"broker_addr": A, "last_update_ts": now - 1000}],
        ),
    ]


def acl_rejection(now: int, conn: ConnectionContext) -> list[dict]:
    """A request refused by access control (``rejected`` no_permission, with ``access_key``)."""
    processor = RequestProcessor(RouteInfoManager(), access=AccessController(SecretStore({"ak": "sk"})))
    ext = {
        "brokerName": "broker-a",
        "brokerAddr": A,
        "clusterName": "C1",
        "brokerId": "0",
        "AccessKey": "ak",
        "Signature": "not-the-signature",
    }
    return processor.process(make_request(104, ext), conn, now).events


@pytest.fixture(scope="module")
def written(tmp_path_factory) -> list[dict]:
    """The route table's events as the writer logged them, parsed back."""
    events_dir = tmp_path_factory.mktemp("events")
    with EventLogWriter(events_dir, "ns-a", EventLogConfig(durability="none")) as writer:
        for event in route_table_events():
            writer.append(event)
    problems: list = []
    logged = list(read_events(events_dir, "ns-a", problems))
    assert problems == []
    return logged


@pytest.fixture(scope="module")
def json_schema() -> dict:
    return json.loads(schema.JSON_SCHEMA_PATH.read_text(encoding="utf-8"))


# -------------------------------------------------------------- a small JSON Schema validator

_ANNOTATIONS = {"$schema", "$id", "title", "description"}
_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "integer": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
}


def errors(value: Any, node: dict, path: str = "$") -> list[str]:
    """Violations of ``node`` (the draft 2020-12 keywords event-v1.schema.json uses) by ``value``.

    Unknown keywords raise, so the schema cannot grow a rule this validator silently ignores.
    """
    unknown = (
        set(node)
        - _ANNOTATIONS
        - {
            "type",
            "const",
            "enum",
            "minimum",
            "maximum",
            "minLength",
            "pattern",
            "properties",
            "required",
            "additionalProperties",
            "items",
            "allOf",
            "if",
            "then",
            "not",
        }
    )
    if unknown:
        raise ValueError(f"the schema uses keywords this validator does not check: {sorted(unknown)}")
    found: list[str] = []
    if "type" in node:
        kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
        if not any(_TYPES[k](value) for k in kinds):
            return [f"{path}: {value!r} is not {kinds}"]
    if "const" in node and value != node["const"]:
        found.append(f"{path}: {value!r} is not {node['const']!r}")
    if "enum" in node and value not in node["enum"]:
        found.append(f"{path}: {value!r} not in enum")
    if isinstance(value, int) and not isinstance(value, bool):
        if "minimum" in node and value < node["minimum"]:
            found.append(f"{path}: {value} < {node['minimum']}")
        if "maximum" in node and value > node["maximum"]:
            found.append(f"{path}: {value} > {node['maximum']}")
    if isinstance(value, str):
        if "minLength" in node and len(value) < node["minLength"]:
            found.append(f"{path}: shorter than {node['minLength']}")
        if "pattern" in node and not re.search(node["pattern"], value):
            found.append(f"{path}: {value!r} does not match {node['pattern']}")
    if isinstance(value, dict):
        properties = node.get("properties", {})
        for key in node.get("required", []):
            if key not in value:
                found.append(f"{path}: missing {key!r}")
        for key, item in value.items():
            if key in properties:
                found += errors(item, properties[key], f"{path}.{key}")
            elif node.get("additionalProperties", True) is False:
                found.append(f"{path}: unknown key {key!r}")
    if isinstance(value, list) and "items" in node:
        for i, item in enumerate(value):
            found += errors(item, node["items"], f"{path}[{i}]")
    for sub in node.get("allOf", []):
        found += errors(value, sub, path)
    if "if" in node and not errors(value, node["if"], path):
        found += errors(value, node.get("then", {}), path)
    if "not" in node and not errors(value, node["not"], path):
        found.append(f"{path}: {value!r} matches a forbidden schema")
    return found


# ---------------------------------------------------------------------------------- JSON Schema


def test_the_committed_json_schema_is_what_the_code_generates():
    assert schema.JSON_SCHEMA_PATH.read_text(encoding="utf-8") == schema.json_schema_text(), (
        "run: .venv/bin/python -m schemas.events"
    )


def test_the_sample_has_every_event_type(written):
    assert {e["type"] for e in written} == set(schema.EVENT_TYPES)


def test_real_writer_output_validates(written, json_schema):
    for event in written:
        assert errors(event, json_schema) == [], event


@pytest.mark.parametrize(
    "change, expected",
    [
        (lambda e: e.pop("seq"), "missing 'seq'"),
        (lambda e: e.update(seq="12"), "$.seq: '12' is not"),
        (lambda e: e.update(seq=0), "$.seq: 0 < 1"),
        (lambda e: e.update(v=2), "$.v: 2 is not 1"),
        (lambda e: e.update(ns=None), "$.ns: None is not"),
        (lambda e: e.update(type="restart"), "$.type: 'restart' not in enum"),
        (lambda e: e.update(colour="blue"), "unknown key 'colour'"),
        (lambda e: e.pop("broker_addr"), "missing 'broker_addr'"),
        (lambda e: e.update(broker_addr=None), "matches a forbidden schema"),
        (lambda e: e.update(topics_digest="9f2c..."), "does not match"),
        (lambda e: e.update(request_code=2**31), "> 2147483647"),
        (lambda e: e.update(broker_id=True), "$.broker_id: True is not"),
        (lambda e: e["data_version"].pop("counter"), "$.data_version: missing 'counter'"),
        (lambda e: e["topics"][0].update(perm="RW"), "$.topics[0].perm"),
        (lambda e: e.update(topics=None), "$.topics: None is not"),
        (lambda e: e.update(filter_servers=[None]), "$.filter_servers[0]"),
    ],
)
def test_broken_events_are_rejected(written, json_schema, change, expected):
    event = orjson.loads(orjson.dumps(next(e for e in written if e["type"] == "register")))
    change(event)
    assert any(expected in message for message in errors(event, json_schema)), errors(event, json_schema)


def test_the_schema_is_draft_2020_12_and_jsonschema_agrees(written, json_schema):
    jsonschema = pytest.importorskip("jsonschema")
    validator = jsonschema.Draft202012Validator(json_schema)
    jsonschema.Draft202012Validator.check_schema(json_schema)
    for event in written:
        assert list(validator.iter_errors(event)) == []
    broken = dict(next(e for e in written if e["type"] == "expire"))
    del broken["last_update_ts"]
    assert list(validator.iter_errors(broken)) and errors(broken, json_schema)


# ------------------------------------------------------------------------------------ StructType


def fits(value: Any, data_type: T.DataType, nullable: bool) -> bool:
    """Would Spark hold ``value`` in a field of this type without loss?"""
    if value is None:
        return nullable
    if isinstance(data_type, T.StructType):
        fields = {f.name: f for f in data_type.fields}
        return isinstance(value, dict) and all(
            k in fields and fits(v, fields[k].dataType, fields[k].nullable) for k, v in value.items()
        )
    if isinstance(data_type, T.ArrayType):
        return isinstance(value, list) and all(fits(v, data_type.elementType, data_type.containsNull) for v in value)
    if isinstance(data_type, T.BooleanType):
        return isinstance(value, bool)
    if isinstance(value, bool):
        return False
    if isinstance(data_type, T.IntegerType):
        return isinstance(value, int) and -(2**31) <= value < 2**31
    if isinstance(data_type, T.LongType):
        return isinstance(value, int) and -(2**63) <= value < 2**63
    if isinstance(data_type, T.StringType):
        return isinstance(value, str)
    raise AssertionError(f"unexpected type {data_type}")


def test_the_struct_type_covers_every_key_the_writer_emits(written):
    for event in written:
        assert set(event) <= set(schema.EVENT_SCHEMA.names), event
        assert fits(event, schema.EVENT_SCHEMA, False), event


def test_every_schema_key_is_emitted_by_some_event(written):
    emitted = {k for e in written for k in e}
    assert set(schema.EVENT_SCHEMA.names) == emitted


def test_struct_type_shape():
    fields = {f.name: f for f in schema.EVENT_SCHEMA.fields}
    assert [f.name for f in schema.EVENT_SCHEMA.fields if not f.nullable] == ["v", "ns", "seq", "ts", "type"]
    assert fields["data_version"].dataType == T.StructType(
        [T.StructField("timestamp", T.LongType(), False), T.StructField("counter", T.LongType(), False)]
    )
    topics = fields["topics"].dataType
    assert isinstance(topics, T.ArrayType) and not topics.containsNull
    assert topics.elementType.names == [
        "topic",
        "read_queue_nums",
        "write_queue_nums",
        "perm",
        "topic_sys_flag",
        "order",
        "topic_filter_type",
    ]
    assert fields["filter_servers"].dataType == T.ArrayType(T.StringType(), False)
    assert fields["seq"].dataType == fields["ts"].dataType == T.LongType()


def test_the_events_table_is_the_event_with_times_as_timestamps_plus_date_file_and_line():
    table = {f.name: f for f in schema.EVENTS_TABLE_SCHEMA.fields}
    for f in schema.EVENT_SCHEMA.fields:
        if f.name in ("ts", "last_update_ts"):
            assert table[f.name].dataType == T.TimestampType()  # times are timestamps in the lake
        else:
            assert table[f.name] == f
    assert table["ts_ms"].dataType == T.LongType() and not table["ts_ms"].nullable  # the exact ms
    extra = [(f.name, f.dataType, f.nullable) for f in schema.EVENTS_TABLE_SCHEMA.fields[-3:]]
    assert extra == [("date", T.DateType(), False), ("file", T.StringType(), False), ("line", T.LongType(), False)]


def test_the_quarantine_schema():
    assert [(f.name, f.dataType, f.nullable) for f in schema.QUARANTINE_SCHEMA.fields] == [
        ("file", T.StringType(), False),
        ("line", T.LongType(), False),
        ("raw", T.StringType(), False),
        ("reason", T.StringType(), False),
        ("ns", T.StringType(), True),
        ("date", T.DateType(), True),
    ]


def test_the_json_schema_and_struct_type_list_the_same_keys(json_schema):
    assert list(json_schema["properties"]) == schema.EVENT_SCHEMA.names
    assert json_schema["required"] == ["v", "ns", "seq", "ts", "type"]


def test_schema_check_command_reports_staleness(tmp_path, monkeypatch, capsys):
    assert schema.main(["--check"]) == 0
    stale = tmp_path / "event-v1.schema.json"
    stale.write_text("{}\n")
    monkeypatch.setattr(schema, "JSON_SCHEMA_PATH", stale)
    assert schema.main(["--check"]) == 1
    assert schema.main([]) == 0 and stale.read_text() == schema.json_schema_text()
