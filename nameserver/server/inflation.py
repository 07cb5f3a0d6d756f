"""Inflating compressed REGISTER_BROKER bodies off the event loop.

A compressed body of a few hundred KB may inflate to ``[nameserver] max_register_body_bytes``
(16 MiB by default) before it is refused, tens of milliseconds of zlib during which no lookup
would be answered. So a compressed registration the decoded-body cache does not hold, and whose
topic count (read from the head of its content, microseconds) is within the cap, is inflated, and
its CRC computed, on a worker thread while its connection waits, its later frames unread, and
the other connections are served; then it is handled as usual, in order, with both ready
(:attr:`RegisterBodyCache.prepared`). The route tables are still touched only on the loop, in the
request's critical section (docs/nameserver-semantics.md A7).

The worker shares the GIL with the loop. zlib releases it while it inflates, and the content comes
in small pieces (:func:`~nameserver.codec.register.compressed.inflate_chunks`), so the worker holds
it only briefly between pieces. But CPython hands the GIL back to a thread that asks for it again
at once: the loop thread, woken when the worker lets go, is slower to run than the worker is to
call zlib again, and may lose the GIL to it piece after piece for the whole inflation. So the
worker sleeps a moment every :data:`GIL_YIELD_EVERY` pieces, long enough for a waiting loop to
take the GIL.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Generic, Protocol, TypeVar

from nameserver.codec import (
    RegisterLimits,
    RegisterTooLarge,
    RemotingCommand,
    RequestCode,
    Version,
    body_crc32,
    check_topic_head,
    inflate_chunks,
    parse_bool,
)
from nameserver.server.bodycache import PreparedBody, RegisterBodyCache

# zlib inflates at most ~1,032 bytes per byte, so a smaller body inflates to about 1 MiB at most,
# a few milliseconds: not worth a thread hop.
OFF_LOOP_BYTES = 1024
# The worker's pause for the loop (module docstring): after every 8 pieces (256 KiB of content),
# 0.1 ms, longer than a woken thread takes to be scheduled.
GIL_YIELD_EVERY = 8
GIL_YIELD_S = 0.0001
_REGISTER_BROKER = int(RequestCode.REGISTER_BROKER)
_V3_0_11 = int(Version.V3_0_11)


class HeldChannel(Protocol):
    """A connection whose frames wait while one of its requests is prepared (``RemotingChannel``)."""

    closing: bool

    def hold(self) -> None: ...

    def release(self) -> None: ...


_C = TypeVar("_C", bound=HeldChannel)


def prepare(body: bytes, limits: RegisterLimits) -> PreparedBody:
    """A compressed body's CRC and content or refusal (run on the worker thread; zlib's CRC, like
    its inflation, releases the GIL)."""
    return PreparedBody(body_crc32(body), inflate_outcome(body, limits))


def inflate_outcome(body: bytes, limits: RegisterLimits) -> bytes | Exception:
    """The content of a compressed body, or the refusal it earns (run on the worker thread)."""
    pieces: list[bytes] = []
    try:
        for piece in inflate_chunks(body, limits):
            pieces.append(piece)
            if len(pieces) % GIL_YIELD_EVERY == 0:
                time.sleep(GIL_YIELD_S)  # let the loop take the GIL (module docstring)
        return b"".join(pieces)
    except Exception as exc:  # noqa: BLE001 - handed to the request's own handling
        # without its traceback, which would keep this frame, and the content inflated so far,
        # alive until the garbage collector found the cycle the loop's handling makes of it
        pieces.clear()
        return exc.with_traceback(None)


class RegisterInflation(Generic[_C]):
    """The worker thread and the requests waiting for it.

    Args:
        bodies: the processor's decoded-body cache (its limits, its hits, where content goes).
        handle: handles a request once its body is inflated (the controller's ``handle_command``).
    """

    def __init__(self, bodies: RegisterBodyCache, handle: Callable[[_C, RemotingCommand], None]) -> None:
        self._bodies = bodies
        self._handle = handle
        # one thread: at most one body inflates at a time, the loop keeps the other core
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="register-inflate")

    def wants(self, cmd: RemotingCommand) -> bool:
        """Whether ``cmd`` is a compressed registration worth inflating off the loop."""
        body = cmd.body
        if (
            cmd.code != _REGISTER_BROKER
            or body is None
            or len(body) < OFF_LOOP_BYTES
            or cmd.version < _V3_0_11
            or self._bodies.prepared is not None
        ):  # prepared: it is this request, back from the worker
            return False
        ext = cmd.ext_fields or {}
        if not parse_bool(ext.get("compressed")) or self._bodies.holds(body, version=cmd.version, compressed=True):
            return False
        return not self._over_topic_cap(body)  # if over, refused on the loop (RegisterBodyCache.decode)

    def refused_by_head(self, head: RemotingCommand) -> bool:
        """Whether ``head`` (a request's header and the start of its body) is a compressed
        registration over the topic cap, which the processor refuses from those bytes alone
        (``RegisterBodyCache.decode``), the same answer and event whatever follows them."""
        body = head.body
        if head.code != _REGISTER_BROKER or not body or head.version < _V3_0_11:
            return False
        return parse_bool((head.ext_fields or {}).get("compressed")) and self._over_topic_cap(body)

    def _over_topic_cap(self, body: bytes) -> bool:
        try:
            check_topic_head(body, self._bodies.limits)
        except RegisterTooLarge:
            return True
        return False

    def defer(self, channel: _C, cmd: RemotingCommand) -> None:
        """Hold ``channel``, inflate ``cmd``'s body on the worker, then handle it and release."""
        body = cmd.body
        assert body is not None  # wants() takes only a request with a body
        channel.hold()
        loop = asyncio.get_running_loop()
        future = loop.run_in_executor(self._pool, prepare, body, self._bodies.limits)
        future.add_done_callback(lambda done: self._ready(channel, cmd, done))

    def _ready(self, channel: _C, cmd: RemotingCommand, done: asyncio.Future[PreparedBody]) -> None:
        try:
            if done.cancelled() or channel.closing:
                return  # the connection went: so does its request
            self._bodies.prepared = done.result()
            try:
                self._handle(channel, cmd)
            finally:
                self._bodies.prepared = None
        finally:
            channel.release()

    def close(self) -> None:
        """Stop the worker (after the server's last request)."""
        self._pool.shutdown(wait=False, cancel_futures=True)
