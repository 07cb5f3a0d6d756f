"""The worked scenarios W1-W26 of docs/nameserver-semantics.md §8.2, step by step.

Each test takes ``new``, a factory of :class:`Scenario`; ``test_replay.py`` runs the same tests
with a factory whose scenarios also replay every step's events and compare the tables.
W27/W28 are wire-level and tested with the server.
"""

from __future__ import annotations

import pytest

from nameserver.model import QueueData
from nameserver.routes.manager import BrokerData, ClusterInfo
from tests.nameserver.scenario import HA, A, B, C, M, N, S, Scenario, assert_events, dv0, dv1, dv2, dv3, topic


@pytest.fixture
def new():
    """A factory of fresh scenarios (``ns_start`` @0)."""
    return Scenario


def _registered(events, kind, addr, **keys):
    assert_events(events, [(kind, {"broker_addr": addr, "request_code": 103, **keys})])


# ---------------------------------------------------------------------------- W1-W3


def test_w1_first_registration_of_a_master(new):
    s = new()
    assert_events(s.events, [("ns_start", {"ts": 0})])
    s.empty()
    assert s.R("TopicA") == "null"

    r = s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    _registered(
        s.events,
        "register",
        M,
        cluster="C1",
        broker_name="broker-a",
        broker_id=0,
        ha_addr=HA[M],
        data_version=dv1,
        filter_servers=[],
        request_version=407,
    )
    s.expect(CA="C1{broker-a}", BA="broker-a(C1){0:M}", QT="TopicA{broker-a 8/8/6/0}", LT="M(1000,dv1,c1)", FS="")
    assert s.ext == {} and r.master_addr is None and r.ha_server_addr is None

    route = s.route("TopicA")
    assert route is not None
    assert route.broker_datas == [BrokerData("C1", "broker-a", {0: M})]
    assert route.queue_datas == [QueueData("broker-a", 8, 8, 6, 0)]
    assert route.filter_server_table == {}
    assert s.pub("TopicA") == "a:0-7" and s.sub("TopicA") == "a:0-7"

    assert s.R("TopicB") == "null"

    assert s.core.get_all_cluster_info() == ClusterInfo(
        {"broker-a": BrokerData("C1", "broker-a", {0: M})}, {"C1": ["broker-a"]}
    )


def test_w2_data_version_gates_topic_updates(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/6/0}", LT="M(1000,dv1,c1)")

    s.reg("C1", M, "broker-a", 0, dv1, [topic("TopicA 16/16/6/0")], t=31000, c="c1")
    _registered(s.events, "heartbeat", M)
    s.expect(QT="TopicA{broker-a 8/8/6/0}", LT="M(31000,dv1,c1)")

    s.reg("C1", M, "broker-a", 0, dv2, [topic("TopicA 16/16/6/0")], t=61000, c="c1")
    s.expect(QT="TopicA{broker-a 16/16/6/0}", LT="M(61000,dv2,c1)")

    s.reg("C1", M, "broker-a", 0, dv3, [topic("TopicA 4/4/6/0")], t=91000, c="c1")
    s.expect(QT="TopicA{broker-a 4/4/6/0}", LT="M(91000,dv3,c1)")


def test_w3_absent_topics_stay_incremental_registration_adds(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A, B], t=1000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/6/0}, TopicB{broker-a 4/4/6/0}")

    s.reg("C1", M, "broker-a", 0, dv2, [A], t=31000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/6/0}, TopicB{broker-a 4/4/6/0}")
    assert s.R("TopicB") == "[broker-a(C1){0:M}] | [broker-a 4/4/6/0]"

    s.reg("C1", M, "broker-a", 0, dv3, [C], t=32000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/6/0}, TopicB{broker-a 4/4/6/0}, TopicC{broker-a 8/8/6/0}", LT="M(32000,dv3,c1)")


# ---------------------------------------------------------------------------- W4-W9: masters and slaves


def w4(s: Scenario) -> None:
    """W4 steps 1-2: master M (dv1, c1) then slave S (dv2, c2) of broker-a."""
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.reg("C1", S, "broker-a", 1, dv2, [topic("TopicA 16/16/6/0"), B], t=2000, c="c2")


def test_w4_master_then_slave(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.expect(CA="C1{broker-a}", BA="broker-a(C1){0:M}", QT="TopicA{broker-a 8/8/6/0}", LT="M(1000,dv1,c1)")

    s.reg("C1", S, "broker-a", 1, dv2, [topic("TopicA 16/16/6/0"), B], t=2000, c="c2")
    _registered(s.events, "register", S, broker_id=1)
    s.expect(
        BA="broker-a(C1){0:M,1:S}",
        QT="TopicA{broker-a 8/8/6/0}",
        CA="C1{broker-a}",
        LT="M(1000,dv1,c1), S(2000,dv2,c2)",
    )
    assert s.ext == {"haServerAddr": "10.0.0.1:10912", "masterAddr": "10.0.0.1:10911"}

    assert s.R("TopicA") == "[broker-a(C1){0:M,1:S}] | [broker-a 8/8/6/0]"
    assert s.pub("TopicA") == "a:0-7" and s.sub("TopicA") == "a:0-7"
    assert s.R("TopicB") == "null"


def test_w5_slave_registers_before_its_master(new):
    s = new()
    s.reg("C1", S, "broker-a", 1, dv1, [A], t=1000, c="c2")
    s.expect(CA="C1{broker-a}", BA="broker-a(C1){1:S}", QT="", LT="S(1000,dv1,c2)")
    assert s.ext == {}
    assert s.R("TopicA") == "null"

    s.reg("C1", M, "broker-a", 0, dv1, [A], t=2000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/6/0}", BA="broker-a(C1){0:M,1:S}")
    assert s.ext == {}

    s.reg("C1", S, "broker-a", 1, dv1, [A], t=3000, c="c2")
    assert s.ext == {"haServerAddr": "10.0.0.1:10912", "masterAddr": "10.0.0.1:10911"}
    s.expect(LT="M(2000,dv1,c1), S(3000,dv1,c2)")


def test_w6_master_unregisters_slave_stays(new):
    s = new()
    w4(s)
    s.unreg("C1", M, "broker-a", 0, t=5000)
    assert_events(s.events, [("unregister", {"broker_addr": M, "broker_name": "broker-a", "ha_addr": HA[M]})])
    s.expect(LT="S(2000,dv2,c2)", BA="broker-a(C1){1:S}", CA="C1{broker-a}", QT="TopicA{broker-a 8/8/6/0}")

    assert s.R("TopicA") == "[broker-a(C1){1:S}] | [broker-a 8/8/6/0]"
    assert s.pub("TopicA") == "—" and s.sub("TopicA") == "a:0-7"

    s.unreg("C1", S, "broker-a", 1, t=6000)
    s.empty()
    assert s.R("TopicA") == "null"


def test_w7_slave_promotion_after_master_connection_dropped(new):
    s = new()
    w4(s)
    s.close("c1", t=10000)
    assert_events(
        s.events,
        [
            (
                "channel_close",
                {"broker_addr": M, "channel": "c1", "cluster": "C1", "broker_name": "broker-a", "broker_id": 0},
            )
        ],
    )
    s.expect(LT="S(2000,dv2,c2)", BA="broker-a(C1){1:S}", QT="TopicA{broker-a 8/8/6/0}", CA="C1{broker-a}")

    s.reg("C1", S, "broker-a", 0, dv2, [topic("TopicA 16/16/6/0")], t=11000, c="c2")
    _registered(s.events, "heartbeat", S, broker_id=0)
    s.expect(BA="broker-a(C1){0:S}", QT="TopicA{broker-a 16/16/6/0}", LT="S(11000,dv2,c2)")
    assert s.ext == {}

    assert s.R("TopicA") == "[broker-a(C1){0:S}] | [broker-a 16/16/6/0]"
    assert s.pub("TopicA") == "a:0-15" and s.sub("TopicA") == "a:0-15"


def w8_step1(s: Scenario) -> None:
    """W4, then W8 step 1: S promoted to id 0 while M is still live."""
    w4(s)
    s.reg("C1", S, "broker-a", 0, dv2, [A], t=10000, c="c2")


def test_w8_promotion_while_old_master_live_and_its_late_unregister(new):
    s = new()
    w8_step1(s)
    _registered(s.events, "heartbeat", S, broker_id=0)
    s.expect(QT="TopicA{broker-a 8/8/6/0}", BA="broker-a(C1){0:S}", LT="M(1000,dv1,c1), S(10000,dv2,c2)")

    s.unreg("C1", M, "broker-a", 0, t=11000)
    s.expect(LT="S(10000,dv2,c2)", BA="broker-a(C1){0:S}", CA="C1{broker-a}", QT="TopicA{broker-a 8/8/6/0}")
    assert s.R("TopicA") == "[broker-a(C1){0:S}] | [broker-a 8/8/6/0]"
    assert s.pub("TopicA") == "a:0-7"

    before = s.snapshot()
    s.close("c1", t=11500)
    assert_events(s.events, [("channel_close", {"broker_addr": None, "channel": "c1"})])
    assert s.snapshot() == before

    s.reg("C1", M, "broker-a", 1, dv1, [A], t=40000, c="c3")
    s.expect(BA="broker-a(C1){0:S,1:M}", QT="TopicA{broker-a 8/8/6/0}")
    assert s.ext == {"haServerAddr": "10.0.0.2:10912", "masterAddr": "10.0.0.2:10911"}


def test_w9_demoted_master_expires_without_touching_new_master(new):
    s = new()
    w8_step1(s)
    for t in (40000, 70000, 100000):
        s.quiet_scans(t)
        s.reg("C1", S, "broker-a", 0, dv2, [A], t=t, c="c2")
        s.expect(QT="TopicA{broker-a 8/8/6/0}")
    s.quiet_scans(115000)

    assert s.scan(115000) == []
    s.expect(LT="M(1000,dv1,c1), S(100000,dv2,c2)")

    s.scan(125000)
    assert_events(
        s.events,
        [
            (
                "expire",
                {"broker_addr": M, "last_update_ts": 1000, "cluster": "C1", "broker_name": "broker-a", "broker_id": 0},
            ),
            ("channel_close", {"broker_addr": None, "channel": "c1"}),
        ],
    )
    s.expect(LT="S(100000,dv2,c2)", BA="broker-a(C1){0:S}", CA="C1{broker-a}", QT="TopicA{broker-a 8/8/6/0}")


# ---------------------------------------------------------------------------- W10-W15: admin operations


def test_w10_wipe_then_reregister_same_vs_new_data_version(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A, B], t=1000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/6/0}, TopicB{broker-a 4/4/6/0}")

    assert s.wipe("broker-a", t=2000) == 2
    assert_events(s.events, [("wipe_write_perm", {"broker_name": "broker-a", "topic_count": 2, "request_code": 205})])
    s.expect(QT="TopicA{broker-a 8/8/4/0}, TopicB{broker-a 4/4/4/0}")
    assert s.R("TopicA") != "null"
    assert s.pub("TopicA") == "—" and s.sub("TopicA") == "a:0-7"

    assert s.wipe("broker-a", t=2500) == 2
    assert_events(s.events, [("wipe_write_perm", {"topic_count": 2})])
    s.expect(QT="TopicA{broker-a 8/8/4/0}, TopicB{broker-a 4/4/4/0}")

    s.reg("C1", M, "broker-a", 0, dv1, [A, B], t=31000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/4/0}, TopicB{broker-a 4/4/4/0}")

    s.reg("C1", M, "broker-a", 0, dv2, [A, B], t=61000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/6/0}, TopicB{broker-a 4/4/6/0}")
    assert s.pub("TopicA") == "a:0-7"


def test_w11_wipe_and_add_on_odd_perms(new):
    s = new()
    s.reg(
        "C1",
        M,
        "broker-a",
        0,
        dv1,
        [topic("TopicX 8/8/7/0"), topic("TopicR 8/8/4/0"), topic("TopicW 8/8/2/0")],
        t=1000,
        c="c1",
    )
    s.expect(QT="TopicR{broker-a 8/8/4/0}, TopicW{broker-a 8/8/2/0}, TopicX{broker-a 8/8/7/0}")

    assert s.wipe("broker-a", t=2000) == 3
    s.expect(QT="TopicR{broker-a 8/8/4/0}, TopicW{broker-a 8/8/0/0}, TopicX{broker-a 8/8/5/0}")
    assert s.R("TopicW") != "null"
    assert s.pub("TopicW") == "—" and s.sub("TopicW") == "—"

    assert s.add("broker-a", t=3000) == 3
    assert_events(s.events, [("add_write_perm", {"broker_name": "broker-a", "topic_count": 3, "request_code": 327})])
    s.expect(QT="TopicR{broker-a 8/8/6/0}, TopicW{broker-a 8/8/6/0}, TopicX{broker-a 8/8/6/0}")

    before = s.snapshot()
    assert s.add("broker-b", t=4000) == 0
    assert_events(s.events, [("add_write_perm", {"broker_name": "broker-b", "topic_count": 0})])
    assert s.snapshot() == before


def test_w12_delete_topic_then_reregister_same_data_version(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A, B], t=1000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/6/0}, TopicB{broker-a 4/4/6/0}")

    s.delete("TopicA", t=2000)
    assert_events(s.events, [("delete_topic", {"topic": "TopicA", "cluster": None, "request_code": 216})])
    s.expect(QT="TopicB{broker-a 4/4/6/0}")
    assert s.R("TopicA") == "null"

    s.reg("C1", M, "broker-a", 0, dv1, [A, B], t=31000, c="c1")
    s.expect(QT="TopicB{broker-a 4/4/6/0}")
    assert s.R("TopicA") == "null"

    s.reg("C1", M, "broker-a", 0, dv2, [A, B], t=61000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/6/0}, TopicB{broker-a 4/4/6/0}")

    before = s.snapshot()
    s.delete("TopicZ", t=62000)
    assert_events(s.events, [("delete_topic", {"topic": "TopicZ"})])
    assert s.snapshot() == before


def w13_step1(s: Scenario) -> None:
    """W13 step 1: TopicA on broker-a (C1, M) and broker-b (C2, N)."""
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.reg("C2", N, "broker-b", 0, dv1, [A], t=1100, c="c3")


def test_w13_delete_topic_in_one_cluster(new):
    s = new()
    w13_step1(s)
    s.expect(QT="TopicA{broker-a 8/8/6/0, broker-b 8/8/6/0}", CA="C1{broker-a}, C2{broker-b}")

    before = s.snapshot()
    s.delete("TopicA", "C9", t=2000)
    assert_events(s.events, [("delete_topic", {"topic": "TopicA", "cluster": "C9"})])
    assert s.snapshot() == before

    s.delete("TopicA", "C1", t=2100)
    s.expect(QT="TopicA{broker-b 8/8/6/0}", BA="broker-a(C1){0:M}, broker-b(C2){0:N}")
    assert s.R("TopicA") == "[broker-b(C2){0:N}] | [broker-b 8/8/6/0]"

    s.delete("TopicA", "C2", t=2200)
    s.expect(QT="")
    assert s.R("TopicA") == "null"

    s = new()
    w13_step1(s)
    s.delete("TopicA", "", t=2000)
    assert_events(s.events, [("delete_topic", {"topic": "TopicA", "cluster": ""})])
    s.expect(QT="", CA="C1{broker-a}, C2{broker-b}")
    assert s.R("TopicA") == "null"


def test_w14_two_groups_one_loses_its_master(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.reg("C1", S, "broker-a", 1, dv1, [A], t=1100, c="c2")
    s.reg("C1", N, "broker-b", 0, dv1, [A], t=1200, c="c3")
    s.expect(BA="broker-a(C1){0:M,1:S}, broker-b(C1){0:N}", QT="TopicA{broker-a 8/8/6/0, broker-b 8/8/6/0}")

    s.unreg("C1", M, "broker-a", 0, t=5000)
    s.expect(
        BA="broker-a(C1){1:S}, broker-b(C1){0:N}",
        QT="TopicA{broker-a 8/8/6/0, broker-b 8/8/6/0}",
        CA="C1{broker-a, broker-b}",
        LT="S(1100,dv1,c2), N(1200,dv1,c3)",
    )

    assert s.R("TopicA") == "[broker-a(C1){1:S}, broker-b(C1){0:N}] | [broker-a 8/8/6/0, broker-b 8/8/6/0]"
    assert s.pub("TopicA") == "b:0-7"
    assert s.sub("TopicA") == "a:0-7, b:0-7"


def test_w15_fewer_read_than_write_queues(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [topic("TopicA 4/8/6/0")], t=1000, c="c1")
    s.expect(QT="TopicA{broker-a 4/8/6/0}")
    assert s.pub("TopicA") == "a:0-7"
    assert s.sub("TopicA") == "a:0-3"


# ---------------------------------------------------------------------------- W16-W18: liveness


def test_w16_closing_the_connection_vs_reconnecting(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.expect(LT="M(1000,dv1,c1)")

    s.reg("C1", M, "broker-a", 0, dv1, [A], t=31000, c="c2")
    _registered(s.events, "heartbeat", M, channel="c2")
    s.expect(LT="M(31000,dv1,c2)")

    before = s.snapshot()
    s.close("c1", t=31500)
    assert_events(s.events, [("channel_close", {"broker_addr": None, "channel": "c1"})])
    assert s.snapshot() == before

    s.close("c2", t=40000)
    assert_events(s.events, [("channel_close", {"broker_addr": M, "channel": "c2"})])
    s.empty()
    assert s.R("TopicA") == "null"


def test_w17_expiry_of_a_silent_broker_tick_boundary(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=5000, c="c1")
    s.expect(LT="M(5000,dv1,c1)")
    s.quiet_scans(125000)

    assert s.scan(125000) == []
    s.expect(LT="M(5000,dv1,c1)")
    assert s.R("TopicA") != "null"

    s.scan(135000)
    assert_events(
        s.events,
        [
            ("expire", {"broker_addr": M, "last_update_ts": 5000, "broker_name": "broker-a", "broker_id": 0}),
            ("channel_close", {"broker_addr": None, "channel": "c1"}),
        ],
    )
    s.empty()
    assert s.R("TopicA") == "null"


def test_w17_variant_last_registration_at_1000(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.quiet_scans(125000)  # ... up to @115000: 121000 is not < 115000
    s.scan(125000)
    assert_events(
        s.events, [("expire", {"broker_addr": M, "last_update_ts": 1000}), ("channel_close", {"broker_addr": None})]
    )
    s.empty()


def test_w18_broker_heartbeat_and_query_data_version(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.expect(LT="M(1000,dv1,c1)")

    s.quiet_scans(100000)
    s.hb(M, t=100000, c="c5")
    assert_events(s.events, [("heartbeat", {"request_code": 904, "broker_addr": M, "channel": "c5"})])
    s.expect(LT="M(100000,dv1,c1)")

    before = s.snapshot()
    s.hb(N, t=101000, c="c5")
    assert_events(s.events, [("heartbeat", {"request_code": 904, "broker_addr": N})])
    assert s.snapshot() == before

    s.quiet_scans(150000)
    assert s.qdv(M, dv1, t=150000) == (False, dv1)
    assert_events(s.events, [("heartbeat", {"request_code": 322, "broker_addr": M, "data_version": dv1})])
    s.expect(LT="M(150000,dv1,c1)")

    before = s.snapshot()
    assert s.qdv(M, dv2, t=160000) == (True, dv1)
    assert s.snapshot() == before

    assert s.qdv(N, dv1, t=161000) == (True, None)
    assert s.snapshot() == before

    s.quiet_scans(265000)
    assert s.scan(265000) == []
    s.scan(275000)
    assert_events(
        s.events,
        [
            ("expire", {"broker_addr": M, "last_update_ts": 150000}),
            ("channel_close", {"broker_addr": None, "channel": "c1"}),
        ],
    )
    s.empty()


# ---------------------------------------------------------------------------- W19-W20: restarts


def test_w19_restart_empty_until_next_registrations(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A, B], t=1000, c="c1")
    s.reg("C1", N, "broker-b", 0, dv1, [A], t=1200, c="c2")
    full = "TopicA{broker-a 8/8/6/0, broker-b 8/8/6/0}, TopicB{broker-a 4/4/6/0}"
    s.expect(QT=full)

    s.ns_stop(50000)
    assert_events(s.events, [("ns_stop", {})])
    s.ns_start(60000)
    assert_events(s.events, [("ns_start", {"ts": 60000, "broker_expiry_ms": 120000, "semantics": "rocketmq-4.9"})])
    s.empty()
    assert s.R("TopicA") == "null" and s.R("TopicB") == "null"

    s.quiet_scans(70000)  # @65000
    s.reg("C1", N, "broker-b", 0, dv1, [A], t=70000, c="c3")
    _registered(s.events, "register", N)
    s.expect(QT="TopicA{broker-b 8/8/6/0}")
    assert s.R("TopicA") == "[broker-b(C1){0:N}] | [broker-b 8/8/6/0]"
    assert s.R("TopicB") == "null"

    s.quiet_scans(85000)
    s.reg("C1", M, "broker-a", 0, dv1, [A, B], t=85000, c="c4")
    s.expect(
        QT=full,
        BA="broker-a(C1){0:M}, broker-b(C1){0:N}",
        CA="C1{broker-a, broker-b}",
        LT="M(85000,dv1,c4), N(70000,dv1,c3)",
    )


def test_w20_restart_race_incremental_registration_first(new):
    s = new()
    s.empty()

    s.reg("C1", M, "broker-a", 0, dv2, [C], t=1000, c="c1")
    s.expect(QT="TopicC{broker-a 8/8/6/0}", LT="M(1000,dv2,c1)")

    s.reg("C1", M, "broker-a", 0, dv2, [A, B, C], t=15000, c="c1")
    s.expect(QT="TopicC{broker-a 8/8/6/0}")
    assert s.R("TopicA") == "null"

    s.reg("C1", M, "broker-a", 0, dv3, [A, B, C], t=45000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/6/0}, TopicB{broker-a 4/4/6/0}, TopicC{broker-a 8/8/6/0}")


# ---------------------------------------------------------------------------- W21-W24: odd shapes


def w21_step2(s: Scenario) -> None:
    """W21 steps 1-2: broker-a registered in C1, then in C2."""
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.expect(CA="C1{broker-a}", BA="broker-a(C1){0:M}")
    s.reg("C2", M, "broker-a", 0, dv1, [A], t=31000, c="c1")


def test_w21_broker_group_moved_to_another_cluster(new):
    s = new()
    w21_step2(s)
    s.expect(CA="C1{broker-a}, C2{broker-a}", BA="broker-a(C1){0:M}", QT="TopicA{broker-a 8/8/6/0}")
    assert s.route("TopicA").broker_datas[0].cluster == "C1"
    assert s.core.get_all_cluster_info().cluster_addr_table == {"C1": ["broker-a"], "C2": ["broker-a"]}

    assert s.core.get_topics_by_cluster("C1") == ["TopicA"]
    assert s.core.get_topics_by_cluster("C2") == ["TopicA"]

    s.unreg("C2", M, "broker-a", 0, t=40000)
    s.expect(LT="", BA="", QT="", CA="C1{broker-a}")
    assert s.core.get_all_cluster_info() == ClusterInfo({}, {"C1": ["broker-a"]})
    assert s.core.get_topics_by_cluster("C1") == []


def test_w21_4b_close_drops_the_name_from_both_cluster_sets(new):
    s = new()
    w21_step2(s)
    s.close("c1", t=40000)
    assert_events(s.events, [("channel_close", {"broker_addr": M})])
    s.empty()


def w22_step2(s: Scenario) -> None:
    """W22 steps 1-2: M registers as broker-a, then as broker-x, over c1."""
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.expect(BA="broker-a(C1){0:M}", QT="TopicA{broker-a 8/8/6/0}")
    s.reg("C1", M, "broker-x", 0, dv1, [topic("TopicX 8/8/6/0")], t=2000, c="c1")


def test_w22_one_address_under_two_broker_names_unregister(new):
    s = new()
    w22_step2(s)
    _registered(s.events, "heartbeat", M, broker_name="broker-x")
    s.expect(
        QT="TopicA{broker-a 8/8/6/0}, TopicX{broker-x 8/8/6/0}",
        BA="broker-a(C1){0:M}, broker-x(C1){0:M}",
        CA="C1{broker-a, broker-x}",
        LT="M(2000,dv1,c1)",
    )

    s.unreg("C1", M, "broker-a", 0, t=3000)
    s.expect(LT="", BA="broker-x(C1){0:M}", QT="TopicX{broker-x 8/8/6/0}", CA="C1{broker-x}")
    assert s.R("TopicX") == "[broker-x(C1){0:M}] | [broker-x 8/8/6/0]"

    stuck = s.snapshot()
    s.quiet_scans(1_000_000)  # no scan ever removes it: the scan visits only live entries
    assert s.snapshot() == stuck

    s.close("c1", t=1_000_001)
    assert_events(s.events, [("channel_close", {"broker_addr": None, "channel": "c1"})])
    assert s.snapshot() == stuck


def test_w22_3b_close_removes_the_address_from_both_groups(new):
    s = new()
    w22_step2(s)
    s.close("c1", t=3000)
    assert_events(s.events, [("channel_close", {"broker_addr": M, "broker_name": "broker-x"})])
    s.empty()
    assert s.R("TopicA") == "null" and s.R("TopicX") == "null"


def test_w23_one_connection_carrying_two_live_entries(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c9")
    s.reg("C1", N, "broker-b", 0, dv1, [A], t=1100, c="c9")
    s.expect(LT="M(1000,dv1,c9), N(1100,dv1,c9)")

    s.close("c9", t=5000)
    assert_events(
        s.events,
        [
            ("channel_close", {"broker_addr": M, "broker_name": "broker-a"}),
            ("channel_close", {"broker_addr": N, "broker_name": "broker-b"}),
        ],
    )
    s.empty()


def w24_step3(s: Scenario) -> None:
    """W24 steps 1-3: unregister naming the wrong group, then the connection closes."""
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.unreg("C1", M, "broker-zz", 0, t=2000)
    s.expect(LT="", BA="broker-a(C1){0:M}", CA="C1{broker-a}", QT="TopicA{broker-a 8/8/6/0}")
    assert s.R("TopicA") == "[broker-a(C1){0:M}] | [broker-a 8/8/6/0]"
    s.close("c1", t=3000)
    assert_events(s.events, [("channel_close", {"broker_addr": None})])
    s.expect(LT="", BA="broker-a(C1){0:M}", CA="C1{broker-a}", QT="TopicA{broker-a 8/8/6/0}")


def test_w24_unregister_naming_the_wrong_group(new):
    s = new()
    w24_step3(s)
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=4000, c="c2")
    _registered(s.events, "register", M)
    s.expect(LT="M(4000,dv1,c2)", BA="broker-a(C1){0:M}", QT="TopicA{broker-a 8/8/6/0}")


def test_w24_stuck_address_never_expires(new):
    s = new()
    w24_step3(s)
    stuck = s.snapshot()
    s.quiet_scans(1_000_000)
    assert s.snapshot() == stuck


def test_w24_step4_reapplies_topics_because_no_live_entry(new):
    # §2.1 step 5: no live entry counts as a changed data version, so a perm wiped on this
    # server is restored although dv1 is unchanged and the registration is not registerFirst.
    s = new()
    w24_step3(s)
    assert s.wipe("broker-a", t=3500) == 1
    s.expect(QT="TopicA{broker-a 8/8/4/0}")
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=4000, c="c2")
    s.expect(QT="TopicA{broker-a 8/8/6/0}")


# ---------------------------------------------------------------------------- W25-W26: bodies


def test_w25_filter_servers_and_the_pre_3_0_11_body(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A], filter=["10.0.0.1:40001"], t=1000, c="c1")
    s.expect(FS='M["10.0.0.1:40001"]')
    assert s.route("TopicA").filter_server_table == {"10.0.0.1:10911": ["10.0.0.1:40001"]}

    s.reg("C1", M, "broker-a", 0, dv1, [A], filter=None, request_version=36, t=31000, c="c1")
    _registered(s.events, "heartbeat", M, filter_servers=None, request_version=36)
    s.expect(FS='M["10.0.0.1:40001"]')
    assert s.route("TopicA").filter_server_table == {"10.0.0.1:10911": ["10.0.0.1:40001"]}

    s.reg("C1", M, "broker-a", 0, dv1, [A], filter=[], t=61000, c="c1")
    s.expect(FS="")
    assert s.route("TopicA").filter_server_table == {}


def test_w26_registration_without_a_body(new):
    s = new()
    s.reg("C1", M, "broker-a", 0, dv0, [], t=1000, c="c1")  # no body: dv0, no topics, filter []
    _registered(s.events, "register", M, data_version=dv0, topics=())
    s.expect(CA="C1{broker-a}", BA="broker-a(C1){0:M}", LT="M(1000,dv0,c1)", QT="", FS="")

    s.reg("C1", M, "broker-a", 0, dv0, [A], t=2000, c="c1")
    s.expect(QT="")

    s.reg("C1", M, "broker-a", 0, dv1, [A], t=3000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/6/0}")


# ---------------------------------------------------------------------------- beyond §8.2


def test_scan_after_the_clock_stepped_back_expires_by_last_update(new):
    # D7: a scan removes every entry with last_update + expiry < now, whatever the order the entries
    # were refreshed in; a wall clock may step back (docs/event-log.md: ts should not decrease)
    s = new()
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=10000, c="c1")
    s.reg("C1", N, "broker-b", 0, dv1, [B], t=9000, c="c3")  # clock stepped back 1000 ms
    s.reg("C1", S, "broker-a", 1, dv1, [A], t=9500, c="c2")
    s.scan(129501)
    assert_events(
        s.events,
        [
            ("expire", {"broker_addr": S, "last_update_ts": 9500}),
            ("expire", {"broker_addr": N, "last_update_ts": 9000}),
            ("channel_close", {"broker_addr": None, "channel": "c2"}),
            ("channel_close", {"broker_addr": None, "channel": "c3"}),
        ],
    )
    s.expect(LT="M(10000,dv1,c1)", BA="broker-a(C1){0:M}", QT="TopicA{broker-a 8/8/6/0}")
