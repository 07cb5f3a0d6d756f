"""Group commit for asyncio servers: many waiters, one fsync per window, off the event loop.

The ``group`` durability of :class:`nameserver.eventlog.writer.EventLogWriter` hands lines to the OS
on append and fsyncs on :meth:`~nameserver.eventlog.writer.EventLogWriter.sync`; this class decides
when to call it, on an executor thread. Re-exported by :mod:`nameserver.eventlog.writer`.
"""

from __future__ import annotations

import asyncio
from concurrent.futures import Executor
from typing import Any, Protocol

from common.config import EventLogConfig


class SyncableLog(Protocol):
    """What group commit needs of the log (``EventLogWriter``)."""

    config: EventLogConfig

    @property
    def last_seq(self) -> int: ...

    @property
    def durable_seq(self) -> int: ...

    def sync(self) -> int: ...


class AsyncGroupCommit:
    """Group commit for asyncio servers: many waiters, one fsync per window, off the loop.

    The first waiter of an idle committer opens a window of ``window_ms``; when it ends, one
    :meth:`EventLogWriter.sync` runs on ``executor`` and releases every waiter whose seq it
    covered. Waiters arriving during that fsync are served by the next one, which starts as soon
    as the previous ends (the fsync's own duration is their window); so are waiters that come
    back in the loop turn right after it for events appended during it, as the server's answer
    queue does (it waits for one seq at a time).

    Args:
        writer: an open writer, appended to from the event loop's thread.
        window_ms: how long the first waiter waits for company; default the config's
            ``group_commit_ms``.
        executor: where fsync runs; default the loop's default executor.

    Example:
        >>> commit = AsyncGroupCommit(writer)
        >>> seq = writer.append(event)
        >>> await commit.wait_durable(seq)   # now answer the broker
    """

    def __init__(self, writer: SyncableLog, window_ms: float | None = None, executor: Executor | None = None) -> None:
        self._writer = writer
        self._window_s = (writer.config.group_commit_ms if window_ms is None else window_ms) / 1000
        self._executor = executor
        self._waiters: list[tuple[int, asyncio.Future[Any]]] = []
        self._task: asyncio.Task[Any] | None = None

    async def wait_durable(self, seq: int) -> None:
        """Return once :attr:`EventLogWriter.durable_seq` >= ``seq``.

        Raises:
            EventLogError: the fsync failed; every waiter of that run gets the error.
        """
        if seq <= self._writer.durable_seq:
            return
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._waiters.append((seq, future))
        if self._task is None:
            self._task = loop.create_task(self._run(loop))
        await future

    @property
    def running(self) -> bool:
        """A commit run (window, then fsyncs) is in progress."""
        return self._task is not None

    async def drain(self) -> None:
        """Wait until no commit run is in progress (call before closing the writer)."""
        while self._task is not None:
            await asyncio.shield(self._task)

    async def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            await asyncio.sleep(self._window_s)
            while self._waiters:
                try:
                    durable = await loop.run_in_executor(self._executor, self._writer.sync)
                except Exception as exc:  # noqa: BLE001 - handed to every waiter: their commits fail with it
                    waiters, self._waiters = self._waiters, []
                    for _, future in waiters:
                        if not future.done():
                            future.set_exception(exc)
                    return
                still = []
                for seq, future in self._waiters:
                    if future.done():  # its waiter was cancelled
                        continue
                    if seq <= durable:
                        future.set_result(None)
                    else:
                        still.append((seq, future))
                self._waiters = still
                if not still and self._writer.last_seq > durable:
                    # Events were appended during that fsync, and their waiters are often the ones
                    # just released, coming back (the server's answer queue waits for one seq at
                    # a time): one loop turn lets them register, and the fsync just done was
                    # their window. Without it each such round would open a fresh window.
                    await asyncio.sleep(0)
        finally:
            self._task = None
