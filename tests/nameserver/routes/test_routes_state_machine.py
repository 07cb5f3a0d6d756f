"""Random operation sequences against the route tables (docs/nameserver-semantics.md §1-§2, §6).

A hypothesis state machine drives ``RouteInfoManager`` over a small universe (2 clusters, 4
addresses, 3 broker names, ids 0-2, 4 data versions, 3 topics, 4 connections) so names, ids and
addresses collide. After every step it checks the invariants I1-I4 (§1.2), that a route is null
exactly when the topic has no QueueData (§2.10), that an independent model written from §2 has
the same tables, that replaying the emitted events (JSON round-tripped, ``topics`` dropped as
the log writer does) gives the same tables again, and that no answer changes while the tables'
``revision`` stays (the processor's caches rely on it). The NOT-invariants of §1.2 are never
asserted against; ``hypothesis.event`` counts how often they occur
(``pytest --hypothesis-show-statistics``).
"""

from __future__ import annotations

from dataclasses import dataclass

from hypothesis import event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from nameserver.model import DataVersion, QueueData, TopicConfig, topics_digest
from nameserver.routes.manager import UNIT_FLAGS, RequestContext, RouteInfoManager, ns_start_event, ns_stop_event
from nameserver.routes.replay import RouteReplayer
from tests.nameserver.scenario import dv0, dv1, dv2, dv3, table_state, to_log_lines

EXPIRY = 120_000
CLUSTERS = ["C1", "C2"]
ADDRS = ["10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911", "10.0.0.4:10911"]
NAMES = ["broker-a", "broker-b", "broker-c"]
TOPICS = ["TopicA", "TopicB", "TopicC"]
CHANNELS = ["c1", "c2", "c3", "c4"]

clusters = st.sampled_from(CLUSTERS)
addrs = st.sampled_from(ADDRS)
names = st.sampled_from(NAMES)
versions = st.sampled_from([dv0, dv1, dv2, dv3])
channels = st.sampled_from(CHANNELS)
steps = st.one_of(st.just(0), st.integers(1, 20_000))  # 0: several operations in one ms
topic_configs = st.builds(
    TopicConfig,
    st.sampled_from(TOPICS),
    st.sampled_from([0, 1, 4, 8]),
    st.sampled_from([0, 1, 4, 8]),
    st.integers(0, 7),
    st.integers(0, 3),
)
topic_sets = st.lists(topic_configs, max_size=3, unique_by=lambda t: t.topic)
filter_lists = st.sampled_from([None, [], ["10.0.9.1:40001"], ["10.0.9.1:40001", "10.0.9.2:40001"]])


# ---------------------------------------------------------------------------- the model


@dataclass
class Live:
    last_update: int
    data_version: DataVersion
    channel: str
    ha: str | None
    cluster: str
    name: str
    broker_id: int


class Model:
    """The five tables straight from §2, no indexes and no ordering tricks."""

    def __init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.qt: dict[str, dict[str, tuple]] = {}
        self.ba: dict[str, tuple[str, dict[int, str]]] = {}
        self.ca: dict[str, set[str]] = {}
        self.lt: dict[str, Live] = {}
        self.fs: dict[str, list[str]] = {}

    def state(self) -> dict:
        """Comparable with ``table_state(core)``."""
        return {
            "QT": {t: {n: QueueData(n, *v) for n, v in q.items()} for t, q in self.qt.items()},
            "BA": {n: (c, dict(a)) for n, (c, a) in self.ba.items()},
            "CA": {c: set(v) for c, v in self.ca.items()},
            "LT": {
                a: (live.last_update, live.data_version, live.channel, live.ha, live.cluster, live.name, live.broker_id)
                for a, live in self.lt.items()
            },
            "FS": {a: list(v) for a, v in self.fs.items()},
        }

    def reads(self) -> dict:
        """§2.11 listings from the model's tables."""
        first = self.ba[min(self.ba)][1] if self.ba else None
        return {
            "cluster_info": (
                {n: (c, dict(sorted(a.items()))) for n, (c, a) in sorted(self.ba.items())},
                {c: sorted(v) for c, v in sorted(self.ca.items())},
            ),
            "topics": sorted(self.qt),
            "by_cluster": {
                c: sorted(t for t, q in self.qt.items() if set(q) & self.ca.get(c, set())) for c in CLUSTERS + ["C9"]
            },
            "system": (
                sorted(set(self.ca) | {n for v in self.ca.values() for n in v}),
                first[min(first)] if first else None,
            ),
            "unit": {
                code: sorted(
                    t
                    for t, q in self.qt.items()
                    if q[min(q)][3] & with_ == with_ and not (without and q[min(q)][3] & without)
                )
                for code, (with_, without) in UNIT_FLAGS.items()
            },
        }

    def register(self, cluster, addr, name, broker_id, ha, dv, topics, filters, now, channel):
        """§2.1; returns (event type, masterAddr, haServerAddr)."""
        kind = "heartbeat" if addr in self.lt else "register"
        self.ca.setdefault(cluster, set()).add(name)
        first = name not in self.ba
        if first:
            self.ba[name] = (cluster, {})
        group = self.ba[name][1]
        for i in [i for i, a in group.items() if a == addr and i != broker_id]:
            del group[i]
        if broker_id not in group:
            first = True
        group[broker_id] = addr
        if broker_id == 0 and (addr not in self.lt or self.lt[addr].data_version != dv or first):
            for t in topics:
                self.qt.setdefault(t.topic, {})[name] = (
                    t.read_queue_nums,
                    t.write_queue_nums,
                    t.perm,
                    t.topic_sys_flag,
                )
        self.lt[addr] = Live(now, dv, channel, ha, cluster, name, broker_id)
        if filters is not None:
            if filters:
                self.fs[addr] = list(filters)
            else:
                self.fs.pop(addr, None)
        master = group.get(0)
        if broker_id != 0 and master is not None and master in self.lt:
            return kind, master, self.lt[master].ha
        return kind, None, None

    def _drop_names(self, dropped, clusters):
        for c in clusters:
            if c in self.ca:
                self.ca[c] -= set(dropped)
                if not self.ca[c]:
                    del self.ca[c]
        for t in list(self.qt):
            for n in dropped:
                self.qt[t].pop(n, None)
            if not self.qt[t]:
                del self.qt[t]

    def unregister(self, cluster, addr, name):
        """§2.2, by address."""
        self.lt.pop(addr, None)
        self.fs.pop(addr, None)
        if name in self.ba:
            group = self.ba[name][1]
            for i in [i for i, a in group.items() if a == addr]:
                del group[i]
            if not group:
                del self.ba[name]
                self._drop_names([name], [cluster])

    def remove_address(self, addr):
        """§2.3 with A1."""
        self.lt.pop(addr, None)
        self.fs.pop(addr, None)
        dropped = []
        for name, (_, group) in list(self.ba.items()):
            for i in [i for i, a in group.items() if a == addr]:
                del group[i]
            if not group:
                del self.ba[name]
                dropped.append(name)
        self._drop_names(dropped, list(self.ca))

    def close(self, channel):
        """§2.4: the addresses removed, ascending."""
        gone = sorted(a for a, live in self.lt.items() if live.channel == channel)
        for a in gone:
            self.remove_address(a)
        return gone

    def scan(self, now):
        """§2.5: [(addr, last_update)] ascending, and the connections to close."""
        expired = sorted(
            (a, live.last_update, live.channel) for a, live in self.lt.items() if live.last_update + EXPIRY < now
        )
        for a, _, _ in expired:
            self.remove_address(a)
        return [(a, u) for a, u, _ in expired], sorted({c for _, _, c in expired})

    def heartbeat(self, addr, now):
        if addr in self.lt:
            self.lt[addr].last_update = now

    def query_data_version(self, addr, dv, now):
        live = self.lt.get(addr)
        changed = live is None or live.data_version != dv
        if not changed:
            live.last_update = now
        return changed, (live.data_version if live else None)

    def change_perm(self, name, fn):
        count = 0
        for queues in self.qt.values():
            if name in queues:
                r, w, p, s = queues[name]
                queues[name] = (r, w, fn(p), s)
                count += 1
        return count

    def delete_topic(self, topic, cluster):
        if topic not in self.qt:
            return
        if not cluster:
            del self.qt[topic]
            return
        for n in self.ca.get(cluster, ()):
            self.qt[topic].pop(n, None)
        if not self.qt[topic]:
            del self.qt[topic]


# ---------------------------------------------------------------------------- the machine


class RouteTableMachine(RuleBasedStateMachine):
    """Drives the core, the model and a replayer with the same steps."""

    def __init__(self) -> None:
        super().__init__()
        self.journal: list = []
        self.core = RouteInfoManager(EXPIRY, journal=self.journal)
        self.journal_cells: dict = {}
        self.model = Model()
        self.replayer = RouteReplayer()
        self.now = 0
        self.last_scan = 0
        self.seq = 0
        self.digests: dict[str, str] = {}
        self.answers_at: tuple[int, str] | None = None  # (revision, the answers then)
        self._log([ns_start_event(0, EXPIRY, 10_000, "test")])

    def _ctx(self, channel: str, code: int) -> RequestContext:
        return RequestContext(channel, "10.9.0.1:50001", code)

    def _log(self, events):
        """Every event: ts is the step's clock (A7); into the replay as a stripped JSON log line."""
        for line in to_log_lines(events, self.seq + 1):
            assert line["ts"] == self.now
            self.seq += 1
            if line["type"] == "ns_start":
                self.digests.clear()
            digest = line.get("topics_digest")
            if digest is not None:
                if self.digests.get(line["broker_addr"]) == digest:
                    del line["topics"]
                self.digests[line["broker_addr"]] = digest
            self.replayer.apply(line)

    def _tick(self, dt: int) -> None:
        self.now += dt

    # ------------------------------------------------------------------ rules

    @rule(
        cluster=clusters,
        addr=addrs,
        name=names,
        broker_id=st.integers(0, 2),
        dv=versions,
        topics=topic_sets,
        filters=filter_lists,
        channel=channels,
        no_ha=st.booleans(),
        presorted=st.booleans(),
        dt=steps,
    )
    def register(self, cluster, addr, name, broker_id, dv, topics, filters, channel, no_ha, presorted, dt):
        self._tick(dt)
        ha = None if no_ha else addr.replace(":10911", ":10912")
        kind, master, master_ha = self.model.register(
            cluster, addr, name, broker_id, ha, dv, topics, filters, self.now, channel
        )
        # presorted: the simulator's path, topics sorted by the caller together with their digest
        sent = sorted(topics, key=lambda t: t.topic) if presorted else topics
        result = self.core.register_broker(
            cluster,
            addr,
            name,
            broker_id,
            ha,
            dv,
            sent,
            filters,
            self.now,
            self._ctx(channel, 103),
            digest=topics_digest(sent) if presorted else None,
        )
        assert (result.master_addr, result.ha_server_addr) == (master, master_ha)
        assert [(e["type"], e["broker_addr"], e["broker_id"]) for e in result.events] == [(kind, addr, broker_id)]
        self._log(result.events)

    @rule(cluster=clusters, addr=addrs, name=names, broker_id=st.integers(0, 2), dt=steps)
    def unregister(self, cluster, addr, name, broker_id, dt):
        self._tick(dt)
        self.model.unregister(cluster, addr, name)
        events = self.core.unregister_broker(cluster, addr, name, broker_id, self.now, self._ctx("c9", 104))
        assert [(e["type"], e["broker_addr"]) for e in events] == [("unregister", addr)]
        self._log(events)

    @rule(channel=channels, dt=steps)
    def close(self, channel, dt):
        self._tick(dt)
        gone = self.model.close(channel)
        events = self.core.on_channel_close(channel, self.now)
        assert [e["broker_addr"] for e in events] == (gone or [None])
        assert all(e["type"] == "channel_close" and e["channel"] == channel for e in events)
        self._log(events)

    @rule(dt=st.integers(1, 130_000))
    def scan(self, dt):
        # scans run at increasing instants even when the clock stepped back in between
        self.now = max(self.now + dt, self.last_scan + 1)
        self.last_scan = self.now
        self._scan_now()

    def _scan_now(self):
        expired, to_close = self.model.scan(self.now)
        events, channels_ = self.core.scan_not_active_broker(self.now)
        assert [(e["type"], e["broker_addr"], e["last_update_ts"]) for e in events] == [
            ("expire", a, u) for a, u in expired
        ]
        assert channels_ == to_close
        if expired:
            event("scan expired something")
        self._log(events)
        for channel in channels_:  # the server closes each expired broker's connection (§2.5 step 3)
            gone = self.model.close(channel)
            closed = self.core.on_channel_close(channel, self.now)
            assert [e["broker_addr"] for e in closed] == (gone or [None])
            self._log(closed)

    @rule(addr=addrs, offset=st.sampled_from([0, 1]))
    def scan_at_expiry_boundary(self, addr, offset):
        # a scan at last_update + expiry keeps the entry (strict <, W17); one ms later removes it
        live = self.core.broker_live_table.get(addr)
        target = live.last_update + EXPIRY + offset if live is not None else self.now
        self.now = max(self.now, target, self.last_scan + 1)
        self.last_scan = self.now
        self._scan_now()

    @rule(addr=addrs, dt=steps)
    def broker_heartbeat(self, addr, dt):
        self._tick(dt)
        self.model.heartbeat(addr, self.now)
        self._log(self.core.broker_heartbeat("C1", addr, "broker-a", self.now, self._ctx("c8", 904)))

    @rule(addr=addrs, dv=versions, dt=steps)
    def query_data_version(self, addr, dv, dt):
        self._tick(dt)
        expected = self.model.query_data_version(addr, dv, self.now)
        changed, stored, events = self.core.query_data_version(
            "C1", addr, "broker-a", 0, dv, self.now, self._ctx("c8", 322)
        )
        assert (changed, stored) == expected
        self._log(events)

    @rule(name=st.sampled_from(NAMES + ["broker-zz"]), add=st.booleans(), dt=steps)
    def change_perm(self, name, add, dt):
        self._tick(dt)
        if add:
            expected = self.model.change_perm(name, lambda p: 6)
            count, events = self.core.add_write_perm_of_broker(name, self.now, self._ctx("c7", 327))
        else:
            expected = self.model.change_perm(name, lambda p: p & ~2)
            count, events = self.core.wipe_write_perm_of_broker(name, self.now, self._ctx("c7", 205))
        assert count == expected == events[0]["topic_count"]
        self._log(events)

    @rule(topic=st.sampled_from(TOPICS + ["TopicZ"]), cluster=st.sampled_from([None, "", "C1", "C2", "C9"]), dt=steps)
    def delete_topic(self, topic, cluster, dt):
        self._tick(dt)
        self.model.delete_topic(topic, cluster)
        self._log(self.core.delete_topic(topic, cluster, self.now, self._ctx("c7", 216)))

    @rule(data=st.data(), dt=steps)
    def undone_change(self, data, dt):
        # a request whose event cannot be logged is undone whole, indexes included (§2.13)
        self._tick(dt)
        core, now = self.core, self.now
        before = (table_state(core), _indexes(core), list(core.broker_live_table))
        core.begin_change()
        kind = data.draw(st.sampled_from(["register", "unregister", "heartbeat", "qdv", "wipe", "add", "delete"]))
        addr, name, cluster = data.draw(addrs), data.draw(names), data.draw(clusters)
        if kind == "register":
            core.register_broker(
                cluster,
                addr,
                name,
                data.draw(st.integers(0, 2)),
                None,
                data.draw(versions),
                data.draw(topic_sets),
                data.draw(filter_lists),
                now,
                self._ctx(data.draw(channels), 103),
            )
        elif kind == "unregister":
            core.unregister_broker(cluster, addr, name, 0, now, self._ctx("c9", 104))
        elif kind == "heartbeat":
            core.broker_heartbeat(cluster, addr, name, now, self._ctx("c8", 904))
        elif kind == "qdv":
            core.query_data_version(cluster, addr, name, 0, data.draw(versions), now, self._ctx("c8", 322))
        elif kind in ("wipe", "add"):
            (core.wipe_write_perm_of_broker if kind == "wipe" else core.add_write_perm_of_broker)(
                name, now, self._ctx("c7", 205)
            )
        else:
            core.delete_topic(
                data.draw(st.sampled_from(TOPICS)), data.draw(st.sampled_from([None, "C1"])), now, self._ctx("c7", 216)
            )
        changed = table_state(core) != before[0]
        core.undo_change()
        assert (table_state(core), _indexes(core)) == before[:2]
        assert set(core.broker_live_table) == set(before[2])
        if changed:
            event("a change was undone")

    @rule(back=st.integers(1, 30_000))
    def clock_steps_back(self, back):
        # the log's ts should not decrease, but a server's wall clock can (docs/event-log.md)
        self.now = max(0, self.now - back)

    @rule(crash=st.booleans(), dt=steps)
    def restart(self, crash, dt):
        self._tick(dt)
        if not crash:
            self._log([ns_stop_event(self.now, "test")])
            assert self.replayer.up is False
            assert table_state(self.replayer.routes) == table_state(RouteInfoManager())
        self.core.clear()
        self.model.clear()
        self._log([ns_start_event(self.now, EXPIRY, 10_000, "test")])

    # ------------------------------------------------------------------ checks after every step

    @invariant()
    def invariants_i1_to_i4(self):
        core = self.core
        assert all(core.topic_queue_table.values()), "I1"
        assert all(b.broker_addrs for b in core.broker_addr_table.values()), "I2"
        assert all(core.cluster_addr_table.values()), "I3"
        for queues in core.topic_queue_table.values():
            for name, queue_data in queues.items():
                assert name in core.broker_addr_table, "I4"
                assert queue_data.broker_name == name

    @invariant()
    def not_invariants_are_allowed(self):
        core = self.core
        in_groups = {a for b in core.broker_addr_table.values() for a in b.broker_addrs.values()}
        if in_groups - core.broker_live_table.keys():
            event("address in brokerAddrs without a live entry")
        if core.broker_live_table.keys() - in_groups:
            event("live address in no BrokerData")
        listed = [n for names_ in core.cluster_addr_table.values() for n in names_]
        if set(listed) - core.broker_addr_table.keys():
            event("dangling name in a cluster set")
        if len(listed) != len(set(listed)):
            event("name in two cluster sets")
        all_addrs = [a for b in core.broker_addr_table.values() for a in set(b.broker_addrs.values())]
        if len(all_addrs) != len(set(all_addrs)):
            event("address in two BrokerData")
        for queues in core.topic_queue_table.values():
            for name, queue_data in queues.items():
                if 0 not in core.broker_addr_table[name].broker_addrs and queue_data.perm & 2:
                    event("writable QueueData of a group without master")

    @invariant()
    def route_is_null_exactly_without_queue_data(self):
        for topic in TOPICS + ["TopicZ"]:
            route = self.core.pickup_topic_route_data(topic)
            queues = self.core.topic_queue_table.get(topic)
            assert (route is None) == (not queues)
            if route is not None:
                assert [q.broker_name for q in route.queue_datas] == sorted(queues)
                assert [b.broker_name for b in route.broker_datas] == sorted(
                    n for n in queues if n in self.core.broker_addr_table
                )
                served = {a for b in route.broker_datas for a in b.broker_addrs.values()}
                assert route.filter_server_table == {
                    a: v for a, v in sorted(self.core.filter_server_table.items()) if a in served
                }
                # A3: ids numerically, addresses lexicographically
                assert all(list(b.broker_addrs) == sorted(b.broker_addrs) for b in route.broker_datas)
                assert list(route.filter_server_table) == sorted(route.filter_server_table)

    @invariant()
    def revision_moves_whenever_an_answer_changes(self):
        # the processor serves encoded answers while the revision stays: a changed answer under
        # the same revision would be served stale
        core = self.core
        answers = repr(([core.pickup_topic_route_data(t) for t in TOPICS + ["TopicZ"]], core.get_all_cluster_info()))
        if self.answers_at is not None and self.answers_at[0] == core.revision:
            assert answers == self.answers_at[1]
        elif self.answers_at is not None and answers == self.answers_at[1]:
            event("revision moved, answers the same")
        self.answers_at = (core.revision, answers)

    @invariant()
    def model_agrees(self):
        assert table_state(self.core) == self.model.state()

    @invariant()
    def listings_agree_with_model(self):
        core = self.core
        info = core.get_all_cluster_info()
        assert list(info.broker_addr_table) == sorted(info.broker_addr_table)  # A3
        assert all(list(b.broker_addrs) == sorted(b.broker_addrs) for b in info.broker_addr_table.values())
        assert (
            {n: (b.cluster, b.broker_addrs) for n, b in info.broker_addr_table.items()},
            info.cluster_addr_table,
        ) == self.model.reads()["cluster_info"]
        expected = self.model.reads()
        assert core.get_all_topic_list() == expected["topics"]
        assert {c: core.get_topics_by_cluster(c) for c in CLUSTERS + ["C9"]} == expected["by_cluster"]
        assert core.get_system_topic_list() == expected["system"]
        assert {code: core.get_unit_topics(*flags) for code, flags in UNIT_FLAGS.items()} == expected["unit"]

    @invariant()
    def journal_rebuilds_the_tables(self):
        # the Spark rebuild folds these cell changes into validity intervals
        cells = self.journal_cells
        for entry in self.journal:  # each entry is a real change of one cell
            if entry[0] == "addr":
                _, name, broker_id, addr, cluster = entry
                key, value = ("addr", name, broker_id), None if addr is None else (addr, cluster)
            elif entry[0] == "cluster":
                _, cluster, name, present = entry
                key, value = ("cluster", cluster, name), True if present else None
            else:  # ("queue", topic, name, QueueData | None), ("filter", addr, tuple | None)
                key, value = entry[:-1], entry[-1]
            assert cells.get(key) != value, f"journal entry changes nothing: {entry}"
            if value is None:
                del cells[key]
            else:
                cells[key] = value
        self.journal.clear()
        core = self.core
        assert cells == {
            **{("queue", t, n): q for t, qs in core.topic_queue_table.items() for n, q in qs.items()},
            **{
                ("addr", n, i): (a, b.cluster)
                for n, b in core.broker_addr_table.items()
                for i, a in b.broker_addrs.items()
            },
            **{("cluster", c, n): True for c, ns in core.cluster_addr_table.items() for n in ns},
            **{("filter", a): tuple(v) for a, v in core.filter_server_table.items()},
        }

    @invariant()
    def replay_agrees(self):
        assert table_state(self.replayer.routes) == table_state(self.core)
        assert self.replayer.up is True


def _indexes(core: RouteInfoManager) -> tuple:
    """The tables' indexes as plain values: what an undo must restore besides the tables."""
    return ({c: set(a) for c, a in core._channel_addrs.items()}, {a: set(n) for a, n in core._addr_groups.items()})


RouteTableMachine.TestCase.settings = settings(max_examples=500, stateful_step_count=40, deadline=None)
TestRouteTables = RouteTableMachine.TestCase
