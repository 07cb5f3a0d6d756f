"""The simulated brokers' own state: what each process would send, and over which connection.

Built from a :class:`nameserver.layout.FleetLayout`; mutable because faults change it (deaths,
promotions, topic changes). A broker caches its registration payload, so a periodic
re-registration costs one comparison until its group's topics, data version or its own id change.
"""

from __future__ import annotations

import random
from typing import Any, NamedTuple

from nameserver.layout import BrokerGroup, FleetLayout
from nameserver.model import MASTER_ID, DataVersion, TopicConfig, topics_digest
from nameserver.routes.manager import RequestContext

# Seeded base latency of one broker->server link, plus per-message jitter; both in ms.
LINK_DELAY_MS = (1, 8)
MESSAGE_JITTER_MS = 5
MAX_DELAY_MS = LINK_DELAY_MS[1] + MESSAGE_JITTER_MS

# How old a broker's topic config is at the start, for the initial data version's timestamp.
_DV_AGE_MS = (3_600_000, 30 * 86_400_000)


class Payload(NamedTuple):
    """One REGISTER_BROKER's content (request headers plus the topic wrapper)."""

    cluster: str
    broker_addr: str
    broker_name: str
    broker_id: int
    ha_addr: str
    data_version: DataVersion
    topics: tuple[TopicConfig, ...]
    digest: str
    data_version_json: dict[str, Any]  # data_version.to_json_obj(), built once per version


class Connection:
    """A broker's connection to one server run.

    Attributes:
        run: the server run it was accepted in; a restart makes it stale.
        last_arrival: when its latest message reaches the server (TCP keeps order).
    """

    __slots__ = ("run", "channel", "remote", "register_ctx", "unregister_ctx", "last_arrival")

    def __init__(self, run: int, channel: str, remote: str) -> None:
        self.run = run
        self.channel = channel
        self.remote = remote
        self.register_ctx = RequestContext(channel, remote, 103)  # REGISTER_BROKER
        self.unregister_ctx = RequestContext(channel, remote, 104)  # UNREGISTER_BROKER
        self.last_arrival = 0


class SimGroup:
    """A broker group: its members and the topic table + data version its master owns.

    Slaves copy the master's table and data version (RocketMQ's SlaveSynchronize), so they are
    kept once, here.
    """

    __slots__ = (
        "index",
        "cluster",
        "broker_name",
        "members",
        "topics",
        "topic_tuple",
        "digest",
        "data_version",
        "rev",
        "busy_until",
    )

    def __init__(self, index: int, layout_group: BrokerGroup, data_version: DataVersion) -> None:
        self.index = index
        self.cluster = layout_group.cluster
        self.broker_name = layout_group.broker_name
        self.members: list[SimBroker] = []
        self.topics = {t.topic: t for t in layout_group.topics}
        self.topic_tuple = layout_group.topics
        self.digest = layout_group.topics_digest
        self.data_version = data_version
        self.rev = 0  # bumped on every change of topics or data version
        self.busy_until = 0  # a fault holds the group until then (ms)

    def set_topics(self, topics: dict[str, TopicConfig], now: int) -> DataVersion:
        """Replace the topic table and move to the next data version (RocketMQ ``nextVersion``)."""
        self.topics = topics
        self.topic_tuple = tuple(topics[name] for name in sorted(topics))
        self.digest = topics_digest(self.topic_tuple)
        self.data_version = DataVersion(now, self.data_version.counter + 1)
        self.rev += 1
        return self.data_version

    def master(self) -> SimBroker | None:
        """The live member registering as id 0, if any."""
        for member in self.members:
            if member.alive and member.broker_id == MASTER_ID:
                return member
        return None

    def idle(self, now: int) -> bool:
        """No fault holds the group and every member is alive."""
        return self.busy_until <= now and all(m.alive for m in self.members)


class SimBroker:
    """One broker process: identity, liveness, one connection per name server."""

    __slots__ = (
        "group",
        "addr",
        "ha_addr",
        "host",
        "broker_id",
        "alive",
        "life",
        "conns",
        "cut",
        "link_delays",
        "next_port",
        "_payload",
        "_payload_rev",
        "_payload_id",
    )

    def __init__(self, group: SimGroup, broker_id: int, addr: str, ha_addr: str, link_delays: list[int]) -> None:
        self.group = group
        self.addr = addr
        self.ha_addr = ha_addr
        self.host = addr.rsplit(":", 1)[0]
        self.broker_id = broker_id
        self.alive = False
        self.life = 0  # bumped when the process dies: its pending periodic sends are void
        self.conns: list[Connection | None] = [None] * len(link_delays)
        self.cut = [False] * len(link_delays)  # partitioned away from that server
        self.link_delays = link_delays
        self.next_port = 40000  # ephemeral ports of its outgoing connections
        self._payload: Payload | None = None
        self._payload_rev = -1
        self._payload_id = -1

    def payload(self) -> Payload:
        """The full registration it sends now (cached until its group or id changes)."""
        group = self.group
        if self._payload_rev != group.rev or self._payload_id != self.broker_id:
            self._payload = Payload(
                group.cluster,
                self.addr,
                group.broker_name,
                self.broker_id,
                self.ha_addr,
                group.data_version,
                group.topic_tuple,
                group.digest,
                group.data_version.to_json_obj(),
            )
            self._payload_rev, self._payload_id = group.rev, self.broker_id
        return self._payload  # type: ignore[return-value]  # made above on first use (revision -1 matches none)

    def incremental_payload(self, topics: tuple[TopicConfig, ...]) -> Payload:
        """An incremental registration: only the changed topics, with the new data version."""
        group = self.group
        return Payload(
            group.cluster,
            self.addr,
            group.broker_name,
            self.broker_id,
            self.ha_addr,
            group.data_version,
            topics,
            topics_digest(topics),
            group.data_version.to_json_obj(),
        )

    def new_remote(self) -> str:
        """``host:port`` of a new outgoing connection."""
        self.next_port = self.next_port + 1 if self.next_port < 65535 else 40000
        return f"{self.host}:{self.next_port}"


def build_fleet(layout: FleetLayout, n_servers: int, start_ms: int, rng: random.Random) -> list[SimGroup]:
    """Runtime groups and brokers for ``layout``; link delays and initial data versions are seeded."""
    groups = []
    for index, layout_group in enumerate(layout.groups):
        age = rng.randint(*_DV_AGE_MS)
        group = SimGroup(index, layout_group, DataVersion(start_ms - age, rng.randint(1, 50)))
        for member in layout_group.members:
            delays = [rng.randint(*LINK_DELAY_MS) for _ in range(n_servers)]
            group.members.append(SimBroker(group, member.broker_id, member.addr, member.ha_addr, delays))
        groups.append(group)
    return groups
