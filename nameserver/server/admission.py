"""What the connections together may take: their number, their number per peer host, and the
bytes of unfinished frames buffered across all of them (docs/interfaces.md, Configuration).

Each connection may hold up to one frame of ``max_frame_bytes`` (16 MiB); without a bound across
connections, one client opening many connections and never finishing a frame makes the server
buffer all of them. Over ``max_buffered_bytes`` the connection holding the most is shed (closed
at once, its buffer dropped) until the total fits. Shed and refused connections are reported in
one warning line at most every ``WARNING_INTERVAL_S``, not one per connection.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from typing import Protocol

from common.config import NameServerConfig

log = logging.getLogger(__name__)

WARNING_INTERVAL_S = 10.0


class BufferingChannel(Protocol):
    """What the budget needs of a connection (``RemotingChannel``)."""

    buffered: int
    closing: bool

    def abort(self) -> None: ...


def peer_host(remote: str) -> str:
    """The host of a ``host:port`` peer address (IPv6 hosts keep their colons)."""
    return remote.rpartition(":")[0] or remote


class Admission:
    """Connection caps and the buffer budget of one server.

    Args:
        ns_id: the server id, for the warning line.
        config: ``max_connections``, ``max_connections_per_host``, ``max_buffered_bytes``.
    """

    def __init__(self, ns_id: str, config: NameServerConfig) -> None:
        self._ns_id = ns_id
        self._config = config
        self._per_host: dict[str, int] = {}
        self.buffered_bytes = 0
        self._shed = 0
        self._refused = 0
        self._last_warning = float("-inf")
        self._scheduled: asyncio.TimerHandle | None = None

    def refusal(self, open_count: int, host: str) -> str | None:
        """Why a new connection from ``host`` is refused (``connection_limit`` or
        ``host_limit``), or None when it is admitted (and counted for its host)."""
        if open_count >= self._config.max_connections:
            return "connection_limit"
        held = self._per_host.get(host, 0)
        if held >= self._config.max_connections_per_host:
            self._refused += 1
            self._note()
            return "host_limit"
        self._per_host[host] = held + 1
        return None

    def released(self, host: str, buffered: int) -> None:
        """An admitted connection closed holding ``buffered`` bytes."""
        self.buffered_bytes -= buffered
        held = self._per_host.get(host, 0) - 1
        if held > 0:
            self._per_host[host] = held
        else:
            self._per_host.pop(host, None)

    def buffered_changed(self, delta: int, channels: Iterable[BufferingChannel]) -> None:
        """A connection's buffered bytes changed by ``delta``; shed the largest holders while the
        total is over the budget."""
        self.buffered_bytes += delta
        if self.buffered_bytes <= self._config.max_buffered_bytes:
            return
        holders = sorted((c for c in channels if c.buffered > 0 and not c.closing), key=lambda c: -c.buffered)
        for victim in holders:
            if self.buffered_bytes <= self._config.max_buffered_bytes:
                break
            self.buffered_bytes -= victim.buffered
            victim.buffered = 0  # its close then releases nothing more
            victim.abort()
            self._shed += 1
        self._note()

    def _note(self) -> None:
        """Warn now, or once the interval since the last line has passed (counting meanwhile)."""
        if self._scheduled is not None:
            return
        wait = self._last_warning + WARNING_INTERVAL_S - time.monotonic()
        if wait <= 0:
            self._warn()
        else:
            self._scheduled = asyncio.get_running_loop().call_later(wait, self._warn)

    def _warn(self) -> None:
        self._scheduled = None
        if not (self._shed or self._refused):
            return
        self._last_warning = time.monotonic()
        log.warning(
            "name server %s: %d connections shed to keep unfinished frames under max_buffered_bytes (%d), "
            "%d refused over max_connections_per_host (%d), since the last such line",
            self._ns_id,
            self._shed,
            self._config.max_buffered_bytes,
            self._refused,
            self._config.max_connections_per_host,
        )
        self._shed = self._refused = 0
