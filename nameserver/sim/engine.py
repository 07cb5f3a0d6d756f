"""The discrete-event core: a heap of timed actions, broker traffic, and the run loop.

:class:`Simulation` holds them; its docstring says how actions are ordered and when brokers
register (docs/nameserver-semantics.md §4, §7).
"""

from __future__ import annotations

import itertools
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from heapq import heappop, heappush
from pathlib import Path
from typing import Any, TextIO

from common.config import EventLogConfig, NameServerConfig
from common.timeutil import iso
from nameserver import package_version
from nameserver.layout import FleetLayout, build_layout
from nameserver.sim.brokers import MESSAGE_JITTER_MS, Payload, SimBroker, SimGroup, build_fleet
from nameserver.sim.faults import FaultInjector
from nameserver.sim.namesrv import SimServer
from nameserver.sim.options import SimOptions
from nameserver.sim.truth import Record, note_effect

PERIOD_MS = 30_000  # registerNameServerPeriod
FIRST_PERIODIC_MS = 10_000  # the periodic task's initial delay
PERIOD_LATENESS_MS = 100  # a fixed-rate scheduler fires late by a little, never early
BOOT_SPREAD_MS = 10_000  # brokers come up over the first seconds after the servers
PROGRESS_EVERY_MS = 3 * 3_600_000


@dataclass(frozen=True)
class SimResult:
    """What a run produced.

    Attributes:
        events_by_ns: events written per server id.
        faults_by_kind: injected faults per kind (enabled kinds only).
        servers: the servers, with their final in-memory tables (``servers[i].routes``).
        layout: the fleet.
        truth_path: ``<events>/_truth/faults.jsonl``.
        wall_seconds: elapsed wall-clock time of the run.
    """

    events_by_ns: dict[str, int]
    faults_by_kind: dict[str, int]
    servers: tuple[SimServer, ...]
    layout: FleetLayout
    truth_path: Path
    wall_seconds: float

    @property
    def events(self) -> int:
        """Events written by all servers."""
        return sum(self.events_by_ns.values())


class Simulation:
    """One simulated fleet of brokers and name servers; :meth:`run` writes the logs.

    Every action is ``fn(now, *args)`` popped in ``(time, sequence)`` order, so ties resolve in the
    order they were scheduled and a run is reproducible for its options. Name servers share nothing
    (docs/nameserver-semantics.md §7): each delivery touches one server, and only the brokers know
    about several.

    Broker traffic (docs/nameserver-semantics.md §4): a forced registration when a broker process
    starts, the first periodic one 10 s later, then one every 30 s plus a little scheduler lateness,
    each sent to every server over that broker's long-lived connection to it, with a seeded per-link
    latency. Messages on one connection arrive in the order sent, as TCP delivers them.

    Args:
        options: validated options (see :class:`SimOptions`).
        ns_config: the servers' timers (expiry, scan interval, first scan delay).
        progress: where progress lines go (default stderr; none with ``options.quiet``).
    """

    def __init__(
        self, options: SimOptions, ns_config: NameServerConfig | None = None, progress: TextIO | None = None
    ) -> None:
        self.options = options
        self.ns_config = ns_config or NameServerConfig()
        self.layout = build_layout(options.brokers, options.slaves, options.topics, options.seed, options.faults)
        self.groups: list[SimGroup] = build_fleet(
            self.layout, options.ns, options.start_ms, random.Random(f"{options.seed}/fleet")
        )
        self.brokers: list[SimBroker] = [b for g in self.groups for b in g.members]
        log_config = EventLogConfig(durability="none")
        self.servers = [
            SimServer(i, ns, options.events_dir, self.ns_config, log_config, package_version())
            for i, ns in enumerate(options.ns_ids)
        ]
        self._rng = random.Random(f"{options.seed}/traffic")
        self._heap: list[tuple[int, int, Callable[..., Any], tuple[Any, ...]]] = []
        self._seq = itertools.count()
        self._progress = None if options.quiet else (progress or sys.stderr)
        self.faults = FaultInjector(self, options.faults, options.fault_rate, options.seed)

    def schedule(self, t: int, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(t, *args)`` at simulated time ``t``."""
        heappush(self._heap, (t, next(self._seq), fn, args))

    # ------------------------------------------------------------------------------------ run

    def run(self) -> SimResult:
        """Simulate ``[start, end)`` and close every log; returns the counts and final tables."""
        opts = self.options
        wall_start = time.perf_counter()
        for server in self.servers:
            self.schedule(opts.start_ms, self.start_server, server)
        for broker in self.brokers:
            self.schedule(opts.start_ms + 1 + self._rng.randrange(BOOT_SPREAD_MS), self.start_broker, broker)
        self.faults.begin(opts.start_ms)
        self._loop(opts.start_ms, opts.end_ms, wall_start)
        for server in self.servers:
            server.close_log("simulation end")
        truth_path = self.faults.write(opts.events_dir, opts.ns_ids)
        return SimResult(
            {s.ns_id: s.events for s in self.servers},
            dict(self.faults.counts),
            tuple(self.servers),
            self.layout,
            truth_path,
            time.perf_counter() - wall_start,
        )

    def _loop(self, start: int, end: int, wall_start: float) -> None:
        heap = self._heap
        next_report = start + PROGRESS_EVERY_MS if self._progress else end
        while heap:
            t, _, fn, args = heappop(heap)
            if t >= end:
                break
            if t >= next_report:
                self._report(next_report - start, end - start, wall_start)
                next_report += PROGRESS_EVERY_MS
            fn(t, *args)

    def _report(self, done_ms: int, total_ms: int, wall_start: float) -> None:
        events = sum(s.events for s in self.servers)
        wall = time.perf_counter() - wall_start
        print(
            f"nsaudit simulate: {done_ms / 3_600_000:.1f} of {total_ms / 3_600_000:.1f} simulated hours "
            f"({iso(self.options.start_ms + done_ms)}), {events:,} events, {events / wall:,.0f} events/s",
            file=self._progress,
            flush=True,
        )

    # ---------------------------------------------------------------------------- name servers

    def start_server(self, now: int, server: SimServer) -> None:
        """``ns_start`` and the scan schedule: first scan after 5 s, then every 10 s (§2.5)."""
        server.start(now)
        self.schedule(now + self.ns_config.first_scan_delay_ms, self._scan, server, server.run)

    def _scan(self, now: int, server: SimServer, run: int) -> None:
        if run != server.run:
            return  # the server restarted: the new run has its own schedule
        server.scan(now)
        self.schedule(now + self.ns_config.scan_interval_ms, self._scan, server, run)

    # --------------------------------------------------------------------------------- brokers

    def start_broker(self, now: int, broker: SimBroker) -> None:
        """A broker process starts: new connections, a forced registration, then the period."""
        broker.alive = True
        broker.life += 1
        broker.conns = [None] * len(self.servers)
        self.send(now, broker, broker.payload(), *self.faults.boot_records(broker))
        lateness = int(self._rng.random() * PERIOD_LATENESS_MS)
        self.schedule(now + FIRST_PERIODIC_MS + lateness, self._periodic, broker, broker.life)

    def _periodic(self, now: int, broker: SimBroker, life: int) -> None:
        if broker.life != life:
            return  # that process died
        self.send(now, broker, broker.payload())
        lateness = int(self._rng.random() * PERIOD_LATENESS_MS)
        heappush(self._heap, (now + PERIOD_MS + lateness, next(self._seq), self._periodic, (broker, life)))

    def kill(self, broker: SimBroker) -> None:
        """The process stops sending; its connections stay half-open on the servers."""
        broker.alive = False
        broker.life += 1

    def send(self, now: int, broker: SimBroker, payload: Payload, *records: Record) -> None:
        """REGISTER_BROKER to every server the broker can reach (the hot path).

        A server that is down refuses the connection; a cut link loses the message. With
        ``records`` each delivery is noted as an effect of those faults.
        """
        rnd = self._rng.random
        heap, seq = self._heap, self._seq
        conns, cut, delays = broker.conns, broker.cut, broker.link_delays
        for server in self.servers:
            i = server.index
            if cut[i]:
                continue
            if not server.up:
                conns[i] = None
                continue
            conn = conns[i]
            if conn is None or conn.run != server.run:
                conn = server.connect(broker)
            t = now + delays[i] + int(rnd() * MESSAGE_JITTER_MS)
            if conn.last_arrival > t:  # TCP keeps a connection's messages in order
                t = conn.last_arrival
            conn.last_arrival = t
            if not records:
                heappush(heap, (t, next(seq), server.register, (server.run, conn, payload)))
            else:
                heappush(heap, (t, next(seq), self._register_noted, (server, server.run, conn, payload, records)))

    def _register_noted(
        self, now: int, server: SimServer, run: int, conn: Any, payload: Payload, records: tuple[Record, ...]
    ) -> None:
        events = server.register(now, run, conn, payload)
        if events:
            for record in records:
                note_effect(
                    record,
                    server.ns_id,
                    {
                        "event": events[0]["type"],
                        "ts": now,
                        "broker_addr": payload.broker_addr,
                        "broker_id": payload.broker_id,
                        "data_version": payload.data_version,
                    },
                )

    def crash(self, now: int, broker: SimBroker, record: Record) -> None:
        """The process dies and the OS closes its sockets: every server sees the close."""
        self.kill(broker)
        for server in self.servers:
            conn = broker.conns[server.index]
            if conn is None or conn.run != server.run or broker.cut[server.index]:
                continue
            self.schedule(self._arrival(now, broker, server.index, conn), self._close_noted, server, conn, record)
            broker.conns[server.index] = None

    def shutdown(self, now: int, broker: SimBroker, record: Record, lost: int | None = None) -> None:
        """Clean shutdown: UNREGISTER_BROKER to every server, then the connections close.

        Args:
            lost: index of a server that receives neither (the unregister timed out and the
                close never arrived: it keeps a stale entry until its expiry scan).
        """
        payload = broker.payload()
        self.kill(broker)
        for server in self.servers:
            i = server.index
            if i == lost or broker.cut[i] or not server.up:
                continue
            conn = broker.conns[i]
            if conn is None or conn.run != server.run:
                conn = server.connect(broker)  # the remoting client connects on demand
            t = self._arrival(now, broker, i, conn)
            self.schedule(t, self._unregister_noted, server, conn, payload, record)
            conn.last_arrival = t + 1
            self.schedule(t + 1, self._close_noted, server, conn, None)
            broker.conns[i] = None

    def _arrival(self, now: int, broker: SimBroker, index: int, conn: Any) -> int:
        t: int = max(now + broker.link_delays[index] + int(self._rng.random() * MESSAGE_JITTER_MS), conn.last_arrival)
        conn.last_arrival = t
        return t

    def _unregister_noted(self, now: int, server: SimServer, conn: Any, payload: Payload, record: Record) -> None:
        if server.unregister(now, conn.run, conn, payload):
            note_effect(record, server.ns_id, {"event": "unregister", "ts": now, "broker_addr": payload.broker_addr})

    def _close_noted(self, now: int, server: SimServer, conn: Any, record: Record | None) -> None:
        addrs = server.close_channel(now, conn.run, conn)
        if addrs is not None and record is not None:
            for addr in addrs:
                note_effect(record, server.ns_id, {"event": "channel_close", "ts": now, "broker_addr": addr})
