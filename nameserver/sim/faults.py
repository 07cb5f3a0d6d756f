"""Fault injection: when each fault strikes, whom it hits, and the ground truth it leaves.

The layout faults (``read_lt_write``, ``queue_skew``) are built into the fleet by
:func:`nameserver.layout.build_layout`; here they only get their truth records, one per topic
or cluster of :func:`nameserver.layout.layout_anomalies`, whose effects are the first
registrations of the groups concerned. A ``read_lt_write`` record ends when topic changes or
deletions leave no group of the topic with fewer read than write queues; a ``queue_skew``
record describes the cluster as laid out and stays open (later faults move queues too).

Each enabled runtime kind arrives as a Poisson process (its own seeded stream, so switching one
kind off leaves the others' arrival times alone) at ``DEFAULT_FAULTS_PER_DAY[kind] * fault_rate``
per simulated day, from one minute after the start. An arrival picks a subject that no other
fault holds (a broker group whose members are all alive, a server that is up); when there is
none, the arrival is skipped and nothing is recorded. A fault holds its group until shortly
after it ends, so faults never overlap on one group and their effects stay attributable.

What each kind does (semantics spec §4 for the broker side, §2 for the server side):

* ``expire``: a broker goes silent (hung process or black-holed host); its connections stay
  open. Every server that had it live expires it by scan; 70% restart 5-60 min later.
* ``shutdown``: UNREGISTER_BROKER to every server, then the connections close; 80% restart
  1-15 min later.
* ``lost_unregister``: a shutdown whose unregister and close never reach one server, which
  keeps the entry until its scan expires it; 80% restart 4-20 min later.
* ``partition``: one broker cannot reach one server for 3-20 min; that server expires it while
  the others keep it, and it registers afresh once the link heals.
* ``promotion``: a master crashes (every server sees its connection close), 10-60 s later a
  slave re-registers as id 0 over its connection; 70% of old masters rejoin as slaves 5-30 min
  later.
* ``topic_change``: a topic is created on 1-3 groups of a cluster, or an existing topic's queue
  numbers change on one group (sometimes only the write queues, the scale-out mistake); the
  master takes the next data version and sends an incremental registration at once.
* ``wipe``: mqadmin wipes a group's write perm on one server (205); half the time it adds it
  back 5-60 min later (327).
* ``delete_topic``: mqadmin deletes a topic on its brokers (their data versions move on) and
  then on every server (216), half the time for one cluster only.
* ``ns_restart``: a server stops cleanly (``ns_stop``) and starts 5-120 s later with empty
  tables, continuing its seq; the brokers refill it with their next registrations.
"""

from __future__ import annotations

import dataclasses
import random
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

from nameserver.layout import layout_anomalies
from nameserver.model import MASTER_ID, TopicConfig
from nameserver.sim.brokers import MAX_DELAY_MS, SimBroker, SimGroup
from nameserver.sim.options import DEFAULT_FAULTS_PER_DAY, RUNTIME_FAULTS
from nameserver.sim.namesrv import SimServer
from nameserver.sim.truth import Record, new_record, note_effect, write_truth
from common.timeutil import DAY_MS

if TYPE_CHECKING:
    from nameserver.sim.engine import Simulation

WARMUP_MS = 60_000
MINUTE_MS = 60_000
SETTLE_MS = 2 * MINUTE_MS  # a group stays held this long after its fault ends
FOREVER = 2**62
QUEUE_CHOICES = (4, 8, 16, 32)


class FaultInjector:
    """Schedules the enabled faults on a :class:`Simulation` and keeps their records.

    Attributes:
        records: one truth record per injected fault, in injection order.
        counts: injected faults per enabled kind.
    """

    def __init__(self, sim: "Simulation", kinds: Iterable[str], fault_rate: float, seed: int) -> None:
        self.sim = sim
        self.records: list[Record] = []
        self.counts = {kind: 0 for kind in kinds}
        runtime = [kind for kind in self.counts if kind in RUNTIME_FAULTS]
        self._per_ms = {kind: DEFAULT_FAULTS_PER_DAY[kind] * fault_rate / DAY_MS for kind in runtime}
        self._rngs = {kind: random.Random(f"{seed}/fault/{kind}") for kind in runtime}
        self._topic_width = max(4, len(str(max(sim.options.topics - 1, 0))))
        self._next_topic = sim.options.topics  # created topics continue the layout's numbering
        self._boot_records: dict[str, list[Record]] = {}  # broker name -> layout records
        self._read_lt_write: dict[str, Record] = {}  # topic -> its open read_lt_write record
        self._layout_records(sim.options.start_ms)

    def _layout_records(self, start_ms: int) -> None:
        """One record per layout fault present in the fleet, noted by its groups' first registration."""
        group_names = {g.cluster: [] for g in self.sim.groups}
        for g in self.sim.groups:
            group_names[g.cluster].append(g.broker_name)
        for anomaly in layout_anomalies(self.sim.layout):
            if anomaly.kind not in self.counts:
                continue
            record = new_record(anomaly.kind, anomaly.subject, start_ms, **anomaly.detail)
            if anomaly.kind == "read_lt_write":
                self._read_lt_write[anomaly.subject] = record
                groups = list(anomaly.detail["queue_nums"])
            else:
                groups = group_names[anomaly.subject]
            for name in groups:
                self._boot_records.setdefault(name, []).append(record)
            self.records.append(record)
            self.counts[anomaly.kind] += 1

    def boot_records(self, broker: SimBroker) -> tuple[Record, ...]:
        """The layout records a broker's registration must note: its group's, on the master's
        first start only (empty for every other registration)."""
        if broker.broker_id != MASTER_ID or broker.life != 1:
            return ()
        return tuple(self._boot_records.pop(broker.group.broker_name, ()))

    def begin(self, start_ms: int) -> None:
        """Schedule each enabled runtime kind's first arrival."""
        for kind in self._per_ms:
            if self._per_ms[kind] > 0:
                self._schedule_next(start_ms + WARMUP_MS, kind)

    def _end_read_lt_write(self, now: int, topic: str) -> None:
        """End the topic's ``read_lt_write`` record once no group has fewer read than write queues."""
        record = self._read_lt_write.get(topic)
        if record is None:
            return
        if not any(topic in g.topics and g.topics[topic].read_queue_nums < g.topics[topic].write_queue_nums
                   for g in self.sim.groups):
            record["end_ms"] = now
            del self._read_lt_write[topic]

    def write(self, events_dir: Path, ns_order: tuple[str, ...]) -> Path:
        """Write the truth file (see :mod:`nameserver.sim.truth`)."""
        return write_truth(events_dir, self.records, ns_order)

    def _schedule_next(self, after: int, kind: str) -> None:
        gap = self._rngs[kind].expovariate(self._per_ms[kind])
        self.sim.schedule(after + 1 + int(min(gap, FOREVER)), self._arrive, kind)

    def _arrive(self, now: int, kind: str) -> None:
        record = getattr(self, f"_{kind}")(now, self._rngs[kind])
        if record is not None:
            self.records.append(record)
            self.counts[kind] += 1
        self._schedule_next(now, kind)

    # ------------------------------------------------------------------------- broker faults

    def _expire(self, now: int, rng: random.Random) -> Record | None:
        broker = self._pick_broker(now, rng)
        if broker is None:
            return None
        record = _broker_record("expire", broker, now)
        self.sim.kill(broker)
        self._expect_expiry(now, record, broker.addr, range(len(self.sim.servers)))
        self._maybe_restart(now, rng, broker, record, 0.7, (5, 60))
        return record

    def _shutdown(self, now: int, rng: random.Random) -> Record | None:
        broker = self._pick_broker(now, rng)
        if broker is None:
            return None
        record = _broker_record("shutdown", broker, now)
        self.sim.shutdown(now, broker, record)
        self._maybe_restart(now, rng, broker, record, 0.8, (1, 15))
        return record

    def _lost_unregister(self, now: int, rng: random.Random) -> Record | None:
        broker = self._pick_broker(now, rng)
        servers = self._servers_holding(broker)
        if broker is None or not servers:
            return None
        lossy = rng.choice(servers)
        record = _broker_record("lost_unregister", broker, now, lost_on=lossy.ns_id)
        self.sim.shutdown(now, broker, record, lost=lossy.index)
        self._expect_expiry(now, record, broker.addr, [lossy.index])
        # the restart comes after the lossy server's expiry (>= 4 min > expiry + scan)
        self._maybe_restart(now, rng, broker, record, 0.8, (4, 20))
        return record

    def _partition(self, now: int, rng: random.Random) -> Record | None:
        broker = self._pick_broker(now, rng)
        servers = self._servers_holding(broker)
        if broker is None or not servers:
            return None
        server = rng.choice(servers)
        heal = now + rng.randint(3 * MINUTE_MS, 20 * MINUTE_MS)
        record = _broker_record("partition", broker, now, cut_from=server.ns_id, heal_ms=heal)
        broker.cut[server.index] = True
        self._expect_expiry(now, record, broker.addr, [server.index])
        broker.group.busy_until = heal + SETTLE_MS
        self.sim.schedule(heal, self._heal, broker, server.index, record)
        return record

    def _heal(self, now: int, broker: SimBroker, index: int, record: Record) -> None:
        broker.cut[index] = False
        record["end_ms"] = now

    def _promotion(self, now: int, rng: random.Random) -> Record | None:
        groups = [g for g in self.sim.groups if len(g.members) > 1 and g.idle(now) and g.master() is not None]
        if not groups:
            return None
        group = rng.choice(groups)
        old = group.master()
        assert old is not None
        record = new_record("promotion", group.broker_name, now, cluster=group.cluster, old_master=old.addr,
                            new_master=None, promote_ms=None, rejoin_ms=None)
        self.sim.crash(now, old, record)
        promote = now + rng.randint(10_000, 60_000)
        rejoin = promote + rng.randint(5 * MINUTE_MS, 30 * MINUTE_MS) if rng.random() < 0.7 else None
        group.busy_until = rejoin + SETTLE_MS if rejoin is not None else FOREVER
        self.sim.schedule(promote, self._promote, group, old, rejoin, record)
        return record

    def _promote(self, now: int, group: SimGroup, old: SimBroker, rejoin: int | None, record: Record) -> None:
        slave = min((m for m in group.members if m.alive and m is not old), key=lambda m: m.broker_id)
        vacated = slave.broker_id
        slave.broker_id = 0
        record.update(end_ms=now, new_master=slave.addr, promote_ms=now)
        self.sim.send(now, slave, slave.payload(), record)  # re-registers as id 0 at once
        if rejoin is not None:
            self.sim.schedule(rejoin, self._rejoin, old, vacated, record)

    def _rejoin(self, now: int, old: SimBroker, broker_id: int, record: Record) -> None:
        old.broker_id = broker_id
        record["rejoin_ms"] = now
        self.sim.start_broker(now, old)

    # -------------------------------------------------------------------------- topic faults

    def _topic_change(self, now: int, rng: random.Random) -> Record | None:
        groups = [g for g in self.sim.groups if g.idle(now) and g.master() is not None]
        if not groups:
            return None
        first = rng.choice(groups)
        if rng.random() < 0.5 or not first.topics:
            topic = f"topic-{self._next_topic:0{self._topic_width}d}"
            self._next_topic += 1
            peers = [g for g in groups if g.cluster == first.cluster and g is not first]
            chosen = [first] + rng.sample(peers, min(len(peers), rng.randint(0, 2)))
            queues = rng.choice(QUEUE_CHOICES[:3])
            config = TopicConfig(topic, queues, queues)
            action = "create"
        else:
            chosen = [first]
            topic = rng.choice(sorted(first.topics))
            old = first.topics[topic]
            if rng.random() < 0.3:  # scale the writers out first: read < write for a while
                config = dataclasses.replace(old, write_queue_nums=old.write_queue_nums * 2)
            else:
                queues = rng.choice([q for q in QUEUE_CHOICES if q != old.write_queue_nums])
                config = dataclasses.replace(old, read_queue_nums=queues, write_queue_nums=queues)
            action = "queues"
        chosen.sort(key=lambda g: g.broker_name)
        record = new_record("topic_change", topic, now, action=action, broker_names=[g.broker_name for g in chosen],
                            read_queue_nums=config.read_queue_nums, write_queue_nums=config.write_queue_nums,
                            data_versions={})
        record["end_ms"] = now
        for group in chosen:
            topics = dict(group.topics)
            topics[topic] = config
            record["data_versions"][group.broker_name] = group.set_topics(topics, now)
            group.busy_until = now + SETTLE_MS
            master = group.master()
            assert master is not None
            self.sim.send(now, master, master.incremental_payload((config,)), record)
        self._end_read_lt_write(now, topic)
        return record

    def _delete_topic(self, now: int, rng: random.Random) -> Record | None:
        holders: dict[str, list[SimGroup]] = {}
        for group in self.sim.groups:
            for topic in group.topics:
                holders.setdefault(topic, []).append(group)
        candidates = sorted(t for t, gs in holders.items() if all(g.idle(now) and g.master() for g in gs))
        if not candidates:
            return None
        topic = rng.choice(candidates)
        groups = holders[topic]
        cluster = rng.choice(sorted({g.cluster for g in groups})) if rng.random() < 0.5 else None
        affected = [g for g in groups if cluster is None or g.cluster == cluster]
        record = new_record("delete_topic", topic, now, cluster=cluster,
                            broker_names=[g.broker_name for g in affected], data_versions={})
        record["end_ms"] = now
        # mqadmin deleteTopic: first the brokers (DELETE_TOPIC_IN_BROKER: the topic goes and the
        # data version moves on, no registration is sent), then every name server (216)
        for group in affected:
            topics = dict(group.topics)
            del topics[topic]
            record["data_versions"][group.broker_name] = group.set_topics(topics, now)
            group.busy_until = now + SETTLE_MS
        for server in self.sim.servers:
            self.sim.schedule(now + 1 + server.index, self._admin, server, "delete_topic", topic, cluster, record)
        self._end_read_lt_write(now, topic)
        return record

    def _wipe(self, now: int, rng: random.Random) -> Record | None:
        groups = [g for g in self.sim.groups if g.idle(now) and g.master() is not None]
        servers = [s for s in self.sim.servers if s.up]
        if not groups or not servers:
            return None
        group, server = rng.choice(groups), rng.choice(servers)
        add = now + rng.randint(5 * MINUTE_MS, 60 * MINUTE_MS) if rng.random() < 0.5 else None
        record = new_record("wipe", group.broker_name, now, cluster=group.cluster, add_ms=add)
        self._admin(now, server, "wipe", group.broker_name, None, record)
        group.busy_until = add + SETTLE_MS if add is not None else FOREVER
        if add is not None:
            self.sim.schedule(add, self._add_back, server, group.broker_name, record)
        return record

    def _add_back(self, now: int, server: SimServer, broker_name: str, record: Record) -> None:
        self._admin(now, server, "add", broker_name, None, record)
        record["end_ms"] = now

    def _admin(self, now: int, server: SimServer, kind: str, arg: str, cluster: str | None, record: Record) -> None:
        if not server.up:
            return  # mqadmin cannot reach a stopped server
        count = server.admin(now, kind, arg, cluster)
        event = {"wipe": "wipe_write_perm", "add": "add_write_perm", "delete_topic": "delete_topic"}[kind]
        effect = {"event": event, "ts": now}
        effect.update({"topic_count": count} if count is not None else {"cluster": cluster})
        note_effect(record, server.ns_id, effect)

    # --------------------------------------------------------------------------- server faults

    def _ns_restart(self, now: int, rng: random.Random) -> Record | None:
        servers = [s for s in self.sim.servers if s.up]
        if not servers:
            return None
        server = rng.choice(servers)
        record = new_record("ns_restart", server.ns_id, now)
        server.stop(now, "restart")
        note_effect(record, server.ns_id, {"event": "ns_stop", "ts": now})
        self.sim.schedule(now + rng.randint(5_000, 120_000), self._ns_start, server, record)
        return record

    def _ns_start(self, now: int, server: SimServer, record: Record) -> None:
        self.sim.start_server(now, server)
        record["end_ms"] = now
        note_effect(record, server.ns_id, {"event": "ns_start", "ts": now})

    # ------------------------------------------------------------------------------- helpers

    def _pick_broker(self, now: int, rng: random.Random) -> SimBroker | None:
        brokers = [b for g in self.sim.groups if g.idle(now) for b in g.members]
        return rng.choice(brokers) if brokers else None

    def _servers_holding(self, broker: SimBroker | None) -> list[SimServer]:
        """Servers that are up, reachable by the broker and have it live (one-server faults)."""
        if broker is None:
            return []
        return [s for s in self.sim.servers
                if s.up and not broker.cut[s.index] and broker.addr in s.routes.broker_live_table]

    def _maybe_restart(self, now: int, rng: random.Random, broker: SimBroker, record: Record, chance: float,
                       minutes: tuple[int, int]) -> None:
        """Restart the broker later with probability ``chance``; hold its group until then."""
        if rng.random() < chance:
            at = now + rng.randint(minutes[0] * MINUTE_MS, minutes[1] * MINUTE_MS)
            broker.group.busy_until = at + SETTLE_MS
            self.sim.schedule(at, self._restart, broker, record)
        else:
            broker.group.busy_until = FOREVER

    def _restart(self, now: int, broker: SimBroker, record: Record) -> None:
        record["end_ms"] = now
        self.sim.start_broker(now, broker)

    def _expect_expiry(self, now: int, record: Record, addr: str, indices: Iterable[int]) -> None:
        """After the messages in flight have landed, note where a scan must expire ``addr``."""
        self.sim.schedule(now + MAX_DELAY_MS + 1, self._note_expiry, record, addr, list(indices))

    def _note_expiry(self, now: int, record: Record, addr: str, indices: list[int]) -> None:
        cfg = self.sim.ns_config
        for i in indices:
            server = self.sim.servers[i]
            live = server.routes.broker_live_table.get(addr) if server.up else None
            if live is None:
                continue  # not live there (server restarting): nothing to expire
            deadline = live.last_update + cfg.broker_expiry_ms  # removed strictly after this
            origin = server.start_ts + cfg.first_scan_delay_ms
            tick = origin + max(0, (deadline - origin) // cfg.scan_interval_ms + 1) * cfg.scan_interval_ms
            effect = {"event": "expire", "broker_addr": addr, "last_update_ts": live.last_update,
                      "window": [deadline, deadline + cfg.scan_interval_ms], "scan_ts": tick}
            note_effect(record, server.ns_id, effect)
            server.pending_expiries[addr] = effect


def _broker_record(kind: str, broker: SimBroker, now: int, **detail) -> Record:
    return new_record(kind, broker.addr, now, cluster=broker.group.cluster, broker_name=broker.group.broker_name,
                      broker_id=broker.broker_id, **detail)

