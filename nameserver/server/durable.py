"""Answers that leave only once what they show is durable (event-log durability policy).

An answer computed after the table changes logged as events ``1..n`` is sent only when
``durable_seq >= n``: the answer to a request that changed the tables waits for its own event, and
an answer that merely shows state waits for the events of that state, so no client ever sees what
a crash could take back. Events that change no table (``rejected`` refusals) hold back no answer,
their own refusal's included: a flood of refused requests does not make every lookup wait for an
fsync. Under ``group`` durability one fsync (on an executor thread, via
:class:`nameserver.eventlog.writer.AsyncGroupCommit`) releases every answer waiting at that moment.
Answers keep their order: once one waits, later ones queue behind it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any, Protocol

from nameserver.eventlog.writer import AsyncGroupCommit, EventLogError, EventLogWriter


class AnswerChannel(Protocol):
    """Where answers are written (``RemotingChannel``)."""

    def write(self, data: bytes) -> None: ...

    def write_many(self, frames: list[bytes]) -> None: ...


class DurableAnswers:
    """The queue of answers waiting for an fsync.

    Args:
        writer: the open event-log writer (appended to on the loop's thread).
        commit: group commit over ``writer``; None when durability is ``none`` (answer at once).
        on_failure: called with the error when an fsync fails (the server must stop).
    """

    def __init__(
        self, writer: EventLogWriter, commit: AsyncGroupCommit | None, on_failure: Callable[[BaseException], None]
    ) -> None:
        self._writer = writer
        self._commit = commit
        self._on_failure = on_failure
        self._pending: list[tuple[int, AnswerChannel, bytes]] = []
        self._flusher: asyncio.Task[Any] | None = None
        self._state_seq = writer.last_seq  # the last event that changed a table

    def note_change(self) -> None:
        """The events appended so far include a table change: later answers wait for them."""
        self._state_seq = self._writer.last_seq

    @property
    def waiting(self) -> int:
        """Answers not yet sent."""
        return len(self._pending)

    @property
    def immediate(self) -> bool:
        """An answer computed now would be sent at once: nothing waits, every table change is durable."""
        return self._commit is None or (not self._pending and self._state_seq <= self._writer.durable_seq)

    def send(self, channel: AnswerChannel, data: bytes) -> None:
        """Send ``data`` on ``channel`` now if every table change appended so far is durable, else later."""
        if self._commit is None or (not self._pending and self._state_seq <= self._writer.durable_seq):
            channel.write(data)
            return
        self._pending.append((self._state_seq, channel, data))
        if self._flusher is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush())

    def release(self) -> None:
        """Send every waiting answer now and wait for no commit from here on (the log became
        unavailable: what it holds is as durable as it will get)."""
        self._commit = None
        pending, self._pending = self._pending, []
        for _, channel, data in pending:
            channel.write(data)

    async def wait_all_durable(self) -> None:
        """Wait until every event appended so far is durable (e.g. ``ns_start`` before serving)."""
        if self._commit is not None:
            await self._commit.wait_durable(self._writer.last_seq)

    async def drain_commits(self) -> None:
        """Wait for a commit run in progress (before closing the writer)."""
        if self._commit is not None:
            await self._commit.drain()

    async def _flush(self) -> None:
        assert self._commit is not None
        try:
            while self._pending:
                try:
                    await self._commit.wait_durable(self._pending[-1][0])
                except EventLogError as exc:
                    self._on_failure(exc)  # may release() the answers instead
                    self._pending.clear()
                    return
                durable = self._writer.durable_seq
                ready = 0
                by_channel: dict[AnswerChannel, list[bytes]] = {}
                for seq, channel, data in self._pending:
                    if seq > durable:
                        break
                    by_channel.setdefault(channel, []).append(data)
                    ready += 1
                del self._pending[:ready]
                for channel, frames in by_channel.items():  # one write per connection
                    channel.write_many(frames)
        finally:
            self._flusher = None
