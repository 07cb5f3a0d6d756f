"""The fault injector's state and the helpers every fault kind uses: picking a subject that no
other fault holds, restarting a broker later, and noting where a scan must expire a broker."""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable
from typing import Any, Protocol

from common.config import NameServerConfig
from common.timeutil import DAY_MS
from nameserver.layout import RUNTIME_FAULTS, FleetLayout, layout_anomalies
from nameserver.sim.brokers import MAX_DELAY_MS, Payload, SimBroker, SimGroup
from nameserver.sim.namesrv import SimServer
from nameserver.sim.options import DEFAULT_FAULTS_PER_DAY, SimOptions
from nameserver.sim.truth import Record, new_record, note_effect

WARMUP_MS = 60_000
MINUTE_MS = 60_000
SETTLE_MS = 2 * MINUTE_MS  # a group stays held this long after its fault ends
FOREVER = 2**62
QUEUE_CHOICES = (4, 8, 16, 32)


class FaultTarget(Protocol):
    """What the injector needs of the simulation it disturbs (``Simulation``)."""

    options: SimOptions
    ns_config: NameServerConfig
    layout: FleetLayout
    groups: list[SimGroup]
    servers: list[SimServer]

    def schedule(self, t: int, fn: Callable[..., Any], *args: Any) -> None: ...

    def start_server(self, now: int, server: SimServer) -> None: ...

    def start_broker(self, now: int, broker: SimBroker) -> None: ...

    def kill(self, broker: SimBroker) -> None: ...

    def send(self, now: int, broker: SimBroker, payload: Payload, *records: Record) -> None: ...

    def crash(self, now: int, broker: SimBroker, record: Record) -> None: ...

    def shutdown(self, now: int, broker: SimBroker, record: Record, lost: int | None = None) -> None: ...


class FaultCore:
    """The injector's state (records, counts, per-kind streams) and shared helpers.

    Attributes:
        records: one truth record per injected fault, in injection order.
        counts: injected faults per enabled kind.
    """

    def __init__(self, sim: FaultTarget, kinds: Iterable[str], fault_rate: float, seed: int) -> None:
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
        group_names: dict[str, list[str]] = {g.cluster: [] for g in self.sim.groups}
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

    def _end_read_lt_write(self, now: int, topic: str) -> None:
        """End the topic's ``read_lt_write`` record once no group has fewer read than write queues."""
        record = self._read_lt_write.get(topic)
        if record is None:
            return
        if not any(
            topic in g.topics and g.topics[topic].read_queue_nums < g.topics[topic].write_queue_nums
            for g in self.sim.groups
        ):
            record["end_ms"] = now
            del self._read_lt_write[topic]

    def _pick_broker(self, now: int, rng: random.Random) -> SimBroker | None:
        brokers = [b for g in self.sim.groups if g.idle(now) for b in g.members]
        return rng.choice(brokers) if brokers else None

    def _servers_holding(self, broker: SimBroker | None) -> list[SimServer]:
        """Servers that are up, reachable by the broker and have it live (one-server faults)."""
        if broker is None:
            return []
        return [
            s
            for s in self.sim.servers
            if s.up and not broker.cut[s.index] and broker.addr in s.routes.broker_live_table
        ]

    def _maybe_restart(
        self, now: int, rng: random.Random, broker: SimBroker, record: Record, chance: float, minutes: tuple[int, int]
    ) -> None:
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
            effect = {
                "event": "expire",
                "broker_addr": addr,
                "last_update_ts": live.last_update,
                "window": [deadline, deadline + cfg.scan_interval_ms],
                "scan_ts": tick,
            }
            note_effect(record, server.ns_id, effect)
            server.pending_expiries[addr] = effect


def broker_record(kind: str, broker: SimBroker, now: int, **detail: Any) -> Record:
    """A truth record about one broker, naming its cluster, group and id."""
    return new_record(
        kind,
        broker.addr,
        now,
        cluster=broker.group.cluster,
        broker_name=broker.group.broker_name,
        broker_id=broker.broker_id,
        **detail,
    )
