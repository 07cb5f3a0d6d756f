"""The builders of nameserver.events against schemas/events.py: each type's builder writes exactly
the keys TYPE_RULES allows for it, in its TypedDict's order, and never leaves out a required one."""

from __future__ import annotations

from typing import Any

import pytest

from nameserver.events import BUILDERS, RequestContext
from nameserver.model import DataVersion, TopicConfig
from schemas.events import EVENT_TYPES, KEYS_BY_NAME, TYPE_RULES

CTX = RequestContext("c1", "10.0.0.5:50112", 103)
DV = DataVersion(1795219100000, 3)
TOPICS = (TopicConfig("TopicTest", 8, 8, 6, 0, False, "SINGLE_TAG"),)
ADDRS = [{"broker_id": 0, "broker_addr": "10.0.0.5:10911"}]
BROKER = ("DefaultCluster", "broker-a", 0, "10.0.0.5:10911", "10.0.0.5:10912")
PAYLOAD = (DV, "9f" * 32, TOPICS, [], 401)
REJECTED_ALL = dict(
    detail="d",
    access_key="AK",
    cluster="c",
    broker_name="b",
    broker_addr="a:1",
    topic="t",
    broker_id=0,
    request_version=401,
    frame_length=9,
    serialize_type=0,
    header_length=5,
    max_connections=10,
    write_buffer_bytes=1,
    frame_timeout_ms=2,
    refused_count=3,
    unlogged_count=4,
    outage_ms=5,
    refreshes=[{"broker_addr": "a:1", "last_update_ts": 6}],
)

# type -> (arguments that make every key the type may carry, arguments that make the fewest)
ARGUMENTS: dict[str, tuple[tuple[tuple, dict], tuple[tuple, dict]]] = {
    "ns_start": (((1, 120_000, 10_000, "0.1.0"), {}),) * 2,
    "ns_stop": (((1, "SIGTERM", 2), {}), ((1, None), {})),
    "register": (((1, CTX, *BROKER, *PAYLOAD), {}),) * 2,
    "heartbeat": (((1, CTX, *BROKER, *PAYLOAD), {}), ((1, CTX, "c", "b", None, "a:1", None), {})),
    "unregister": (((1, CTX, *BROKER), {}),) * 2,
    "expire": (((1, "a:1", 0, "c", "b", 0), {}),) * 2,
    "channel_close": (((1, "c1", "r:1", "a:1", "c", "b", 0), {}), ((1, "c1", "r:1"), {})),
    "wipe_write_perm": (((1, CTX, "b", 3), {}),) * 2,
    "add_write_perm": (((1, CTX, "b", 3), {}),) * 2,
    "delete_topic": (((1, CTX, "t", "c"), {}), ((1, CTX, "t", None), {})),
    "rejected": (((1, "bad", CTX), REJECTED_ALL), ((1, "log_unavailable"), {})),
    "observe_start": (((1, "10.0.0.2:9876", 10_000), {}),) * 2,
    "observe_stop": (((1, "SIGTERM"), {}), ((1, None), {})),
    "observe_error": (((1, "10.0.0.2:9876", 3, "timeout", "d"), {}), ((1, "10.0.0.2:9876", 3, "timeout", None), {})),
    "observe_snapshot": (((1, "10.0.0.2:9876", 1, "start", 1, 2), {}),) * 2,
    "observed_broker": (((1, 1, "b", "c", ADDRS), {}), ((1, 1, "b", None, None), {})),
    "observed_route": (((1, 1, "t", [], [], []), {}), ((1, 1, "t", None, None, None), {})),
    "live_incident": (((1, "live-3f0c4a9be210", "open", "broker_dead", "b", "critical", ["s"], ["k"], 0), {}),) * 2,
}


def _build(kind: str, which: int) -> dict[str, Any]:
    args, kwargs = ARGUMENTS[kind][which]
    return BUILDERS[kind][1](*args, **kwargs)


def _schema_keys(kind: str) -> set[str]:
    rule = TYPE_RULES[kind]
    return {"ts", "type", *rule.required, *rule.present, *rule.optional}


def test_every_event_type_has_one_builder():
    assert list(BUILDERS) == list(EVENT_TYPES)
    assert set(ARGUMENTS) == set(EVENT_TYPES)


@pytest.mark.parametrize("kind", EVENT_TYPES)
def test_each_typed_dict_has_exactly_the_schemas_keys_for_its_type(kind):
    typed = BUILDERS[kind][0]
    assert set(typed.__annotations__) == _schema_keys(kind)
    rule = TYPE_RULES[kind]
    assert {"ts", "type", *rule.required, *rule.present} <= typed.__required_keys__
    assert set(typed.__annotations__) <= set(KEYS_BY_NAME)


@pytest.mark.parametrize("kind", EVENT_TYPES)
def test_a_builder_given_everything_writes_every_key_in_its_typed_dicts_order(kind):
    event = _build(kind, 0)
    assert event["type"] == kind
    assert list(event) == list(BUILDERS[kind][0].__annotations__)


@pytest.mark.parametrize("kind", EVENT_TYPES)
def test_a_builder_given_the_least_still_writes_every_required_and_present_key(kind):
    event = _build(kind, 1)
    rule, typed = TYPE_RULES[kind], BUILDERS[kind][0]
    assert set(event) >= {"ts", "type", *rule.required, *rule.present} | typed.__required_keys__
    assert set(event) <= _schema_keys(kind)
    assert all(event[key] is not None for key in rule.required)
    # the builder's own order, whatever it leaves out
    order = list(typed.__annotations__)
    assert list(event) == sorted(event, key=order.index)
