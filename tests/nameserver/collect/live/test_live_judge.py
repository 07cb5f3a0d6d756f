"""The live judge (``nameserver.collect.live``) on hand-made rounds of three observed servers: what
opens and closes, when, with which root cause and subject, as the nightly audit would name them.

That the live findings equal the nightly audit's on the same streams is checked on real RocketMQ
name servers (``tests/interop/test_collect_faults.py``); that the parameters both use are the
same, in ``test_live_rules.py``.
"""

from __future__ import annotations

from nameserver.collect.live.judge import DAY_MS, LiveJudge
from nameserver.collect.live.rules import ROUND_SLACK_MS
from nameserver.collect.view import ServerView

T0 = 1_795_219_200_000 + 3_600_000  # 01:00 UTC
GRACE = 5_000
POLL = 1_000
# a perm change is known to be an admin's or the broker's once every server had a round to show it
HELD = 2 * POLL + ROUND_SLACK_MS
A, B = "10.0.0.1:10911", "10.0.0.2:10911"


def broker(name: str, *addrs: tuple[int, str]) -> dict:
    return {
        "cluster": "C",
        "broker_name": name,
        "broker_addrs": [{"broker_id": i, "broker_addr": a} for i, a in sorted(addrs)],
    }


def route(*cells: tuple[str, int]) -> dict:
    return {
        "queue_datas": [
            {"broker_name": n, "read_queue_nums": 4, "write_queue_nums": 4, "perm": p, "topic_sys_flag": 0}
            for n, p in cells
        ],
        "broker_datas": [],
        "filter_server_table": [],
    }


def view(brokers: list[dict], routes: dict) -> ServerView:
    return ServerView({b["broker_name"]: b for b in brokers}, routes)


HEALTHY = view(
    [broker("broker-a", (0, A)), broker("broker-b", (0, B))],
    {"T1": route(("broker-a", 6), ("broker-b", 6)), "T2": route(("broker-a", 6))},
)
WIPED = view(
    [broker("broker-a", (0, A)), broker("broker-b", (0, B))],
    {"T1": route(("broker-a", 4), ("broker-b", 6)), "T2": route(("broker-a", 4))},
)


def rounds(judge: LiveJudge, at: int, views: dict[str, ServerView | None]) -> list[dict]:
    """One round of each server at ``at`` (+1 ms per server); None: a failed round."""
    out = []
    for i, (ns, seen) in enumerate(sorted(views.items())):
        now = at + i
        out += [e for _, e in (judge.failed(ns, now) if seen is None else judge.observed(ns, now, seen))]
    return out


def summary(events: list[dict]) -> list[tuple]:
    return [
        (e["incident_state"], e["root_cause"], e["subject"], e["servers"], e["ts"] - e["incident_ms"] - T0)
        for e in events
    ]


def test_a_wipe_on_one_server_opens_from_its_start_once_no_other_followed_and_closes_when_restored():
    judge = LiveJudge(GRACE, poll_ms=POLL)
    assert rounds(judge, T0, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": HEALTHY}) == []
    # held: the broker may have registered it, and the others show it within a round
    assert rounds(judge, T0 + 1000, {"ns-a": WIPED, "ns-b": HEALTHY, "ns-c": HEALTHY}) == []
    assert judge.book.open == {}
    opened = rounds(judge, T0 + 1000 + HELD + 1, {"ns-a": WIPED, "ns-b": HEALTHY, "ns-c": HEALTHY})
    # write_perm_wiped (and T2's no_writable_queue, whose only group lost its write perm): one incident
    assert summary(opened) == [("open", "write_perm_wiped", "broker-a", ["ns-a"], 1000)]
    assert {k[0] for k in judge.book.open} == {"write_perm_wiped", "no_writable_queue"}
    assert rounds(judge, T0 + 1000 + GRACE, {"ns-a": WIPED, "ns-b": HEALTHY, "ns-c": HEALTHY}) == []
    assert sorted(k[1][0] for k in judge.book.open if k[0] == "ns_divergence") == ["queue_data_mismatch"] * 2
    incident = judge.incidents.open_incidents()[0]
    assert (incident.severity, incident.kinds) == (
        "critical",
        ["no_writable_queue", "ns_divergence", "write_perm_wiped"],
    )
    closed = rounds(judge, T0 + 20_000, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": HEALTHY})
    assert summary(closed) == [("close", "write_perm_wiped", "broker-a", ["ns-a"], 1000)]
    assert closed[0]["incident_id"] == opened[0]["incident_id"] and judge.book.open == {}


def test_a_disagreement_no_longer_than_the_grace_is_nothing_and_one_longer_counts_from_its_start():
    judge = LiveJudge(GRACE)
    missing = view(HEALTHY.broker_addr_table.values(), {"T1": HEALTHY.routes["T1"]})  # T2 gone on one server
    rounds(judge, T0, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": HEALTHY})
    assert rounds(judge, T0 + 1000, {"ns-a": missing, "ns-b": HEALTHY, "ns-c": HEALTHY}) == []
    # back after exactly the grace: no episode (the nightly audit needs longer than the grace)
    assert rounds(judge, T0 + 1000 + GRACE, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": HEALTHY}) == []
    rounds(judge, T0 + 10_000, {"ns-a": missing, "ns-b": HEALTHY, "ns-c": HEALTHY})
    # it ends one millisecond past the grace, between two looks: opened and closed at once, from its start
    events = rounds(judge, T0 + 10_000 + GRACE + 1, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": HEALTHY})
    assert summary(events) == [
        ("open", "topic_divergence", "T2", ["ns-a"], 10_000),
        ("close", "topic_divergence", "T2", ["ns-a"], 10_000),
    ]


def test_a_broker_gone_from_every_server_is_a_master_lost_and_from_one_a_broker_cut_off():
    judge = LiveJudge(GRACE)
    without_b = view([broker("broker-a", (0, A))], {"T1": route(("broker-a", 6)), "T2": route(("broker-a", 6))})
    rounds(judge, T0, {"ns-a": HEALTHY, "ns-b": HEALTHY})
    cut = rounds(judge, T0 + 1000, {"ns-a": without_b, "ns-b": HEALTHY})
    # a master no longer listed: from outside, a kill, a crash and a shutdown look the same
    assert summary(cut) == [("open", "master_lost", "broker-b", ["ns-a"], 1000)]
    rounds(judge, T0 + 1000 + GRACE + 1, {"ns-a": without_b, "ns-b": HEALTHY})
    # the other server still lists it past the grace: cut off from one server, not dead
    assert judge.incidents.open_incidents()[0].root_cause == "broker_cut_off"


def test_a_server_that_stops_answering_is_unreachable_and_a_restart_when_it_comes_back_emptied():
    judge = LiveJudge(GRACE)
    empty = view([], {})
    rounds(judge, T0, {"ns-a": HEALTHY, "ns-b": HEALTHY})
    down = rounds(judge, T0 + 1000, {"ns-a": None, "ns-b": HEALTHY})
    assert summary(down) == [("open", "server_unreachable", "ns-a", ["ns-a"], 1000)]
    # a second failed round logs nothing more
    assert rounds(judge, T0 + 2000, {"ns-a": None}) == []
    back = rounds(judge, T0 + 3000, {"ns-a": empty, "ns-b": HEALTHY})
    assert back == []  # its emptied tables disagree, not yet past the grace: the incident stays open
    assert judge.incidents.open_incidents()[0].root_cause == "server_restart"
    closed = rounds(judge, T0 + 4000, {"ns-a": HEALTHY, "ns-b": HEALTHY})
    assert summary(closed) == [("close", "server_restart", "ns-a", ["ns-a"], 1000)]


def test_what_a_server_lacks_after_it_came_back_is_its_restarts_unless_it_lacked_it_when_it_went():
    judge = LiveJudge(GRACE)
    # ns-c is cut off from broker-b (and T2 is gone there): both past the grace before it goes down
    cut = view([broker("broker-a", (0, A))], {"T1": route(("broker-a", 6))})
    rounds(judge, T0, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": cut})
    rounds(judge, T0 + GRACE + 1000, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": cut})
    causes = lambda: sorted((i.family, i.cause_key) for i in judge.incidents.open_incidents())  # noqa: E731
    assert causes() == [("broker", "broker-b"), ("topic", "T2")]
    rounds(judge, T0 + 10_000, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": None})
    # back emptied, and nothing registers with it again past the grace
    empty = view([], {})
    for at in (T0 + 12_000, T0 + 12_000 + GRACE + 1):
        rounds(judge, at, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": empty})
    # broker-a and T1, there when it went: the restart's; broker-b and T2 are still their own
    assert causes() == [("broker", "broker-b"), ("server", "ns-c"), ("topic", "T2")]
    server = next(i for i in judge.incidents.open_incidents() if i.family == "server")
    assert sorted(f.subject for f in server.findings.values() if f.kind == "ns_divergence") == [A, "T1"]
    # down and back again, still lacking them: what the first restart left is still the restarts'
    rounds(judge, T0 + 30_000, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": None})
    for at in (T0 + 32_000, T0 + 32_000 + GRACE + 1):
        rounds(judge, at, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": empty})
    assert causes() == [("broker", "broker-b"), ("server", "ns-c"), ("topic", "T2")]
    server = next(i for i in judge.incidents.open_incidents() if i.family == "server")
    assert sorted(f.subject for f in server.findings.values() if f.kind == "ns_divergence") == [A, "T1"]


def test_a_group_shown_without_its_master_just_after_a_return_is_the_returns():
    judge = LiveJudge(GRACE)
    rounds(judge, T0, {"ns-a": HEALTHY, "ns-b": HEALTHY})
    rounds(judge, T0 + 1000, {"ns-a": None, "ns-b": HEALTHY})
    # back with broker-a's QueueData but not yet its BrokerData: T2 has no writable queue there
    half = view([broker("broker-b", (0, B))], HEALTHY.routes)
    rounds(judge, T0 + 3000, {"ns-a": half, "ns-b": HEALTHY})
    assert judge.book.open[("no_writable_queue", "ns-a", "T2")].family == "server"
    assert [(i.family, i.cause_key) for i in judge.incidents.open_incidents()] == [("server", "ns-a")]


def test_a_group_without_master_counts_after_a_registration_period_unless_it_lost_its_master():
    judge = LiveJudge(GRACE)
    slave_first = view(
        [broker("broker-a", (0, A)), broker("broker-b", (0, B)), broker("broker-s", (1, "10.0.0.9:10921"))],
        HEALTHY.routes,
    )
    rounds(judge, T0, {"ns-a": HEALTHY})
    assert rounds(judge, T0 + 1000, {"ns-a": slave_first}) == []
    assert rounds(judge, T0 + 25_000, {"ns-a": slave_first}) == []  # a group starting: its master may follow
    events = rounds(judge, T0 + 31_000, {"ns-a": slave_first})
    assert summary(events) == [("open", "master_lost", "broker-s", ["ns-a"], 1000)]
    # a group that had its master and lost it counts at once
    judge = LiveJudge(GRACE)
    lost = view([broker("broker-a", (1, "10.0.0.1:10921")), broker("broker-b", (0, B))], HEALTHY.routes)
    rounds(judge, T0, {"ns-a": HEALTHY})
    events = rounds(judge, T0 + 1000, {"ns-a": lost})
    assert ("open", "master_lost", "broker-a", ["ns-a"], 1000) in summary(events)


def test_midnight_ends_every_finding_as_the_nightly_days_do_but_an_incident_stays_open_across_it():
    judge = LiveJudge(GRACE, poll_ms=POLL)
    day_end = (T0 // DAY_MS + 1) * DAY_MS
    rounds(judge, day_end - 10_000, {"ns-a": HEALTHY, "ns-b": HEALTHY})
    rounds(judge, day_end - 6_000, {"ns-a": WIPED, "ns-b": HEALTHY})
    opened = rounds(judge, day_end - 1_000, {"ns-a": WIPED, "ns-b": HEALTHY})
    wiped = judge.book.open[("write_perm_wiped", "ns-a", "broker-a")]
    assert wiped.start_ms == day_end - 6_000
    assert rounds(judge, day_end + 1000, {"ns-b": HEALTHY}) == []
    assert wiped.end_ms == day_end  # cut at midnight, as the day's audit cuts it
    # the first round of the new day sees the wipe again (ns-b disagrees: no registration): a new
    # finding from that round, once a poll interval showed it, the same incident
    assert rounds(judge, day_end + 2000, {"ns-a": WIPED}) == []
    assert rounds(judge, day_end + 2000 + POLL + 1, {"ns-a": WIPED}) == []
    assert judge.book.open[("write_perm_wiped", "ns-a", "broker-a")].start_ms == day_end + 2000
    closed = rounds(judge, day_end + 3000 + GRACE, {"ns-a": HEALTHY, "ns-b": HEALTHY})
    assert [e["incident_id"] for e in closed] == [opened[0]["incident_id"]]


# ---------------------------------------------------------------------------- who set the perm

# mqadmin updateTopic -p 4 of T2 (broker-a alone) and of broker-a's T1 (broker-b keeps it writable)
READ_ONLY = view(
    [broker("broker-a", (0, A)), broker("broker-b", (0, B))],
    {"T1": route(("broker-a", 4), ("broker-b", 6)), "T2": route(("broker-a", 4))},
)
WIPE_KINDS = {"write_perm_wiped", "no_writable_queue"}


def logged(judge: LiveJudge) -> list[tuple]:
    """Every finding the judge opened: kind, server, subject, start (from T0), end, severity."""
    return sorted(
        (f.kind, f.ns, f.subject, f.start_ms - T0, None if f.end_ms is None else f.end_ms - T0, f.severity)
        for f in judge.book.log
    )


def test_a_read_only_perm_every_server_shows_within_a_round_is_the_brokers_no_wipe_and_no_unwritable_topic():
    judge = LiveJudge(GRACE, poll_ms=POLL)
    judge.book.log = []
    rounds(judge, T0, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": HEALTHY})
    # the broker registered it with a new data version: each server shows it at its next round
    events = rounds(judge, T0 + 10_000, {"ns-a": READ_ONLY, "ns-b": HEALTHY, "ns-c": HEALTHY})
    events += rounds(judge, T0 + 10_000 + 2 * POLL, {"ns-b": READ_ONLY, "ns-c": READ_ONLY})
    events += rounds(judge, T0 + 20_000, {"ns-a": READ_ONLY, "ns-b": READ_ONLY, "ns-c": READ_ONLY})
    # a topic_perm_changed per server and topic, at the round that showed it: T2 is left with no
    # writable queue (a warning, its incident), T1 keeps broker-b's (info, no alert)
    shown = (("ns-a", 10_000), ("ns-b", 12_000), ("ns-c", 12_001))
    assert logged(judge) == sorted(
        [("topic_perm_changed", ns, "T1", at, at, "info") for ns, at in shown]
        + [("topic_perm_changed", ns, "T2", at, at, "warning") for ns, at in shown]
    )
    assert summary(events) == [
        ("open", "topic_perm_changed", "T2", ["ns-a", "ns-b", "ns-c"], 10_000),
        ("close", "topic_perm_changed", "T2", ["ns-a", "ns-b", "ns-c"], 10_000),
    ]
    assert judge.book.open == {}
    # read-only everywhere from the first round on: the broker's too
    judge = LiveJudge(GRACE, poll_ms=POLL)
    judge.book.log = []
    rounds(judge, T0, {"ns-a": READ_ONLY, "ns-b": READ_ONLY, "ns-c": READ_ONLY})
    assert rounds(judge, T0 + 10_000, {"ns-a": READ_ONLY, "ns-b": READ_ONLY, "ns-c": READ_ONLY}) == []
    assert judge.book.log == []


def test_a_read_only_perm_on_one_server_only_is_a_wipe_from_its_start_even_when_it_ended_before_it_was_known():
    judge = LiveJudge(GRACE, poll_ms=POLL)
    judge.book.log = []
    rounds(judge, T0, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": HEALTHY})
    assert rounds(judge, T0 + 1000, {"ns-a": READ_ONLY, "ns-b": HEALTHY, "ns-c": HEALTHY}) == []
    # the others showed no such change within the round: an admin's, as before the rule
    rounds(judge, T0 + 1000 + HELD + 1, {"ns-a": READ_ONLY, "ns-b": HEALTHY, "ns-c": HEALTHY})
    assert logged(judge) == [
        ("no_writable_queue", "ns-a", "T2", 1000, None, "critical"),
        ("write_perm_wiped", "ns-a", "broker-a", 1000, None, "warning"),
    ]
    assert judge.book.open[("write_perm_wiped", "ns-a", "broker-a")].detail == {
        "topics": 2,
        "topics_listed": ["T1", "T2"],
    }
    # one that was back before the round was over: opened and closed at once, from its start
    judge = LiveJudge(GRACE, poll_ms=POLL)
    judge.book.log = []
    rounds(judge, T0, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": HEALTHY})
    rounds(judge, T0 + 1000, {"ns-a": WIPED, "ns-b": HEALTHY, "ns-c": HEALTHY})
    assert rounds(judge, T0 + 2000, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": HEALTHY}) == []
    events = rounds(judge, T0 + 1000 + HELD + 1, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": HEALTHY})
    assert logged(judge) == [
        ("no_writable_queue", "ns-a", "T2", 1000, 2000, "critical"),
        ("write_perm_wiped", "ns-a", "broker-a", 1000, 2000, "warning"),
    ]
    assert summary(events) == [
        ("open", "write_perm_wiped", "broker-a", ["ns-a"], 1000),
        ("close", "write_perm_wiped", "broker-a", ["ns-a"], 1000),
    ]


def test_a_first_round_read_only_where_another_server_is_writable_is_no_registration():
    judge = LiveJudge(GRACE, poll_ms=POLL)
    judge.book.log = []
    rounds(judge, T0, {"ns-a": HEALTHY, "ns-b": HEALTHY})
    rounds(judge, T0 + 500, {"ns-c": READ_ONLY})  # ns-c joins, broker-a's topics read-only there only
    assert judge.book.log == []
    rounds(judge, T0 + 500 + POLL + 1, {"ns-a": HEALTHY, "ns-b": HEALTHY, "ns-c": READ_ONLY})
    assert [k[:3] for k in logged(judge)] == [
        ("no_writable_queue", "ns-c", "T2"),
        ("write_perm_wiped", "ns-c", "broker-a"),
    ]
    assert {f.start_ms - T0 for f in judge.book.log} == {500}


def test_a_change_on_the_only_server_observed_is_judged_as_a_wipe():
    """No other server holds the group: nothing confirms a registration, so a change to read-only
    is judged as a wipe would be (one observed server cannot tell ``updateTopic -p 4`` from 205)."""
    judge = LiveJudge(GRACE, poll_ms=POLL)
    judge.book.log = []
    rounds(judge, T0, {"ns-a": HEALTHY})
    assert rounds(judge, T0 + 1000, {"ns-a": READ_ONLY}) == []
    rounds(judge, T0 + 1000 + HELD + 1, {"ns-a": READ_ONLY})
    assert logged(judge) == [
        ("no_writable_queue", "ns-a", "T2", 1000, None, "critical"),
        ("write_perm_wiped", "ns-a", "broker-a", 1000, None, "warning"),
    ]
    # the collector observes only that server: nothing to wait for, the round that saw it opens it
    judge = LiveJudge(GRACE, poll_ms=POLL, alone=True)
    judge.book.log = []
    rounds(judge, T0, {"ns-a": HEALTHY})
    events = rounds(judge, T0 + 1000, {"ns-a": READ_ONLY})
    assert logged(judge) == [
        ("no_writable_queue", "ns-a", "T2", 1000, None, "critical"),
        ("write_perm_wiped", "ns-a", "broker-a", 1000, None, "warning"),
    ]
    assert [e[:3] for e in summary(events)] == [("open", "write_perm_wiped", "broker-a")]


def test_a_group_writable_many_changes_ago_is_still_writable_earlier_today():
    """A QueueData that lost its write perm on the only server observed and then changed its queue
    counts in many rounds stays a wipe: it was writable earlier today, however many rounds ago."""
    judge = LiveJudge(GRACE, poll_ms=POLL, alone=True)
    judge.book.log = []

    def counts(queues: int, perm: int) -> ServerView:
        cell = {"broker_name": "broker-a", "read_queue_nums": queues, "write_queue_nums": queues, "perm": perm}
        return view([broker("broker-a", (0, A))], {"T2": {"queue_datas": [{**cell, "topic_sys_flag": 0}]}})

    rounds(judge, T0, {"ns-a": counts(4, 6)})
    for n in range(1, 21):  # twenty versions of the read-only QueueData
        rounds(judge, T0 + 1000 * n, {"ns-a": counts(4 + n, 4)})
    assert [f[:5] for f in logged(judge)] == [
        ("no_writable_queue", "ns-a", "T2", 1000, None),
        ("write_perm_wiped", "ns-a", "broker-a", 1000, None),
    ]
    # a group first seen read-only never was writable: no wipe
    judge = LiveJudge(GRACE, poll_ms=POLL, alone=True)
    judge.book.log = []
    for n in range(20):
        rounds(judge, T0 + 1000 * n, {"ns-a": counts(4 + n, 4)})
    assert "write_perm_wiped" not in {f[0] for f in logged(judge)}
