"""What ``nsaudit collect`` logs for a server, round by round: the pure core, no sockets.

A reader rebuilds a server's observed tables from its stream: a snapshot resets them, every
``observed_*`` event sets one entry. :func:`replayed` is that reader, so each test checks what a user
of the log would get back, not just which events were written.
"""

from __future__ import annotations

import pytest

from nameserver.collect.record import DAY_MS, ObservedServer, changes
from nameserver.collect.targets import parse_targets, stream_id
from nameserver.collect.view import ServerView, broker_entry, cluster_view, route_entry

T0 = 1_795_219_200_000  # 2026-11-21T00:00:00Z
A, S, B = "10.0.0.5:10911", "10.0.0.6:10911", "10.0.0.7:10911"


def broker(name: str = "broker-a", addrs=None, cluster: str = "C1") -> dict:
    return {"cluster": cluster, "broker_name": name, "broker_addrs": addrs if addrs is not None else {0: A, 1: S}}


def route(perm: int = 6, queues: int = 8, brokers=("broker-a",)) -> dict:
    return route_entry(
        {
            "broker_datas": [broker(b) for b in brokers],
            "queue_datas": [
                {
                    "broker_name": b,
                    "read_queue_nums": queues,
                    "write_queue_nums": queues,
                    "perm": perm,
                    "topic_sys_flag": 0,
                }
                for b in brokers
            ],
            "filter_server_table": {},
        }
    )


def view(brokers=("broker-a",), **routes) -> ServerView:
    return ServerView({b: broker_entry(broker(b)) for b in brokers}, routes)


def replayed(events: list[dict]) -> ServerView | None:
    """The observed tables as a reader of the stream rebuilds them (None: unknown)."""
    brokers: dict | None = None
    routes: dict | None = None
    for event in events:
        kind = event["type"]
        if kind == "observe_snapshot":
            brokers, routes = {}, {}
        elif kind in ("observe_error", "observe_start"):
            brokers = routes = None
        elif kind == "observed_broker":
            assert brokers is not None, "a change before any snapshot"
            if event["broker_addrs"] is None:
                brokers.pop(event["broker_name"], None)
            else:
                brokers[event["broker_name"]] = {k: event[k] for k in ("cluster", "broker_name", "broker_addrs")}
        elif kind == "observed_route":
            assert routes is not None, "a change before any snapshot"
            value = (
                None
                if event["queue_datas"] is None
                else {k: event[k] for k in ("queue_datas", "broker_datas", "filter_server_table")}
            )
            routes[event["topic"]] = value
    if brokers is None:
        return None
    return ServerView(brokers, {t: r for t, r in routes.items() if r is not None})


def known(v: ServerView) -> ServerView:
    """A view as a reader sees it: a null route and an absent topic read alike."""
    return ServerView(dict(v.broker_addr_table), {t: r for t, r in v.routes.items() if r is not None})


def test_the_first_round_logs_the_full_state_and_an_unchanged_round_logs_nothing():
    server = ObservedServer("10.0.0.2:9876", 10_000)
    log = server.start(T0)
    first = view(TopicA=route(), TopicB=None)
    log += server.observed(first, T0 + 10, 1)
    assert [e["type"] for e in log] == [
        "observe_start",
        "observe_snapshot",
        "observed_broker",
        "observed_route",
        "observed_route",
    ]
    snap = log[1]
    assert (snap["reason"], snap["round"], snap["brokers_observed"], snap["topics_observed"]) == ("start", 1, 1, 2)
    assert server.observed(view(TopicA=route(), TopicB=None), T0 + 20, 2) == []
    assert replayed(log) == known(first)


def test_changes_are_logged_one_entry_each_and_replay_to_the_new_state():
    server = ObservedServer("10.0.0.2:9876", 10_000)
    log = server.start(T0) + server.observed(view(TopicA=route(), TopicB=route()), T0 + 1, 1)
    # wipeWritePerm on broker-a (perm 6 -> 4), TopicB deleted, a new broker group and topic
    after = ServerView(
        {"broker-a": broker_entry(broker()), "broker-b": broker_entry(broker("broker-b", {0: B}))},
        {"TopicA": route(perm=4), "TopicC": route(brokers=("broker-b",))},
    )
    changed = server.observed(after, T0 + 2, 2)
    assert [(e["type"], e.get("topic") or e.get("broker_name")) for e in changed] == [
        ("observed_broker", "broker-b"),
        ("observed_route", "TopicA"),
        ("observed_route", "TopicB"),
        ("observed_route", "TopicC"),
    ]
    assert changed[1]["queue_datas"][0]["perm"] == 4
    assert changed[2]["queue_datas"] is None and changed[2]["broker_datas"] is None
    assert all(e["round"] == 2 and e["ts"] == T0 + 2 for e in changed)
    assert replayed(log + changed) == known(after)


def test_a_broker_that_leaves_the_cluster_info_is_a_null_entry():
    before, after = view(("broker-a", "broker-b")), view(("broker-a",))
    (event,) = changes(before, after, T0, 3)
    assert (event["broker_name"], event["cluster"], event["broker_addrs"]) == ("broker-b", None, None)


def test_a_broker_id_moving_address_is_a_change():
    before = ServerView({"broker-a": broker_entry(broker(addrs={0: A, 1: S}))}, {})
    after = ServerView({"broker-a": broker_entry(broker(addrs={0: S}))}, {})
    (event,) = changes(before, after, T0, 2)
    assert event["broker_addrs"] == [{"broker_id": 0, "broker_addr": S}]


def test_a_failure_is_logged_once_and_the_next_answer_is_a_full_snapshot():
    server = ObservedServer("10.0.0.2:9876", 10_000)
    log = server.start(T0) + server.observed(view(TopicA=route()), T0 + 1, 1)
    failed = server.failed(T0 + 2, 2, "timeout", "no answer to GET_BROKER_CLUSTER_INFO within 5 s")
    assert [(e["type"], e["reason"], e["namesrv_addr"]) for e in failed] == [
        ("observe_error", "timeout", "10.0.0.2:9876")
    ]
    assert server.failed(T0 + 3, 3, "connect_failed", "Connection refused") == []
    assert replayed(log + failed) is None  # nothing is known of the server while it does not answer
    back = server.observed(view(TopicA=route()), T0 + 4, 4)
    assert back[0]["type"] == "observe_snapshot" and back[0]["reason"] == "recovered"
    assert replayed(log + failed + back) == known(view(TopicA=route()))


def test_the_first_round_of_a_utc_day_is_a_full_snapshot_so_each_day_stands_alone():
    server = ObservedServer("10.0.0.2:9876", 10_000)
    server.start(T0 - 20)
    server.observed(view(TopicA=route()), T0 - 10, 1)
    same_day = server.observed(view(TopicA=route(), TopicB=route()), T0 - 5, 2)
    assert [e["type"] for e in same_day] == ["observed_route"]
    next_day = server.observed(view(TopicA=route(), TopicB=route()), T0 + 5, 3)
    assert next_day[0]["reason"] == "day" and len(next_day) == 1 + 1 + 2
    assert server.observed(view(TopicA=route(), TopicB=route()), T0 + DAY_MS - 1, 4) == []


def test_route_entries_are_canonical_whatever_order_the_server_wrote():
    one = {
        "broker_datas": [broker("b"), broker("a", {1: S, 0: A})],
        "queue_datas": [
            {"broker_name": "b", "read_queue_nums": 4, "write_queue_nums": 4, "perm": 6, "topic_sys_flag": 0},
            {"broker_name": "a", "read_queue_nums": 8, "write_queue_nums": 8, "perm": 6, "topic_sys_flag": 0},
        ],
        "filter_server_table": {B: ["f2"], A: ["f1"]},
    }
    two = {
        **one,
        "broker_datas": list(reversed(one["broker_datas"])),
        "queue_datas": list(reversed(one["queue_datas"])),
        "filter_server_table": {A: ["f1"], B: ["f2"]},
    }
    assert route_entry(one) == route_entry(two)
    assert [b["broker_name"] for b in route_entry(one)["broker_datas"]] == ["a", "b"]
    assert route_entry(one)["broker_datas"][0]["broker_addrs"] == [
        {"broker_id": 0, "broker_addr": A},
        {"broker_id": 1, "broker_addr": S},
    ]
    info = {"broker_addr_table": {"b": broker("b"), "a": broker("a", {})}, "cluster_addr_table": {"C1": ["a", "b"]}}
    assert list(cluster_view(info)) == ["a", "b"] and cluster_view(info)["a"]["broker_addrs"] == []


def test_namesrv_lists_parse_as_rocketmq_writes_them_and_bad_entries_are_named():
    targets = parse_targets(" 10.0.0.1:9876; ns-b=10.0.0.2:9877 ,[::1]:9878;")
    assert [(t.ns, t.host, t.port, t.addr) for t in targets] == [
        ("obs-10.0.0.1-9876", "10.0.0.1", 9876, "10.0.0.1:9876"),
        ("ns-b", "10.0.0.2", 9877, "10.0.0.2:9877"),
        ("obs-__1-9878", "::1", 9878, "[::1]:9878"),
    ]
    assert stream_id("name-server.example", 9876) == "obs-name-server.example-9876"
    for text, message in [
        ("", "no HOST:PORT"),
        ("10.0.0.1", "'10.0.0.1' is not HOST:PORT"),
        ("h:70000", "'h:70000' is not HOST:PORT"),
        ("h:1;h:1", "address given twice: h:1"),
        ("x=h:1;x=g:1", "stream id given twice: x"),
        ("../up=h:1", "stream id '../up'"),
    ]:
        with pytest.raises(ValueError, match=message.replace("[", r"\[")):
            parse_targets(text)
