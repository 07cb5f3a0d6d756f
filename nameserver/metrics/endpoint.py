"""The metrics endpoint: an asyncio HTTP/1.1 server that answers GET of one path, and nothing else.

:class:`EndpointThread` runs it on an event loop of its own, in a thread, so a scrape is answered
while the name server's or the collector's loop is busy (a collector's loop is at full load
through a round of 10,000 topics), and a scrape never waits for a round; the render function is
then called on that thread and reads only what is safe to read from it. What one scrape may cost
is bounded, and a slow or hostile client can hold nothing but its own connection:

* the body is rendered at most once per ``min_render_interval_s`` and shared by every scrape in
  that time (families are capped, :mod:`~nameserver.metrics.exposition`), so a scrape storm renders
  once;
* a request head over :data:`MAX_HEAD_BYTES` or not complete within ``head_timeout_s`` ends the
  connection; a body is never read (the answer closes the connection);
* at most ``max_connections`` connections at once, a new one beyond it is closed at once;
* a client that does not read its answer within ``write_timeout_s`` is cut off; the bytes wait in
  its socket's buffer, not in the loop.

Only ``GET <path>`` (a query string is ignored) is answered 200; another path gets 404, another
method on the path 405 with ``Allow: GET``; a head that is not HTTP/1.x gets 400.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

from nameserver.metrics.exposition import CONTENT_TYPE

log = logging.getLogger(__name__)

MAX_HEAD_BYTES = 8192
DEFAULT_PATH = "/metrics"


def parse_listen(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[v6]:PORT`` too) to ``(host, port)``.

    Raises:
        ValueError: not HOST:PORT with a port in 0..65535.
    """
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 0 <= int(port) <= 65535:
        raise ValueError(f"must be HOST:PORT with a port in 0..65535, not {text!r}")
    return host, int(port)


def listen_address(text: str) -> str:
    """An argparse type for ``--metrics-listen``: ``HOST:PORT`` with a port in 0..65535."""
    try:
        parse_listen(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


class MetricsEndpoint:
    """Serves ``render()``'s bytes at ``GET path`` on ``listen``.

    Args:
        listen: ``HOST:PORT`` (port 0 picks a free one).
        render: the exposition body now; called on the event loop, at most once per
            ``min_render_interval_s``.
        path: the one path answered.
        min_render_interval_s: a body this recent is served again instead of rendering anew.
        max_connections: connections served at once.
        head_timeout_s: the request head must arrive within this.
        write_timeout_s: the answer must be taken by the client within this.

    Attributes:
        host, port: where it listens, after :meth:`start`.
        renders: bodies rendered so far; scrapes: answers of 200 sent.
    """

    def __init__(
        self,
        listen: str,
        render: Callable[[], bytes],
        path: str = DEFAULT_PATH,
        min_render_interval_s: float = 1.0,
        max_connections: int = 64,
        head_timeout_s: float = 5.0,
        write_timeout_s: float = 10.0,
    ) -> None:
        self.host, self.port = parse_listen(listen)
        self._render = render
        self._path = path
        self._min_interval = min_render_interval_s
        self._max_connections = max_connections
        self._head_timeout = head_timeout_s
        self._write_timeout = write_timeout_s
        self._server: asyncio.base_events.Server | None = None
        self._body: bytes | None = None
        self._body_at = float("-inf")
        self._active: set[asyncio.Task[Any]] = set()
        self.renders = 0
        self.scrapes = 0

    async def start(self) -> tuple[str, int]:
        """Listen; returns the bound ``(host, port)``.

        Raises:
            OSError: the address cannot be bound.
        """
        self._server = await asyncio.start_server(
            self._connection, self.host, self.port, limit=MAX_HEAD_BYTES, reuse_address=True
        )
        sock = self._server.sockets[0].getsockname()
        self.host, self.port = sock[0], sock[1]
        return self.host, self.port

    async def close(self) -> None:
        """Stop listening and cut the connections still open."""
        if self._server is not None:
            self._server.close()
        for task in list(self._active):
            task.cancel()
        await asyncio.gather(*self._active, return_exceptions=True)
        if self._server is not None:
            with contextlib.suppress(Exception):
                await asyncio.wait_for(self._server.wait_closed(), 1.0)

    def body(self) -> bytes:
        """The current body: rendered again only when the last one is older than the interval."""
        now = time.monotonic()
        if self._body is None or now - self._body_at >= self._min_interval:
            self._body, self._body_at = self._render(), now
            self.renders += 1
        return self._body

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if len(self._active) >= self._max_connections:
            writer.transport.abort()
            return
        task = asyncio.current_task()
        assert task is not None  # a connection is served by a task of its own
        self._active.add(task)
        try:
            await self._answer(reader, writer)
        except (TimeoutError, ConnectionError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass
        except Exception:  # a scrape never takes the process down
            log.exception("metrics endpoint: answering a scrape failed")
        finally:
            self._active.discard(task)
            writer.transport.abort()

    async def _answer(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), self._head_timeout)
        except (asyncio.LimitOverrunError, ValueError):
            await self._send(writer, 431, b"request head too large\n")
            return
        parts = head.split(b"\r\n", 1)[0].split(b" ")
        if len(parts) != 3 or not parts[2].startswith(b"HTTP/1."):
            await self._send(writer, 400, b"bad request\n")
            return
        method, target = parts[0], parts[1].split(b"?", 1)[0]
        if target != self._path.encode():
            await self._send(writer, 404, b"not found: metrics are at " + self._path.encode() + b"\n")
        elif method != b"GET":
            await self._send(writer, 405, b"only GET\n", extra=b"Allow: GET\r\n")
        else:
            self.scrapes += 1
            await self._send(writer, 200, self.body(), content_type=CONTENT_TYPE.encode())

    async def _send(
        self,
        writer: asyncio.StreamWriter,
        status: int,
        body: bytes,
        extra: bytes = b"",
        content_type: bytes = b"text/plain; charset=utf-8",
    ) -> None:
        reason = {
            200: b"OK",
            400: b"Bad Request",
            404: b"Not Found",
            405: b"Method Not Allowed",
            431: b"Request Header Fields Too Large",
        }[status]
        writer.write(
            b"HTTP/1.1 %d %s\r\nContent-Type: %s\r\nContent-Length: %d\r\nConnection: close\r\n%s\r\n"
            % (status, reason, content_type, len(body), extra)
        )
        writer.write(body)
        await asyncio.wait_for(writer.drain(), self._write_timeout)


class EndpointThread:
    """A :class:`MetricsEndpoint` served by an event loop on a daemon thread of its own.

    Args:
        endpoint: the endpoint (not started).
    """

    def __init__(self, endpoint: MetricsEndpoint) -> None:
        self.endpoint = endpoint
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="nsaudit-metrics", daemon=True)

    def start(self) -> tuple[str, int]:
        """Start the thread and listen; returns the bound ``(host, port)``.

        Raises:
            OSError: the address cannot be bound (the thread is stopped again).
        """
        self._thread.start()
        try:
            return asyncio.run_coroutine_threadsafe(self.endpoint.start(), self._loop).result(30)
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Close the endpoint, stop the loop and wait for the thread."""
        if self._thread.is_alive():
            with contextlib.suppress(Exception):
                asyncio.run_coroutine_threadsafe(self.endpoint.close(), self._loop).result(5)
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(5)
        if not self._loop.is_running():
            self._loop.close()
