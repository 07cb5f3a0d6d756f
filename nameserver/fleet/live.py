"""``nsaudit fleet``: live broker agents registering with real name servers over sockets."""

from __future__ import annotations

import asyncio
import dataclasses
import random
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TextIO

from common.errors import UserError
from nameserver.acl import Credentials
from nameserver.client import RemotingClient, RemotingError, simple_request
from nameserver.codec import RemotingCommand, RequestCode, Version
from nameserver.fleet.agent import REQUEST_TIMEOUT_S, BrokerAgent, GroupState
from nameserver.layout import FAULTS, LAYOUT_FAULTS, Anomaly, build_layout, layout_anomalies
from nameserver.model import DataVersion, TopicConfig


@dataclass(frozen=True)
class FleetOptions:
    """A validated ``nsaudit fleet`` request.

    Attributes:
        servers: name servers as ``(host, port)``.
        faults: enabled fault kinds: layout faults shape the fleet from the start; the others are
            injected once each, spread over the first 60% of the run.
        credentials: when set, every broker and admin request is signed (``[security]
            access_key`` and its secret; never from flags).
    """

    servers: tuple[tuple[str, int], ...]
    brokers: int = 4
    slaves: int = 1
    topics: int = 10
    duration_s: float = 60.0
    period_ms: int = 30_000
    faults: tuple[str, ...] = ()
    seed: int = 1
    credentials: Credentials | None = None


def parse_faults(text: str) -> tuple[str, ...]:
    """``all``, ``none`` or a comma-separated list of :data:`FAULTS`.

    Raises:
        UserError: an unknown fault name.
    """
    text = (text or "none").strip()
    if text == "all":
        return FAULTS
    if text in ("", "none"):
        return ()
    names = tuple(dict.fromkeys(n.strip() for n in text.split(",") if n.strip()))
    unknown = [n for n in names if n not in FAULTS]
    if unknown:
        raise UserError(f"unknown fault {unknown[0]!r}; choose from: {', '.join(FAULTS)}, all, none")
    return names


class Fleet:
    """A live fleet: start, run with faults, stop cleanly.

    The fleet is :func:`nameserver.layout.build_layout`'s, the same one the simulator drives, so a
    live run and a simulated run of the same arguments describe the same estate. Each broker process
    keeps one long-lived connection per name server, sends a forced REGISTER_BROKER at start and
    then one every period with its full topic table (docs/nameserver-semantics.md §4), and on a
    clean stop sends UNREGISTER_BROKER to every server and closes. Some brokers send compressed
    bodies (docs/remoting-protocol.md §8.3), some speak 5.x (version 479); every body carries its
    CRC (§8.2).

    Faults mirror the simulator's (:mod:`nameserver.sim.faults`), each announced by one stdout line.
    The layout faults ``read_lt_write`` (topics with fewer read than write queues) and
    ``queue_skew`` (Zipf-weighted placement, the busiest group of each cluster scaled up) shape the
    fleet from its first registration (:mod:`nameserver.layout`) and are announced first, naming
    their topics and clusters; without them the fleet is balanced. Then, during the run: ``expire``
    (silent death, sockets stay open), ``shutdown`` (clean), ``lost_unregister`` (one server gets
    neither the unregister nor the close), ``partition`` (stop sending to one server),
    ``promotion`` (the master crashes, a slave re-registers as id 0), ``topic_change`` (new data
    version, incremental registration at once), ``wipe`` (205 to one server, sometimes 327 later),
    ``delete_topic`` (on the brokers, then 216 on every server). ``ns_restart`` needs control of a
    server process, which a fleet does not have: it is announced as skipped.

    Args:
        options: what to run.
        out: where fault lines go (stdout by default).
    """

    def __init__(self, options: FleetOptions, out: TextIO | None = None) -> None:
        self.options = options
        self.out = out or sys.stdout
        self.rng = random.Random(f"{options.seed}/fleet")
        layout = build_layout(options.brokers, options.slaves, options.topics, options.seed, options.faults)
        self.anomalies: tuple[Anomaly, ...] = layout_anomalies(layout)
        now = int(time.time() * 1000)
        self.groups: list[GroupState] = []
        self.agents: list[BrokerAgent] = []
        for group in layout.groups:
            state = GroupState(
                group, DataVersion(now - self.rng.randint(3_600_000, 86_400_000), self.rng.randint(1, 50))
            )
            self.groups.append(state)
            for member in group.members:
                n = len(self.agents)
                # Mixed estate: every third broker sends compressed bodies, every fourth is 5.x.
                agent = BrokerAgent(
                    member,
                    state,
                    options.servers,
                    compressed=n % 3 == 1,
                    version=Version.V5_3_3 if n % 4 == 3 else Version.V4_9_7,
                    credentials=options.credentials,
                )
                state.members.append(agent)
                self.agents.append(agent)
        self._next_topic = options.topics
        self._tasks: list[asyncio.Task[Any]] = []
        self._stop = asyncio.Event()
        self.injected: list[str] = []

    def say(self, line: str) -> None:
        """Print one line and flush (scripts read it through a pipe)."""
        print(line, file=self.out, flush=True)

    async def start(self) -> None:
        """Forced registration of every broker with every server, then the periodic loops."""
        await asyncio.gather(*(agent.register_all() for agent in self.agents))
        loop = asyncio.get_running_loop()
        # each broker process started at its own moment: its period has its own phase
        self._tasks = [loop.create_task(self._periodic(agent, self.rng.random())) for agent in self.agents]
        self.say(
            f"fleet: {len(self.agents)} brokers in {len(self.groups)} groups registered with "
            f"{len(self.options.servers)} name servers"
        )

    async def _periodic(self, agent: BrokerAgent, phase: float) -> None:
        period = self.options.period_ms / 1000
        await asyncio.sleep(period * phase)
        while agent.alive:
            await agent.register_all()
            await asyncio.sleep(period)

    async def run(self) -> None:
        """Run for ``duration_s`` (or until :meth:`request_stop`), injecting the enabled faults.

        Layout faults are in place since :meth:`start`: they are announced at once.
        """
        duration = self.options.duration_s
        for kind in self.options.faults:
            if kind in LAYOUT_FAULTS:
                await self.inject(kind)
        faults = [kind for kind in self.options.faults if kind not in LAYOUT_FAULTS]
        began = time.monotonic()
        for n, kind in enumerate(faults):
            at = began + duration * 0.6 * (n + 1) / (len(faults) + 1)
            if await self._sleep_until(at):
                return
            await self.inject(kind)
        await self._sleep_until(began + duration)

    async def _sleep_until(self, deadline: float) -> bool:
        """Sleep until ``deadline`` (monotonic); True when a stop was requested first."""
        try:
            await asyncio.wait_for(self._stop.wait(), max(0.0, deadline - time.monotonic()))
            return True
        except TimeoutError:
            return False

    def request_stop(self) -> None:
        """End :meth:`run` early (signal handlers)."""
        self._stop.set()

    async def stop(self) -> None:
        """Clean stop: every live broker unregisters from every server and closes."""
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await asyncio.gather(*(a.unregister_all() for a in self.agents if a.alive))
        await asyncio.gather(*(a.close_all() for a in self.agents))

    # ------------------------------------------------------------------ faults

    async def inject(self, kind: str) -> None:
        """Inject one fault of ``kind`` now and announce it (or announce that it was skipped)."""
        line = await self._STRIKES[kind](self)
        if line is None:
            line = f"skipped: no eligible target for {kind}"
        self.injected.append(kind)
        self.say(f"fault {kind}: {line}")

    def _pick_group(self, need_slave: bool = False) -> GroupState | None:
        """A group no other broker fault holds, every member alive; it is held from now on, so
        broker faults never overlap on one group and stay attributable."""
        groups = [
            g
            for g in self.groups
            if not g.busy and all(m.alive for m in g.members) and (len(g.members) > 1 or not need_slave)
        ]
        if not groups:
            return None
        group = self.rng.choice(groups)
        group.busy = True
        return group

    def _pick_served_group(self) -> GroupState | None:
        """A group with a live master (id 0), for table faults (topic change, wipe); not held."""
        groups = [g for g in self.groups if any(m.alive and m.broker_id == 0 for m in g.members)]
        return self.rng.choice(groups) if groups else None

    def _pick_agent(self) -> BrokerAgent | None:
        group = self._pick_group()
        return None if group is None else self.rng.choice(group.members)

    async def _fault_expire(self) -> str | None:
        agent = self._pick_agent()
        if agent is None:
            return None
        agent.alive = False  # silent death: no more traffic, the sockets stay open
        return f"{agent.describe()} goes silent, connections left open"

    async def _fault_shutdown(self) -> str | None:
        agent = self._pick_agent()
        if agent is None:
            return None
        await agent.unregister_all()
        return f"{agent.describe()} unregistered from every server and closed"

    async def _fault_lost_unregister(self) -> str | None:
        agent = self._pick_agent()
        if agent is None:
            return None
        lossy = self.rng.randrange(len(self.options.servers))
        await agent.unregister_all(skip=lossy)
        host, port = self.options.servers[lossy]
        return f"{agent.describe()} shut down; unregister and close never reached {host}:{port}"

    async def _fault_partition(self) -> str | None:
        agent = self._pick_agent()
        if agent is None:
            return None
        cut = self.rng.randrange(len(self.options.servers))
        agent.cut.add(cut)
        host, port = self.options.servers[cut]
        return f"{agent.describe()} cut off from {host}:{port} (connection left open, nothing sent)"

    async def _fault_promotion(self) -> str | None:
        group = self._pick_group(need_slave=True)
        if group is None:
            return None
        old = group.members[0]
        old.crash()
        slave = min((m for m in group.members if m.alive), key=lambda m: m.broker_id)
        await asyncio.sleep(min(0.5, self.options.period_ms / 4000))
        slave.broker_id = 0
        await slave.register_all()  # re-registers as id 0 at once over its connections
        return f"master {old.addr} of {group.broker_name} crashed; slave {slave.addr} re-registered as id 0"

    async def _fault_topic_change(self) -> str | None:
        group = self._pick_served_group()
        if group is None:
            return None
        if self.rng.random() < 0.5 or not group.topics:
            topic = f"topic-{self._next_topic:04d}"
            self._next_topic += 1
            queues = self.rng.choice((4, 8, 16))
            config = TopicConfig(topic, queues, queues)
            action = "created"
        else:
            old = group.topics[self.rng.choice(sorted(group.topics))]
            config = dataclasses.replace(old, write_queue_nums=old.write_queue_nums * 2)
            topic, action = old.topic, "write queues doubled"
        group.topics[topic] = config
        dv = group.next_version()
        master = next((m for m in group.members if m.broker_id == 0 and m.alive), None)
        if master is not None:
            await master.register_all([config])  # incremental registration, at once
        return f"{topic} {action} on {group.broker_name}, data version {dv.timestamp}/{dv.counter}"

    async def _admin(self, server: int, cmd: RemotingCommand) -> RemotingCommand | None:
        """An mqadmin request over its own short connection."""
        host, port = self.options.servers[server]
        try:
            client = await RemotingClient.connect(host, port, REQUEST_TIMEOUT_S, self.options.credentials)
        except OSError:
            return None
        try:
            return await client.request(cmd, REQUEST_TIMEOUT_S)
        except (TimeoutError, RemotingError):
            return None
        finally:
            await client.close()

    async def _fault_wipe(self) -> str | None:
        group = self._pick_served_group()
        if group is None:
            return None
        server = self.rng.randrange(len(self.options.servers))
        answer = await self._admin(
            server, simple_request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": group.broker_name})
        )
        count = (answer.ext_fields or {}).get("wipeTopicCount") if answer else None
        host, port = self.options.servers[server]
        line = f"write perm of {group.broker_name} wiped on {host}:{port} ({count} topics)"
        if self.rng.random() < 0.5:
            delay = self.options.period_ms / 2000
            self._tasks.append(asyncio.get_running_loop().create_task(self._add_back(delay, server, group)))
            line += f"; added back in {delay:g} s"
        return line

    async def _add_back(self, delay: float, server: int, group: GroupState) -> None:
        await asyncio.sleep(delay)
        answer = await self._admin(
            server, simple_request(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": group.broker_name})
        )
        count = (answer.ext_fields or {}).get("addTopicCount") if answer else None
        host, port = self.options.servers[server]
        self.say(f"fault wipe: write perm of {group.broker_name} added back on {host}:{port} ({count} topics)")

    async def _fault_delete_topic(self) -> str | None:
        holders: dict[str, list[GroupState]] = {}
        for group in self.groups:
            for topic in group.topics:
                holders.setdefault(topic, []).append(group)
        candidates = sorted(holders)
        if not candidates:
            return None
        topic = self.rng.choice(candidates)
        groups = holders[topic]
        cluster = self.rng.choice(sorted({g.cluster for g in groups})) if self.rng.random() < 0.5 else None
        for group in groups:  # mqadmin deleteTopic: first the brokers (data version moves on) ...
            if cluster is None or group.cluster == cluster:
                del group.topics[topic]
                group.next_version()

        def cmd() -> RemotingCommand:  # one per server: each client sets its own opaque on it
            return simple_request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": topic, "clusterName": cluster})

        # ... then every name server (216)
        await asyncio.gather(*(self._admin(i, cmd()) for i in range(len(self.options.servers))))
        return f"{topic} deleted on its brokers and every server" + (f" for cluster {cluster}" if cluster else "")

    async def _fault_ns_restart(self) -> str | None:
        return "skipped: a live fleet cannot restart a name-server process"

    async def _fault_read_lt_write(self) -> str | None:
        found = [a for a in self.anomalies if a.kind == "read_lt_write"]
        if not found:
            return None

        def queues(anomaly: Anomaly) -> str:
            return ", ".join(f"{b} read {r} < write {w}" for b, (r, w) in anomaly.detail["queue_nums"].items())

        return "in the layout: " + ", ".join(f"{a.subject} ({queues(a)})" for a in found)

    async def _fault_queue_skew(self) -> str | None:
        found = [a for a in self.anomalies if a.kind == "queue_skew"]
        if not found:
            return None
        return "in the layout: " + ", ".join(
            f"{a.subject} ({a.detail['scaled_up']} scaled up; cv {a.detail['cv']:.2f}, "
            f"max/mean {a.detail['max_over_mean']:.2f})"
            for a in found
        )

    # fault kind -> what injecting it does (returns the announcement, None when skipped)
    _STRIKES: dict[str, Callable[[Fleet], Awaitable[str | None]]] = {
        "expire": _fault_expire,
        "shutdown": _fault_shutdown,
        "lost_unregister": _fault_lost_unregister,
        "partition": _fault_partition,
        "promotion": _fault_promotion,
        "topic_change": _fault_topic_change,
        "wipe": _fault_wipe,
        "delete_topic": _fault_delete_topic,
        "ns_restart": _fault_ns_restart,
        "read_lt_write": _fault_read_lt_write,
        "queue_skew": _fault_queue_skew,
    }
