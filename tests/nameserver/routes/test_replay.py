"""Replaying the event log gives the live server's tables (docs/nameserver-semantics.md §6).

Every worked scenario of ``test_routes_scenarios`` is run again with a scenario that, after each
step, feeds the step's events (with ``seq``, JSON round-tripped through orjson, as in the log) into
a ``RouteReplayer`` and asserts its tables equal the live core's. Once with every event carrying
its ``topics``, once with ``topics`` dropped the way the log writer does (resolved by digest).
"""

from __future__ import annotations

import orjson
import pytest

from nameserver.model import topics_digest
from nameserver.routes.manager import RequestContext, RouteInfoManager
from nameserver.routes.replay import ReplayError, RouteReplayer
from tests.nameserver.routes import test_routes_scenarios as scenarios
from tests.nameserver.scenario import A, B, M, N, S, Scenario, dv1, dv2, replay, table_state, to_log_lines

SCENARIOS = {name: fn for name, fn in vars(scenarios).items() if name.startswith("test_w") and callable(fn)}


def test_every_worked_scenario_is_replayed():
    assert len(SCENARIOS) >= 26


@pytest.mark.parametrize("strip_topics", [False, True], ids=["topics", "digest-only"])
@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_replays_step_by_step(name, strip_topics):
    made: list[Scenario] = []

    def new() -> Scenario:
        s = Scenario(replay=True, strip_topics=strip_topics)
        made.append(s)
        return s

    SCENARIOS[name](new)
    assert made and all(s.replayer is not None for s in made)
    for s in made:
        s.check_replay()
        assert s.replayer.last_seq == len(s.log)


def test_digest_only_mode_really_drops_topics():
    s = Scenario(replay=True, strip_topics=True)
    scenarios.test_w2_data_version_gates_topic_updates(lambda: s)
    assert [("topics" in line) for line in s.log if line["type"] in ("register", "heartbeat")] == [
        True,
        True,
        False,
        True,  # step 3 sends the same topics as step 2
    ]
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=121000, c="c1")
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=151000, c="c1")
    assert "topics" in s.log[-2] and "topics" not in s.log[-1]


def test_whole_log_replayed_at_once_equals_live_tables():
    s = Scenario()
    scenarios.w8_step1(s)
    s.unreg("C1", M, "broker-a", 0, t=11000)
    s.close("c2", t=12000)
    replayer = replay(s.log)
    assert table_state(replayer.routes) == table_state(s.core)
    assert replayer.last_seq == len(s.log) and replayer.last_ts == 12000


# ---------------------------------------------------------------------------- lifecycle events


def _filled() -> Scenario:
    s = Scenario()
    s.reg("C1", M, "broker-a", 0, dv1, [A, B], filter=["10.0.0.1:40001"], t=1000, c="c1")
    s.reg("C1", S, "broker-a", 1, dv1, [A], t=1100, c="c2")
    return s


def test_ns_start_empties_every_table():
    s = _filled()
    replayer = replay(s.log)
    assert all(table_state(replayer.routes).values())  # all five tables non-empty
    replayer.apply(
        {
            "seq": 99,
            "ts": 5000,
            "type": "ns_start",
            "broker_expiry_ms": 60000,
            "scan_interval_ms": 10000,
            "semantics": "rocketmq-4.9",
            "version": "x",
        }
    )
    assert table_state(replayer.routes) == table_state(RouteInfoManager())
    assert replayer.up is True
    assert replayer.routes.broker_expiry_ms == 60000


def test_ns_start_without_ns_stop_is_a_crash_restart():
    s = _filled()
    s.ns_start(50000)  # no ns_stop before it
    s.reg("C1", N, "broker-b", 0, dv1, [A], t=51000, c="c3")
    replayer = replay(s.log)
    assert table_state(replayer.routes) == table_state(s.core)
    assert replayer.routes.pickup_topic_route_data("TopicB") is None


def test_ns_stop_sets_up_false_and_no_route_is_served():
    s = _filled()
    s.ns_stop(50000)
    replayer = replay(s.log)
    assert replayer.up is False
    assert replayer.routes.pickup_topic_route_data("TopicA") is None
    assert table_state(replayer.routes) == table_state(RouteInfoManager())
    s.ns_start(60000)
    replayer.apply(s.log[-1])
    assert replayer.up is True


# ---------------------------------------------------------------------------- topics by digest


def test_register_without_topics_resolves_by_an_earlier_digest():
    s = Scenario()
    s.reg("C1", M, "broker-a", 0, dv1, [A, B], t=1000, c="c1")
    s.unreg("C1", M, "broker-a", 0, t=2000)
    # registerFirst again: the topics must be applied from the digest of the first event
    s.reg("C1", M, "broker-a", 0, dv1, [B, A], t=3000, c="c1")
    first, second = s.log[1], s.log[3]
    assert first["topics_digest"] == second["topics_digest"] == topics_digest([A, B])
    stripped = dict(second)
    del stripped["topics"]
    replayer = replay([s.log[0], first, s.log[2], stripped])
    assert table_state(replayer.routes) == table_state(s.core)
    assert sorted(replayer.routes.topic_queue_table) == ["TopicA", "TopicB"]


def test_learn_topics_makes_a_digest_known_across_segments():
    s = Scenario()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    line = {k: v for k, v in s.log[1].items() if k != "topics"}
    replayer = RouteReplayer()
    replayer.learn_topics(line["topics_digest"], s.log[1]["topics"])
    replay([s.log[0], line], replayer)
    assert table_state(replayer.routes) == table_state(s.core)


def test_unknown_digest_raises_replay_error():
    s = Scenario()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    line = {k: v for k, v in s.log[1].items() if k != "topics"}
    line["topics_digest"] = "0" * 64
    replayer = replay(s.log[:1])
    with pytest.raises(ReplayError, match="never logged"):
        replayer.apply(line)


def test_unknown_event_type_raises_replay_error():
    with pytest.raises(ReplayError, match="unknown event type"):
        RouteReplayer().apply({"seq": 1, "ts": 0, "type": "reboot"})


# ---------------------------------------------------------------------------- heartbeats and removals


def test_heartbeat_904_and_322_replay_by_request_code():
    s = Scenario()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.hb(M, t=2000)
    s.qdv(M, dv2, t=3000)  # not equal: no refresh
    s.qdv(M, dv1, t=4000)  # equal: refresh
    s.hb(N, t=5000)  # not live: nothing
    replayer = replay(s.log)
    assert replayer.routes.broker_live_table[M].last_update == 4000
    assert table_state(replayer.routes) == table_state(s.core)


def test_rejected_event_changes_nothing():
    s = _filled()
    replayer = replay(s.log)
    before = table_state(replayer.routes)
    replayer.apply(
        {
            "seq": 50,
            "ts": 9000,
            "type": "rejected",
            "request_code": 103,
            "reason": "crc32 not match",
            "broker_addr": N,
            "broker_name": "broker-b",
        }
    )
    assert table_state(replayer.routes) == before


def test_expire_and_channel_close_replay_by_address_not_by_channel():
    # the replay has no connections of its own: the events name the address
    s = Scenario()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.reg("C1", N, "broker-b", 0, dv1, [A], t=100000, c="c1")
    s.scan(125000)  # M expires; c1 is closed by the server and carries N: N goes too
    assert [(e["type"], e["broker_addr"]) for e in s.events] == [("expire", M), ("channel_close", N)]
    replayer = RouteReplayer()
    for line in s.log:
        replayer.apply(line)
        if line["type"] == "expire":
            assert M not in replayer.routes.broker_live_table and N in replayer.routes.broker_live_table
    assert table_state(replayer.routes) == table_state(s.core)
    assert replayer.routes.topic_queue_table == {}


def test_events_are_json_serialisable_in_event_log_key_order():
    s = Scenario()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    line = orjson.loads(orjson.dumps(s.events[0]))
    assert list(line)[:3] == ["ts", "type", "request_code"]
    assert line["data_version"] == {"timestamp": 100, "counter": 1}
    assert line["topics"] == [A.to_json_obj()]
    assert to_log_lines(s.events, 7)[0]["seq"] == 7


def test_replay_of_a_register_ignores_its_own_request_context():
    ctx = RequestContext("c1", "10.9.0.1:1", 103)
    core = RouteInfoManager()
    result = core.register_broker("C1", M, "broker-a", 0, "10.0.0.1:10912", dv1, [A], [], 1000, ctx)
    replayer = replay(to_log_lines(result.events, 1))
    assert table_state(replayer.routes) == table_state(core)


def test_a_restored_state_removes_a_closed_address_from_every_group():
    """The rebuild restores a day's tables with ``load_cells``; the address index must hold, so a
    channel close after midnight removes the address from every BrokerData that has it (W22)."""
    from jobs.rebuild import state as rebuild_state
    from nameserver.model import DataVersion
    from nameserver.routes.manager import BrokerLiveInfo

    journal: list = []
    state = {
        "format": 1,
        "ns": "ns-a",
        "date": "2026-11-21",
        "up": True,
        "run_start_seq": 1,
        "last_seq": 9,
        "last_ts": 1_000,
        "broker_expiry_ms": 120_000,
        "queues": [],
        "filters": [],
        "topics_by_digest": {},
        "addrs": [["broker-a", 0, "C1", "10.0.0.6:10911", 3], ["broker-d", 1, "C1", "10.0.0.6:10911", 5]],
        "clusters": [["C1", "broker-a", 3], ["C1", "broker-d", 5]],
        "live": [
            {
                "broker_addr": "10.0.0.6:10911",
                "broker_id": 0,
                "broker_name": "broker-a",
                "channel": "ch-6",
                "cluster": "C1",
                "data_version": {"counter": 1, "timestamp": 1},
                "ha_server_addr": "",
                "last_update": 900,
                "topics_digest": None,
            }
        ],
    }
    routes = rebuild_state.restore(state, journal, 0).replayer.routes
    assert journal == []  # restoring changes no cell
    assert isinstance(routes.broker_live_table["10.0.0.6:10911"], BrokerLiveInfo)
    assert DataVersion(1, 1) == routes.broker_live_table["10.0.0.6:10911"].data_version
    routes.on_channel_close("ch-6", 2_000)
    assert {name: bd.broker_addrs for name, bd in routes.broker_addr_table.items()} == {}
