"""The controller's connection defences: admitting connections (caps, buffer budget), cutting
off the ones that misbehave (malformed frames, slowloris, slow readers), and refusing a large
frame from its start.

A mixin of :class:`nameserver.server.controller.NameServerController`: it works on the
controller's connections and logs through its journal. The events it writes change no table.
"""

from __future__ import annotations

from collections.abc import Callable

from common.config import NameServerConfig
from nameserver.acl import AccessController
from nameserver.codec import MalformedFrame, RemotingCommand
from nameserver.eventlog.writer import EventLogError
from nameserver.routes.manager import Event
from nameserver.server.admission import Admission, peer_host
from nameserver.server.channel import RemotingChannel
from nameserver.server.inflation import RegisterInflation
from nameserver.server.journal import Journal
from nameserver.server.processor import ConnectionContext, connection_event, malformed_frame_event


class ConnectionDefences:
    """Admission and the cutting-off of misbehaving connections (see the module docstring)."""

    access: AccessController | None
    config: NameServerConfig
    stopping: bool
    _admission: Admission
    _channels: dict[str, RemotingChannel]
    _clock: Callable[[], int]
    _failure: BaseException | None
    _inflation: RegisterInflation[RemotingChannel] | None
    _journal: Journal
    _log_closed: bool
    _next_channel: int

    def channel_opened(self, channel: RemotingChannel, remote: str) -> None:
        """Admit a new connection, or refuse it beyond ``max_connections`` (logged as
        ``rejected`` connection_limit) or ``max_connections_per_host`` (a rate-limited warning)."""
        self._next_channel += 1
        channel.ctx = ConnectionContext(f"c{self._next_channel}", remote)
        if self.stopping or self._failure is not None:
            channel.abort()
            return
        refusal = self._admission.refusal(len(self._channels), peer_host(remote))
        if refusal is not None:
            if refusal == "connection_limit":
                self._log_only(
                    connection_event(
                        self._clock(), channel.ctx, "connection_limit", max_connections=self.config.max_connections
                    )
                )
            channel.abort()
            return
        channel.admitted = True
        self._channels[channel.ctx.channel] = channel

    def refuses_unread(self, head: RemotingCommand) -> bool:
        """Whether the request of which ``head`` holds the header and the first bytes of the body
        is refused whatever the rest says: a compressed registration over the topic cap
        (docs/remoting-protocol.md §8.1a). Not under access control, whose signature covers the
        whole body."""
        inflation = self._inflation
        return self.access is None and inflation is not None and inflation.refused_by_head(head)

    def forget_channel(self, channel: RemotingChannel) -> bool:
        """An admitted connection ended: release its place and its buffered bytes.

        Returns:
            False when it was never admitted (nothing to do for its close).
        """
        if not channel.admitted:
            return False
        channel.admitted = False
        self._channels.pop(channel.ctx.channel, None)
        self._admission.released(peer_host(channel.ctx.remote), channel.buffered)
        return True

    def buffered_changed(self, channel: RemotingChannel, delta: int) -> None:
        """A connection now buffers ``delta`` more bytes of an unfinished frame (may be negative)."""
        if channel.admitted:
            self._admission.buffered_changed(delta, self._channels.values())

    def malformed_frame(self, channel: RemotingChannel, exc: MalformedFrame) -> None:
        """Log ``rejected`` malformed_frame and close this connection only
        (docs/remoting-protocol.md §9.1)."""
        self._log_only(malformed_frame_event(self._clock(), channel.ctx, exc))
        channel.abort()

    def drop_slow_reader(self, channel: RemotingChannel) -> None:
        """A peer that stopped reading let our answers pile up: cut it off, others go on."""
        self._log_only(
            connection_event(self._clock(), channel.ctx, "slow_reader", write_buffer_bytes=channel.write_buffer_size)
        )
        channel.abort()

    def _log_only(self, event: Event) -> None:
        """Append an event that changes no table (refusals of connections and frames)."""
        if self._log_closed or self._failure is not None:
            return
        try:
            self._journal.append_quietly(event)
        except EventLogError:
            pass

    def close_stuck_channel(self, channel: RemotingChannel, reason: str) -> None:
        """Close a connection the watchdog found stuck (``frame_timeout``, ``slow_reader``, ``idle``).

        An idle close is logged only as the ``channel_close`` every close gets (A4).
        """
        if reason == "slow_reader":
            self.drop_slow_reader(channel)
            return
        if reason == "frame_timeout":
            self._log_only(
                connection_event(self._clock(), channel.ctx, reason, frame_timeout_ms=self.config.frame_timeout_ms)
            )
        channel.abort()

    def open_channels(self) -> list[RemotingChannel]:
        """The admitted connections, in the order they opened."""
        return list(self._channels.values())

    @property
    def connection_count(self) -> int:
        """Admitted connections currently open."""
        return len(self._channels)
