"""A live broker process as the fleet runs it: its connections, registrations and unregistration.

One :class:`BrokerAgent` per broker process of the layout, sharing its group's topic table and
DataVersion (:class:`GroupState`, as RocketMQ slaves copy their master's). Registration follows the
broker side of docs/nameserver-semantics.md (§4): REGISTER_BROKER in parallel to every name server
over one long-lived connection each, UNREGISTER_BROKER to every server on a clean stop.
"""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import Sequence

from nameserver.acl import Credentials
from nameserver.client import RemotingClient, RemotingError, register_broker_request, unregister_broker_request
from nameserver.codec import RemotingCommand
from nameserver.layout import BrokerGroup, BrokerMember
from nameserver.model import DataVersion, TopicConfig

REQUEST_TIMEOUT_S = 6.0  # 4.x broker's registration timeout (docs/nameserver-semantics.md §4)


class GroupState:
    """A broker group's topic table and data version, shared by its members (SlaveSynchronize)."""

    def __init__(self, layout_group: BrokerGroup, data_version: DataVersion) -> None:
        self.cluster = layout_group.cluster
        self.broker_name = layout_group.broker_name
        self.topics: dict[str, TopicConfig] = {t.topic: t for t in layout_group.topics}
        self.data_version = data_version
        self.members: list[BrokerAgent] = []
        self.busy = False  # a fault holds this group

    def next_version(self) -> DataVersion:
        """A topic change: the broker's DataVersion moves on (timestamp now, counter + 1)."""
        self.data_version = DataVersion(int(time.time() * 1000), self.data_version.counter + 1)
        return self.data_version


class BrokerAgent:
    """One broker process: a connection per server, registration, unregistration, faults."""

    def __init__(
        self,
        member: BrokerMember,
        group: GroupState,
        servers: Sequence[tuple[str, int]],
        *,
        compressed: bool,
        version: int,
        credentials: Credentials | None = None,
    ) -> None:
        self.addr, self.ha_addr = member.addr, member.ha_addr
        self.broker_id = member.broker_id
        self.group = group
        self.servers = list(servers)
        self.compressed = compressed
        self.version = version
        self.conns: list[RemotingClient | None] = [None] * len(servers)
        self.cut: set[int] = set()  # servers this broker can no longer reach (partition)
        self.alive = True  # False: dead or silent, sends nothing more
        self.errors = 0
        self.credentials = credentials  # signs every request when set (nameserver.acl)

    def describe(self) -> str:
        """``broker-001 (id 0) 10.0.1.1:10911``, for fault lines."""
        return f"{self.group.broker_name} (id {self.broker_id}) {self.addr}"

    def _register_request(self, topics: Sequence[TopicConfig] | None = None) -> RemotingCommand:
        g = self.group
        return register_broker_request(
            g.cluster,
            self.addr,
            g.broker_name,
            self.broker_id,
            self.ha_addr,
            g.data_version,
            topics if topics is not None else sorted(g.topics.values(), key=lambda t: t.topic),
            version=self.version,
            compressed=self.compressed,
        )

    async def _conn(self, i: int) -> RemotingClient:
        conn = self.conns[i]
        if conn is None or not conn.is_open:
            host, port = self.servers[i]
            conn = self.conns[i] = await RemotingClient.connect(host, port, REQUEST_TIMEOUT_S, self.credentials)
        return conn

    async def _send(self, i: int, cmd: RemotingCommand) -> RemotingCommand | None:
        try:
            conn = await self._conn(i)
            return await conn.request(cmd, REQUEST_TIMEOUT_S)
        except (TimeoutError, OSError, RemotingError) as exc:
            self.errors += 1
            print(
                f"fleet: {self.describe()} -> {self.servers[i][0]}:{self.servers[i][1]}: {exc}",
                file=sys.stderr,
                flush=True,
            )
            return None

    async def register_all(self, topics: Sequence[TopicConfig] | None = None) -> None:
        """REGISTER_BROKER to every reachable server in parallel (a new command per server)."""
        if not self.alive:
            return
        targets = [i for i in range(len(self.servers)) if i not in self.cut]
        await asyncio.gather(*(self._send(i, self._register_request(topics)) for i in targets))

    async def unregister_all(self, skip: int | None = None) -> None:
        """Clean shutdown: UNREGISTER_BROKER to every server (but ``skip``), then close those links."""
        self.alive = False
        g = self.group
        targets = [i for i in range(len(self.servers)) if i not in self.cut and i != skip]

        def cmd() -> RemotingCommand:  # one per server: each client sets its own opaque on it
            return unregister_broker_request(g.cluster, self.addr, g.broker_name, self.broker_id)

        await asyncio.gather(*(self._send(i, cmd()) for i in targets))
        await asyncio.gather(*(self._close(i) for i in targets))

    async def _close(self, i: int) -> None:
        conn, self.conns[i] = self.conns[i], None
        if conn is not None:
            await conn.close()

    def crash(self) -> None:
        """The process dies: the OS resets every connection (every server sees the close)."""
        self.alive = False
        for i, conn in enumerate(self.conns):
            if conn is not None:
                conn.abort()
            self.conns[i] = None

    async def close_all(self) -> None:
        """Close every connection still open (end of the run)."""
        await asyncio.gather(*(self._close(i) for i in range(len(self.conns))))
