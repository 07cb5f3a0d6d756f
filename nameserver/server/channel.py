"""One client connection of the name server: an ``asyncio.BufferedProtocol`` around a ``FrameDecoder``.

The protocol object only moves bytes: it feeds the decoder, hands every decoded command to the
controller (which runs the pure processor and appends the events) and writes what the controller
answers. It also keeps the per-connection facts the controller's housekeeping needs for its
defences: when the connection last moved bytes (idle close, docs/nameserver-semantics.md A4), since
when it has been in the middle of a frame (slowloris close), and whether its peer stopped reading
(back-pressure). A large frame the controller refuses from its start is answered then, and the
rest of it is read but not kept (docs/remoting-protocol.md §8.1a).
"""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any, Protocol

from nameserver.codec import (
    HEAD_INPUT_BYTES,
    MAX_FRAME_LENGTH,
    SERVER_VERSION,
    FrameDecoder,
    HeaderMemo,
    LanguageCode,
    MalformedFrame,
    RemotingCommand,
    RequestKey,
    SerializeType,
    Version,
    encode_frame,
)
from nameserver.server.processor import ConnectionContext

# Transport write-buffer marks: above HIGH the peer is reading too slowly, so we stop reading its
# requests (it cannot make us buffer more answers); at HARD_LIMIT it is dropped outright.
WRITE_BUFFER_HIGH = 4 * 1024 * 1024
WRITE_BUFFER_LOW = 1 * 1024 * 1024
WRITE_BUFFER_HARD_LIMIT = 64 * 1024 * 1024
# Answers of one turn are written together, but never more than this many bytes at once.
BATCH_FLUSH_BYTES = 256 * 1024
MAX_FRAMES_PER_TURN = 256
MAX_TURN_S = 0.005
# The receive buffer: asyncio's own read size. One per thread (one per event loop in practice):
# asyncio calls get_buffer, recv_into and buffer_updated back to back in one callback, so the
# connections of a loop never use it at the same time.
RECV_BUFFER_BYTES = 256 * 1024
# A frame at least this long whose start the server can refuse (ChannelOwner.refuses_unread) is
# answered once its header and EARLY_BODY_BYTES of its body are in, and the rest of it is read
# but not kept: a smaller one is whole after a read or two anyway. EARLY_BODY_BYTES is what
# the topic cap's check reads of a compressed body (nameserver.codec HEAD_INPUT_BYTES).
EARLY_FRAME_BYTES = 64 * 1024
EARLY_BODY_BYTES = HEAD_INPUT_BYTES
_recv_buffers = threading.local()


def _recv_buffer() -> memoryview:
    view = getattr(_recv_buffers, "view", None)
    if view is None:
        view = _recv_buffers.view = memoryview(bytearray(RECV_BUFFER_BYTES))
    return view


class ChannelOwner(Protocol):
    """What a connection needs of its server (``NameServerController``)."""

    stopping: bool

    def channel_opened(self, channel: RemotingChannel, remote: str) -> None: ...

    def channel_closed(self, channel: RemotingChannel) -> None: ...

    def known_lookups(self) -> dict[RequestKey, tuple[Any, ...]] | None: ...

    def known_answered(self, count: int) -> None: ...

    def handle_command(self, channel: RemotingChannel, cmd: RemotingCommand, key: RequestKey | None = None) -> None: ...

    def malformed_frame(self, channel: RemotingChannel, exc: MalformedFrame) -> None: ...

    def drop_slow_reader(self, channel: RemotingChannel) -> None: ...

    def buffered_changed(self, channel: RemotingChannel, delta: int) -> None: ...

    def refuses_unread(self, head: RemotingCommand) -> bool: ...


class RemotingChannel(asyncio.BufferedProtocol):
    """A connection (RocketMQ/Netty: a channel) to one peer.

    Fairness: one turn handles at most ``MAX_FRAMES_PER_TURN`` frames or ``MAX_TURN_S`` of work, then
    yields the event loop to the other connections and carries on in a later turn; while frames wait
    like this, or while the peer does not read our answers, the socket is not read, so TCP pushes
    back on the sender instead of our memory filling up.

    Reads: a buffered protocol, so asyncio reads into one receive buffer per thread
    (``recv_into``) and the decoder copies the bytes from there. A plain ``Protocol`` is handed a
    fresh ``bytes`` per read from ``recv(256 KiB)``, an allocation glibc serves with ``mmap``: page
    faults on every read, which cost more than decoding and handling a route lookup.

    Args:
        controller: the server this connection belongs to.
        max_frame_bytes: the largest frame accepted.
        header_memo: JSON headers decoded before, shared by the server's connections.

    Attributes:
        ctx: channel id and peer address, as logged in events.
        admitted: False for a connection refused by the connection cap (it logs no close).
        carried_registration: a REGISTER_BROKER came over it, so its close may remove brokers
            and is logged as ``channel_close``.
        last_activity: ``time.monotonic()`` of the last byte read or written.
        partial_since: monotonic time since which a frame has been incomplete, or None.
        paused_since: monotonic time since which the peer has not drained our answers, or None.
        buffered: bytes of an unfinished frame held, as last reported to the controller (which
            bounds the total across connections).
    """

    def __init__(self, controller: ChannelOwner, max_frame_bytes: int, header_memo: HeaderMemo | None = None) -> None:
        self._controller = controller
        self._decoder = FrameDecoder(max_frame_bytes, header_memo)
        self.transport: asyncio.Transport | None = None
        self.ctx = ConnectionContext("", "")
        self.admitted = False
        self.carried_registration = False
        self.closing = False
        self.last_activity = time.monotonic()
        self.partial_since: float | None = None
        self.paused_since: float | None = None
        self.buffered = 0
        self._reading = True
        self._backlog = False  # complete frames wait for a later turn
        self._held = False  # a request is being prepared off the loop: the later frames wait
        self._batch: list[bytes] | None = None
        self._batch_bytes = 0
        self._recv = _recv_buffer()

    # ------------------------------------------------------------------ asyncio callbacks

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        """Register with the controller, which may refuse the connection (cap)."""
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        peer = transport.get_extra_info("peername")
        remote = f"{peer[0]}:{peer[1]}" if isinstance(peer, tuple) and len(peer) >= 2 else str(peer)
        transport.set_write_buffer_limits(high=WRITE_BUFFER_HIGH, low=WRITE_BUFFER_LOW)
        self._controller.channel_opened(self, remote)

    def get_buffer(self, sizehint: int) -> memoryview:
        """Where asyncio reads the socket into: the thread's receive buffer (module docstring)."""
        return self._recv

    def buffer_updated(self, nbytes: int) -> None:
        """asyncio read ``nbytes`` into the receive buffer: the decoder copies them at once.

        ``data_received`` of these bytes, inlined: this runs on every read.
        """
        if self.closing:
            return
        self.last_activity = now = time.monotonic()
        try:
            self._decoder.feed(self._recv[:nbytes])
        except MalformedFrame as exc:  # only after an earlier failure; the connection is going
            self._controller.malformed_frame(self, exc)
            return
        if not self._backlog:
            self._turn(now)

    def data_received(self, data: bytes | memoryview) -> None:
        """Buffer the bytes and handle the complete frames (see the module docstring)."""
        if self.closing:
            return
        self.last_activity = now = time.monotonic()
        try:
            self._decoder.feed(data)
        except MalformedFrame as exc:  # only after an earlier failure; the connection is going
            self._controller.malformed_frame(self, exc)
            return
        if not self._backlog:
            self._turn(now)

    def connection_lost(self, exc: Exception | None) -> None:
        """Hand the close to the controller (docs/nameserver-semantics.md §2.4)."""
        self.closing = True
        self._controller.channel_closed(self)

    def pause_writing(self) -> None:
        """The peer is not reading our answers: stop reading its requests until it catches up."""
        self.paused_since = time.monotonic()
        self._update_reading()

    def resume_writing(self) -> None:
        """The peer drained our answers below the low-water mark: carry on."""
        self.paused_since = None
        self._update_reading()
        if self._backlog and not self.closing:
            asyncio.get_running_loop().call_soon(self._turn)

    # ------------------------------------------------------------------ processing

    def _turn(self, started: float | None = None) -> None:
        """Handle complete frames until none is left, the turn's budget is spent or the peer
        stops reading; write the turn's answers together (one syscall, not one per answer).
        ``started``: ``time.monotonic()`` if the caller just read it."""
        if self.closing or self._held:
            return  # held: release() starts the next turn
        decoder, controller = self._decoder, self._controller
        if started is None:
            started = time.monotonic()
        handled = 0
        more = False
        self._batch, self._batch_bytes = [], 0
        # Lookups seen before are answered from their bytes, many per call (a pipelining client's
        # read holds many); the rest go through the controller one command at a time, after each
        # of which the known answers are asked for again (a command may change the tables or
        # queue its answer behind an fsync, which later answers must not overtake).
        known = controller.known_lookups()
        try:
            while not self.closing and self.paused_since is None:
                if handled >= MAX_FRAMES_PER_TURN or (handled and time.monotonic() - started > MAX_TURN_S):
                    more = True  # yield to the other connections
                    break
                if known is not None:
                    count, added = decoder.answer_known(
                        known, self._batch, MAX_FRAMES_PER_TURN - handled, BATCH_FLUSH_BYTES - self._batch_bytes
                    )
                    if count:
                        controller.known_answered(count)
                        handled += count
                        self._batch_bytes += added
                        if self._batch_bytes >= BATCH_FLUSH_BYTES:
                            self._flush()  # may pause writing, which ends the turn
                        if not decoder.buffered:
                            break  # the read is answered (the usual end of a pipelining client's read)
                        continue
                cmd = decoder.next_command()
                if cmd is None:
                    # a large frame refused from its start: answered now, its rest read unkept
                    cmd = decoder.frame_head(EARLY_FRAME_BYTES, EARLY_BODY_BYTES)
                    if cmd is None or not controller.refuses_unread(cmd):
                        break
                    decoder.skip_frame()
                handled += 1
                controller.handle_command(self, cmd, decoder.last_key)
                if self._held:
                    more = True  # the frames after it wait for release()
                    break
                known = controller.known_lookups()
            else:
                more = not self.closing  # paused: resume_writing restarts the turns
        except MalformedFrame as exc:
            self._flush()
            controller.malformed_frame(self, exc)
            return
        finally:
            batch, self._batch = self._batch, None
        if batch:
            self.write_many(batch)
        if not self.closing:
            self._end_turn(started, handled, more)

    def _end_turn(self, started: float, handled: int, more: bool) -> None:
        """After a turn: schedule the next one if frames wait, run the slowloris clock, and start
        or stop reading the socket."""
        decoder, controller = self._decoder, self._controller
        self._backlog = more
        if more and self.paused_since is None and not self._held:
            asyncio.get_running_loop().call_soon(self._turn)
        held = decoder.buffered
        if not more and decoder.in_frame:
            # A frame in progress: the slowloris clock starts now, or keeps running if no frame
            # completed since it started.
            if handled or self.partial_since is None:
                self.partial_since = started
        else:
            self.partial_since = None
        if held != self.buffered:
            delta, self.buffered = held - self.buffered, held
            controller.buffered_changed(self, delta)  # may shed this very connection
            if self.closing:
                return
        if self._reading == (more or self.paused_since is not None or controller.stopping):
            self._update_reading()  # reading must start or stop

    def _flush(self) -> None:
        batch, self._batch, self._batch_bytes = self._batch, [], 0
        if batch:
            self.write_many(batch)

    # ------------------------------------------------------------------ controller's side

    def write(self, data: bytes) -> None:
        """Send one encoded frame (batched while a turn is running; a batch holds frames or
        pieces of frames, and is written joined)."""
        if self._batch is None:
            self.write_many([data])
            return
        self._batch.append(data)
        self._batch_bytes += len(data)
        if self._batch_bytes >= BATCH_FLUSH_BYTES:
            self._flush()  # may pause writing, which ends the turn

    def write_many(self, frames: list[bytes]) -> None:
        """Send frames in one write; drop the peer if it lets our answers pile up past the hard limit."""
        transport = self.transport
        if self.closing or transport is None or transport.is_closing():
            return
        transport.write(frames[0] if len(frames) == 1 else b"".join(frames))
        self.last_activity = time.monotonic()
        if transport.get_write_buffer_size() > WRITE_BUFFER_HARD_LIMIT:
            self._controller.drop_slow_reader(self)

    def hold(self) -> None:
        """The request just handed over is prepared off the loop: handle nothing more until
        :meth:`release` (the socket is not read meanwhile)."""
        self._held = True

    def release(self) -> None:
        """The held request is done: carry on with the frames after it."""
        self._held = False
        if not self.closing:
            asyncio.get_running_loop().call_soon(self._turn)

    def stop_reading(self) -> None:
        """Stop reading requests (shutdown: nothing new gets in; what was read is still handled)."""
        self._update_reading()

    @property
    def has_backlog(self) -> bool:
        """Complete frames received but not handled yet, or a request being prepared."""
        return (self._backlog or self._held) and not self.closing

    def abort(self) -> None:
        """Close now, discarding unsent bytes (malformed input, refused or stuck peers)."""
        self.closing = True
        if self.transport is not None:
            self.transport.abort()

    def close(self) -> None:
        """Close after the unsent bytes are written (shutdown)."""
        self.closing = True
        if self.transport is not None:
            self.transport.close()

    @property
    def write_buffer_size(self) -> int:
        """Bytes written but not yet taken by the kernel."""
        return self.transport.get_write_buffer_size() if self.transport is not None else 0

    def _update_reading(self) -> None:
        """Read the socket only when nothing waits: no backlog, a reading peer, no shutdown."""
        transport = self.transport
        if transport is None or transport.is_closing():
            return
        want = not (self._backlog or self.paused_since is not None or self._controller.stopping)
        if want != self._reading:
            self._reading = want
            if want:
                transport.resume_reading()
            else:
                transport.pause_reading()


_SUCCESS_HEADS = {
    None: b'{"code":0,"flag":1,"language":"JAVA","opaque":',
    0: b'{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":',
}
# by the answer's version: the release profile's (nameserver.server.profile)
_SUCCESS_TAILS = {
    int(v): b',"serializeTypeCurrentRPC":"JSON","version":%d}' % v for v in (SERVER_VERSION, Version.V5_3_3)
}
# plain ints: an enum member costs a class attribute lookup on every use
_JSON, _JAVA = int(SerializeType.JSON), int(LanguageCode.JAVA)


def encode_response(cmd: RemotingCommand) -> bytes:
    """``encode_frame(cmd)``, with a shortcut for the commonest answers: a JSON SUCCESS without
    remark and with no or empty extFields (route lookups, registrations), whose header differs
    only in ``opaque``."""
    ext = cmd.ext_fields
    if (
        cmd.serialize_type == _JSON
        and cmd.code == 0
        and cmd.remark is None
        and (ext is None or not ext)
        and cmd.flag == 1
        and cmd.version in _SUCCESS_TAILS
        and cmd.language == _JAVA
        and -(2**31) <= cmd.opaque < 2**31
    ):
        header = b"%s%d%s" % (_SUCCESS_HEADS[None if ext is None else 0], cmd.opaque, _SUCCESS_TAILS[cmd.version])
        body = cmd.body or b""
        if 4 + len(header) + len(body) > MAX_FRAME_LENGTH:
            return encode_frame(cmd)  # raises: over 16 MiB (docs/remoting-protocol.md §2)
        return b"".join(
            ((4 + len(header) + len(body)).to_bytes(4, "big"), len(header).to_bytes(4, "big"), header, body)
        )
    return encode_frame(cmd)
