"""The route answers and their kept encodings (GET_ROUTEINFO_BY_TOPIC, GET_BROKER_CLUSTER_INFO).

Lookups are answered from bytes encoded once per table revision. These tests change the tables
between two lookups in every way a route can change and check that the next answer is the new
one, byte for byte what a fresh encoding of the pure route table gives, on the cached path
(``RouteAnswers.frame``) and on the ordinary one (``process``) alike.
"""

from __future__ import annotations

import pytest

from nameserver.acl import AccessController, SecretStore
from nameserver.client import register_broker_request, route_request, simple_request
from nameserver.codec import (
    RemotingCommand,
    RequestCode,
    ResponseCode,
    SerializeType,
    encode_frame,
    fastjson,
    make_response,
)
from nameserver.model import DataVersion, TopicConfig
from nameserver.routes.manager import RequestContext, RouteInfoManager
from nameserver.server.processor import ConnectionContext, RequestProcessor

M, S, M2 = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"
A = TopicConfig("TopicA", 8, 8)
C1 = ConnectionContext("c1", "127.0.0.1:50001")
C2 = ConnectionContext("c2", "127.0.0.1:50002")
C3 = ConnectionContext("c3", "127.0.0.1:50003")
EXPIRY = 120_000
DV1 = DataVersion(100, 1)

# every flavour of the answer: fastjson and standard ids, JSON and ROCKETMQ headers
FLAVOURS = [
    {"version": 400},
    {"version": 400, "accept_standard_json_only": True},
    {"version": 407},
    {"version": 407, "serialize_type": SerializeType.ROCKETMQ},
]


def lookup(topic: str, opaque: int, **flavour) -> RemotingCommand:
    cmd = route_request(topic, **flavour)
    cmd.opaque = opaque
    return cmd


def fresh_answer(routes: RouteInfoManager, cmd: RemotingCommand) -> bytes | None:
    """What a lookup answers, encoded from the pure table now (None: TOPIC_NOT_EXIST)."""
    route = routes.pickup_topic_route_data(cmd.ext_fields["topic"])
    if route is None:
        return None
    standard = cmd.version >= 401 or cmd.ext_fields.get("acceptStandardJsonOnly") == "true"
    return encode_frame(make_response(cmd, ResponseCode.SUCCESS, body=fastjson.encode_route(route, standard)))


def answers(proc: RequestProcessor, topic: str, opaque: int) -> list[bytes | None]:
    """Every flavour's answer, checked on both paths against the pure table."""
    out = []
    for flavour in FLAVOURS:
        cmd = lookup(topic, opaque, **flavour)
        expected = fresh_answer(proc.routes, cmd)
        assert proc.route_answers.frame(cmd) == expected
        response = proc.process(cmd, C1, 0).response
        if expected is None:
            assert response.code == ResponseCode.TOPIC_NOT_EXIST
        else:
            assert encode_frame(response) == expected
        out.append(expected)
    return out


def register(proc, addr=M, name="broker-a", broker_id=0, dv=DV1, topics=(A,), filters=(), conn=C1, now=1000):
    request = register_broker_request("C1", addr, name, broker_id, addr.replace("10911", "10912"), dv, topics, filters)
    assert proc.process(request, conn, now).response.code == ResponseCode.SUCCESS


def admin(proc, code, now=1000, **ext):
    assert proc.process(simple_request(code, ext), C3, now).response.code == ResponseCode.SUCCESS


# Each step changes TopicA's route (names in the ids of the parametrized test).
STEPS = {
    "first registration": lambda p: register(p),
    "slave joins": lambda p: register(p, addr=S, broker_id=1, conn=C2),
    "filter servers": lambda p: register(p, filters=["10.0.9.1:40001"]),
    "queue numbers": lambda p: register(p, dv=DataVersion(100, 2), topics=(TopicConfig("TopicA", 4, 8),)),
    "second broker name": lambda p: register(p, addr=M2, name="broker-b", conn=C3),
    "wipe write perm": lambda p: admin(p, RequestCode.WIPE_WRITE_PERM_OF_BROKER, brokerName="broker-a"),
    "add write perm": lambda p: admin(p, RequestCode.ADD_WRITE_PERM_OF_BROKER, brokerName="broker-a"),
    "unregister slave": lambda p: admin(
        p, RequestCode.UNREGISTER_BROKER, clusterName="C1", brokerAddr=S, brokerName="broker-a", brokerId=1
    ),
    "channel close": lambda p: p.on_channel_close(C3, 2000),
    "expiry": lambda p: p.scan_not_active_broker(1000 + EXPIRY + 1),
    "registration again": lambda p: register(p, now=200_000),
    "delete topic": lambda p: admin(p, RequestCode.DELETE_TOPIC_IN_NAMESRV, topic="TopicA"),
    "topic back": lambda p: register(p, dv=DataVersion(100, 3), now=200_000),
}


def test_every_route_change_changes_the_next_answer():
    proc = RequestProcessor(RouteInfoManager(EXPIRY))
    previous = answers(proc, "TopicA", 7)
    assert previous == [None] * len(FLAVOURS)
    for name, step in STEPS.items():
        assert answers(proc, "TopicA", 7) == previous, name  # answered from the caches now
        step(proc)
        current = answers(proc, "TopicA", 7)
        assert all(a != b for a, b in zip(previous, current, strict=True)), f"{name}: an answer did not change"
        previous = current


def test_a_steady_re_registration_keeps_the_cached_answers():
    proc = RequestProcessor(RouteInfoManager(EXPIRY))
    register(proc, filters=["10.0.9.1:40001"])
    cmd = lookup("TopicA", 1, version=407)
    first = proc.route_answers.frame(cmd)
    revision = proc.routes.revision
    register(proc, filters=["10.0.9.1:40001"], now=31_000)  # the same body 30 s later
    admin(proc, RequestCode.BROKER_HEARTBEAT, clusterName="C1", brokerAddr=M, brokerName="broker-a")
    assert proc.routes.revision == revision
    assert proc.route_answers.frame(cmd) == first


@pytest.mark.parametrize("opaque", [0, 1, 9, 10, -1, 123456789, 2**31 - 1, -(2**31)])
def test_cached_answer_carries_each_request_opaque(opaque):
    proc = RequestProcessor(RouteInfoManager(EXPIRY))
    register(proc)
    for flavour in FLAVOURS:
        proc.route_answers.frame(lookup("TopicA", 5, **flavour))  # cached with another opaque
        cmd = lookup("TopicA", opaque, **flavour)
        assert proc.route_answers.frame(cmd) == fresh_answer(proc.routes, cmd)


def test_requests_the_cached_path_leaves_to_process():
    proc = RequestProcessor(RouteInfoManager(EXPIRY))
    register(proc)
    oneway = lookup("TopicA", 1)
    oneway.flag = 2
    no_topic = simple_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {})
    other_code = simple_request(RequestCode.GET_BROKER_CLUSTER_INFO, {"topic": "TopicA"})
    for cmd in (oneway, no_topic, lookup("Nope", 1), other_code):
        assert proc.route_answers.frame(cmd) is None
    assert proc.process(oneway, C1, 0).response is None
    assert proc.process(no_topic, C1, 0).response.code == ResponseCode.SYSTEM_ERROR


def test_cluster_info_follows_the_tables():
    proc = RequestProcessor(RouteInfoManager(EXPIRY))

    def info() -> bytes:
        return proc.process(simple_request(RequestCode.GET_BROKER_CLUSTER_INFO), C1, 0).response.body

    register(proc)
    first = info()
    register(proc, addr=S, broker_id=1, conn=C2)
    assert info() != first and b"10.0.0.2:10911" in info()
    proc.on_channel_close(C2, 2000)
    assert info() == first


def test_with_access_control_every_lookup_goes_through_process():
    proc = RequestProcessor(RouteInfoManager(EXPIRY), access=AccessController(SecretStore({})))
    routes = proc.routes
    routes.register_broker("C1", M, "broker-a", 0, None, DV1, [A], [], 1000, RequestContext("c1", C1.remote, 103))
    cmd = lookup("TopicA", 1, version=407)
    assert proc.route_answers.frame(cmd, b"key") is None and proc.route_answers.known_lookups() is None
    assert encode_frame(proc.process(cmd, C1, 0).response) == fresh_answer(routes, cmd)
