"""The name-server event, format v1, defined once; the Spark and JSON Schema forms derive from it.

:data:`EVENT_KEYS` lists every key an event may carry, in the writer's key order, with its type,
whether every event has it and whether it may be null. :data:`TYPE_RULES`
(:mod:`schemas.event_rules`) says which keys each ``type`` must carry. From these come

* :data:`EVENT_SCHEMA`, the Spark ``StructType`` readers pass to ``spark.read.json`` (a key an
  event lacks reads as null, so only the five keys every event has are non-nullable);
* :data:`EVENTS_TABLE_SCHEMA`, the lake's ``events`` table: the event plus ``date``, ``file``
  and ``line``;
* :func:`event_json_schema`, the JSON Schema committed as ``schemas/event-v1.schema.json``
  (``python -m schemas.events`` rewrites it, ``--check`` fails when it is stale).

:data:`QUARANTINE_SCHEMA` is the lake's ``quarantine`` table. Never change a key's meaning inside
v1 (docs/event-log.md); a new key is added here, and both forms follow.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from pyspark.sql import types as T

# the vocabulary of key definitions (scalar kinds, Struct, Array, Key), the event types and the
# keys each type must carry, re-exported here
from schemas.event_fields import _INT_BOUNDS, _SPARK_SCALARS
from schemas.event_fields import BOOLEAN as BOOLEAN
from schemas.event_fields import INT32 as INT32
from schemas.event_fields import INT64 as INT64
from schemas.event_fields import STRING as STRING
from schemas.event_fields import Array as Array
from schemas.event_fields import FieldType as FieldType
from schemas.event_fields import Key as Key
from schemas.event_fields import Struct as Struct
from schemas.event_rules import TYPE_RULES as TYPE_RULES
from schemas.event_rules import TypeRule as TypeRule
from schemas.event_types import EVENT_TYPES as EVENT_TYPES
from schemas.event_types import OBSERVATION_TYPES as OBSERVATION_TYPES

FORMAT_VERSION = 1
JSON_SCHEMA_PATH = Path(__file__).resolve().parent / "event-v1.schema.json"
JSON_SCHEMA_ID = "urn:nsaudit:schema:event:v1"


def _nested(name: str, kind: FieldType, doc: str) -> Key:
    return Key(name, kind, doc, required=True, nullable=False)


DATA_VERSION = Struct(
    (
        _nested("timestamp", INT64, "the broker's data-version timestamp, ms since the epoch, as sent"),
        _nested("counter", INT64, "the broker's data-version counter, as sent"),
    )
)

TOPIC = Struct(
    (
        _nested("topic", STRING, "topic name"),
        _nested("read_queue_nums", INT32, "read queues"),
        _nested("write_queue_nums", INT32, "write queues"),
        _nested("perm", INT32, "permission bits: 4 read, 2 write, 1 inherit"),
        _nested("topic_sys_flag", INT32, "system flags (0 for compressed registrations)"),
        _nested("order", BOOLEAN, "ordered topic (false for compressed registrations)"),
        _nested("topic_filter_type", STRING, "SINGLE_TAG or MULTI_TAG"),
    )
)

BROKER_ADDR = Struct(
    (
        _nested("broker_id", INT64, "broker id, 0 for the master"),
        _nested("broker_addr", STRING, "broker address host:port"),
    )
)

OBSERVED_QUEUE_DATA = Struct(
    (
        _nested("broker_name", STRING, "broker group name"),
        _nested("read_queue_nums", INT32, "read queues"),
        _nested("write_queue_nums", INT32, "write queues"),
        _nested("perm", INT32, "permission bits: 4 read, 2 write, 1 inherit"),
        _nested("topic_sys_flag", INT32, "system flags"),
    )
)

OBSERVED_BROKER_DATA = Struct(
    (
        _nested("cluster", STRING, "cluster name (empty when the answer had none)"),
        _nested("broker_name", STRING, "broker group name"),
        _nested("broker_addrs", Array(BROKER_ADDR), "the group's addresses, ascending broker id"),
    )
)

REFRESH = Struct(
    (
        _nested("broker_addr", STRING, "broker address host:port"),
        _nested("last_update_ts", INT64, "its last refused refresh, now its last refresh, ms since the epoch"),
    )
)

FILTER_SERVERS = Struct(
    (
        _nested("broker_addr", STRING, "broker address host:port"),
        _nested("filter_servers", Array(STRING), "filter server addresses"),
    )
)

# the events that remove a broker address from a server's live table (RouteInfoManager's
# unregisterBroker, onChannelDestroy and scanNotActiveBroker)
REMOVAL_TYPES = ("unregister", "expire", "channel_close")
# the events that reset a server's tables: a run ends at ns_stop and a new one starts empty
RESET_TYPES = ("ns_start", "ns_stop")
# admin requests that change the route tables (mqadmin wipeWritePerm, addWritePerm, deleteTopic)
# plus a broker's own unregister
ADMIN_TYPES = ("unregister", "wipe_write_perm", "add_write_perm", "delete_topic")

EVENT_KEYS: tuple[Key, ...] = (
    # every event
    Key("v", INT32, "format version", required=True, nullable=False, json_extra=(("const", FORMAT_VERSION),)),
    Key("ns", STRING, "name-server id", required=True, nullable=False, json_extra=(("minLength", 1),)),
    Key(
        "seq",
        INT64,
        "strictly increasing per ns across the whole log, restarts included; a gap means lost telemetry",
        required=True,
        nullable=False,
        json_extra=(("minimum", 1),),
    ),
    Key(
        "ts",
        INT64,
        "server wall clock when the event was applied, ms since the Unix epoch (UTC)",
        required=True,
        nullable=False,
    ),
    Key("type", STRING, "event type", required=True, nullable=False, json_extra=(("enum", list(EVENT_TYPES)),)),
    # request events
    Key("request_code", INT32, "remoting request code received"),
    Key("channel", STRING, "stable id of the connection, unique within one server run"),
    Key("remote", STRING, "peer host:port"),
    # broker keys
    Key("cluster", STRING, "cluster name (delete_topic: the cluster asked for, null for all)"),
    Key("broker_name", STRING, "broker group name"),
    Key("broker_id", INT64, "broker id, 0 for the master"),
    Key("broker_addr", STRING, "broker address host:port (channel_close: null when no broker was live on it)"),
    Key("ha_addr", STRING, "broker HA address host:port"),
    # payload keys
    Key("data_version", DATA_VERSION, "the broker's data version as sent"),
    Key(
        "topics_digest",
        STRING,
        "hex SHA-256 of the canonical topic list (sorted by topic, compact JSON of topic objects)",
        json_extra=(("pattern", "^[0-9a-f]{64}$"),),
    ),
    Key(
        "topics",
        Array(TOPIC),
        "the broker's full topic table; only on the first digest-carrying event of each broker_addr "
        "in a segment and when its digest changes within the segment, absent otherwise",
        nullable=False,
    ),
    Key("filter_servers", Array(STRING), "filter server addresses as sent; null when the request had none"),
    Key("request_version", INT32, "the request's version field"),
    # ns_start
    Key("broker_expiry_ms", INT64, "a broker silent this long is removed by the scan, ms"),
    Key("scan_interval_ms", INT64, "period of the expiry scan, ms"),
    Key("semantics", STRING, "routing semantics implemented, e.g. rocketmq-4.9"),
    Key("version", STRING, "name-server software version"),
    # ns_stop, rejected
    Key(
        "reason",
        STRING,
        "why the server stopped or the request was refused; observe_*: why the collector stopped, why the "
        "server's answers failed, or why a full snapshot follows (start, day, recovered)",
    ),
    Key(
        "silent_closes",
        INT64,
        "ns_stop: connections of the run that closed without ever carrying a registration (no channel_close logged)",
    ),
    Key("detail", STRING, "rejected, observe_error: free text on what was wrong (never secrets)"),
    Key("access_key", STRING, "rejected no_permission: the AccessKey id the request named (never a secret)"),
    Key("frame_length", INT64, "rejected malformed_frame: the frame's length field"),
    Key("serialize_type", INT32, "rejected malformed_frame: the frame's serialize type byte"),
    Key("header_length", INT64, "rejected malformed_frame: the frame's header length"),
    Key("max_connections", INT64, "rejected connection_limit: the cap that was reached"),
    Key("write_buffer_bytes", INT64, "rejected slow_reader: answers queued for a peer that stopped reading"),
    Key("frame_timeout_ms", INT64, "rejected frame_timeout: how long a frame may stay incomplete"),
    Key(
        "refused_count",
        INT64,
        "rejected log_unavailable: route-change requests refused while the log could not be written",
    ),
    Key("unlogged_count", INT64, "rejected log_unavailable: refusal events (no table change) not written meanwhile"),
    Key("outage_ms", INT64, "rejected log_unavailable: how long the log could not be written, ms"),
    Key(
        "refreshes",
        Array(REFRESH),
        "rejected log_unavailable: live brokers whose registrations or heartbeats were refused during the "
        "outage, each refreshed to its last refused one when the log resumed, ascending address; absent when none",
        nullable=False,
    ),
    # expire
    Key("last_update_ts", INT64, "the expired entry's last refresh, ms since the epoch"),
    # wipe_write_perm, add_write_perm
    Key("topic_count", INT32, "queue-data entries of the broker name the request touched"),
    # delete_topic
    Key("topic", STRING, "topic name"),
    # observations (nsaudit collect)
    Key("namesrv_addr", STRING, "observe_*: the observed name server's host:port, as the collector was given it"),
    Key("interval_ms", INT64, "observe_start: the collector's polling interval, ms"),
    Key("round", INT64, "observe_* and observed_*: the collector's round of this server within its run, from 1"),
    Key("brokers_observed", INT32, "observe_snapshot: broker names in the cluster info that follows"),
    Key("topics_observed", INT32, "observe_snapshot: topics of the topic list that follows"),
    Key(
        "broker_addrs",
        Array(BROKER_ADDR),
        "observed_broker: the group's addresses in the cluster info, ascending broker id; null when the "
        "broker name left the cluster info",
    ),
    Key(
        "queue_datas",
        Array(OBSERVED_QUEUE_DATA),
        "observed_route: the route's queue data, ascending broker name; null when the server answered "
        "TOPIC_NOT_EXIST or no longer lists the topic",
    ),
    Key(
        "broker_datas",
        Array(OBSERVED_BROKER_DATA),
        "observed_route: the route's broker data, ascending broker name; null with queue_datas",
    ),
    Key(
        "filter_server_table",
        Array(FILTER_SERVERS),
        "observed_route: the route's filter servers, ascending broker address; null with queue_datas",
    ),
    # live incidents (nsaudit collect): optional, only on live_incident
    Key(
        "incident_id",
        STRING,
        "live_incident: the live incident's id (live- and 12 hex digits), the same in its open and close events",
    ),
    Key("incident_state", STRING, "live_incident: open (the incident began to hold) or close (it no longer holds)"),
    Key(
        "root_cause",
        STRING,
        "live_incident: its root cause as the nightly incidents name them (write_perm_wiped, "
        "broker_cut_off, server_unreachable, ...)",
    ),
    Key("subject", STRING, "live_incident: what it is about (broker name, topic, server id)"),
    Key("severity", STRING, "live_incident: the worst severity of its findings so far (warning, critical)"),
    Key("servers", Array(STRING), "live_incident: the observed servers it concerns, sorted"),
    Key("kinds", Array(STRING), "live_incident: the finding kinds it holds so far, sorted"),
    Key("incident_ms", INT64, "live_incident: how long it had lasted at this event: it began at ts - incident_ms"),
)

KEYS_BY_NAME: dict[str, Key] = {k.name: k for k in EVENT_KEYS}
REQUIRED_KEYS: tuple[str, ...] = tuple(k.name for k in EVENT_KEYS if k.required)


# ------------------------------------------------------------------------------------- Spark


def _spark_type(kind: FieldType) -> T.DataType:
    if isinstance(kind, Struct):
        return T.StructType([_spark_field(k) for k in kind.keys])
    if isinstance(kind, Array):
        return T.ArrayType(_spark_type(kind.element), containsNull=False)
    return _SPARK_SCALARS[kind]


def _spark_field(key: Key) -> T.StructField:
    # Absent reads as null, so only keys every object has (and never null) are non-nullable.
    return T.StructField(key.name, _spark_type(key.type), nullable=key.nullable or not key.required)


EVENT_SCHEMA = T.StructType([_spark_field(k) for k in EVENT_KEYS])

# The lake keeps every key under its name, with the log's epoch-ms times as UTC timestamps (the
# lake's `*_ts` convention); `ts_ms` keeps the exact value beside `ts` for arithmetic and joins.
EVENTS_TABLE_SCHEMA = T.StructType(
    [
        g
        for f in EVENT_SCHEMA.fields
        for g in {
            "ts": [T.StructField("ts", T.TimestampType(), False), T.StructField("ts_ms", T.LongType(), False)],
            "last_update_ts": [T.StructField("last_update_ts", T.TimestampType(), True)],
        }.get(f.name, [f])
    ]
    + [
        T.StructField("date", T.DateType(), nullable=False),  # the segment's day folder (UTC); partition
        T.StructField("file", T.StringType(), nullable=False),  # segment path relative to --events
        T.StructField("line", T.LongType(), nullable=False),  # 1-based line in that segment
    ]
)

QUARANTINE_SCHEMA = T.StructType(
    [
        T.StructField("file", T.StringType(), nullable=False),  # <ns>/<date>/<segment name>
        T.StructField("line", T.LongType(), nullable=False),  # 1-based
        T.StructField("raw", T.StringType(), nullable=False),  # the line as read, without \n
        T.StructField("reason", T.StringType(), nullable=False),
        T.StructField("ns", T.StringType(), nullable=True),  # from the path, null if it has none
        T.StructField("date", T.DateType(), nullable=True),  # from the path's date folder
    ]
)


# --------------------------------------------------------------------------------- JSON Schema


def _json_type(kind: FieldType, nullable: bool) -> dict[str, Any]:
    if isinstance(kind, Struct):
        schema: dict[str, Any] = {
            "type": "object",
            "properties": {k.name: _json_key(k) for k in kind.keys},
            "required": [k.name for k in kind.keys if k.required],
            "additionalProperties": False,
        }
    elif isinstance(kind, Array):
        schema = {"type": "array", "items": _json_type(kind.element, False)}
    elif kind in _INT_BOUNDS:
        low, high = _INT_BOUNDS[kind]
        schema = {"type": "integer", "minimum": low, "maximum": high}
    else:
        schema = {"type": kind}
    if nullable:
        schema["type"] = [schema["type"], "null"]
    return schema


def _json_key(key: Key) -> dict[str, Any]:
    schema = {"description": key.doc, **_json_type(key.type, key.nullable)}
    schema.update(key.json_extra)
    return schema


def _json_type_rule(event_type: str, rule: TypeRule) -> dict[str, Any]:
    then: dict[str, Any] = {"required": list(rule.required + rule.present)}
    if rule.required:
        then["properties"] = {name: {"not": {"type": "null"}} for name in rule.required}
    return {"if": {"properties": {"type": {"const": event_type}}, "required": ["type"]}, "then": then}


def event_json_schema() -> dict[str, Any]:
    """The v1 event as a JSON Schema (draft 2020-12) document, derived from :data:`EVENT_KEYS`."""
    unknown = {n for rule in TYPE_RULES.values() for n in rule.required + rule.present + rule.optional}
    unknown -= KEYS_BY_NAME.keys()
    if unknown or set(TYPE_RULES) != set(EVENT_TYPES):
        raise AssertionError(f"TYPE_RULES out of step with EVENT_KEYS/EVENT_TYPES: {sorted(unknown)}")
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": JSON_SCHEMA_ID,
        "title": "nsaudit name-server event, format v1",
        "description": (
            "One line of a name-server event-log segment (see schemas/README.md). "
            "Generated by `python -m schemas.events` from schemas/events.py; do not edit by hand."
        ),
        "type": "object",
        "properties": {k.name: _json_key(k) for k in EVENT_KEYS},
        "required": list(REQUIRED_KEYS),
        "additionalProperties": False,
        "allOf": [_json_type_rule(t, TYPE_RULES[t]) for t in EVENT_TYPES],
    }


def json_schema_text() -> str:
    """The committed file's exact text: two-space JSON in definition order, newline-terminated."""
    return json.dumps(event_json_schema(), indent=2, ensure_ascii=False) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write ``schemas/event-v1.schema.json``; with ``--check``, only report whether it is stale."""
    parser = argparse.ArgumentParser(prog="python -m schemas.events", description=main.__doc__)
    parser.add_argument("--check", action="store_true", help="exit 1 if the committed file differs")
    args = parser.parse_args(argv)
    text = json_schema_text()
    current = JSON_SCHEMA_PATH.read_text(encoding="utf-8") if JSON_SCHEMA_PATH.exists() else None
    if args.check:
        if current != text:
            print(f"{JSON_SCHEMA_PATH} is stale: run python -m schemas.events", file=sys.stderr)
            return 1
        return 0
    if current != text:
        JSON_SCHEMA_PATH.write_text(text, encoding="utf-8")
        print(f"wrote {JSON_SCHEMA_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
