"""The rounds of one observed server on its own connection: connect, observe, log, wait, retry.

Each server has its own :class:`ServerPoller`, so a server that is down, slow or answers garbage
delays nobody else. A failed round closes the connection and the next attempt waits
``backoff_initial_ms``, doubling per failure up to ``backoff_max_ms``; a good round resets it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Awaitable, Callable
from typing import Any

from common.config import CollectConfig
from nameserver.client import RemotingClient
from nameserver.collect.record import ObservedServer
from nameserver.collect.rounds import ObserveFailure, RoundResult, RouteBody, connect, observe_round
from nameserver.collect.targets import Target
from nameserver.collect.view import ServerView
from nameserver.eventlog.writer import EventLogWriter

# Route requests start within this share of the interval, so a round ends well before the next.
SPREAD_SHARE = 0.5
APPEND_SLICE = 1000  # events appended between two turns of the event loop


def wall_clock_ms() -> int:
    """Epoch milliseconds, the ``ts`` of every event."""
    return time.time_ns() // 1_000_000


def backoff_ms(failures: int, config: CollectConfig) -> int:
    """The wait before the next attempt after ``failures`` failed rounds in a row (>= 1)."""
    factor: int = 2 ** min(failures - 1, 32)
    return min(config.backoff_max_ms, config.backoff_initial_ms * factor)


class ServerPoller:
    """Polls one server until told to stop, writing its stream.

    Args:
        target: the server and its stream id.
        writer: the stream's open event-log writer.
        config: interval, concurrency, timeouts, backoff.
        report: takes each round's progress line (stderr in the command).
        clock: epoch ms for the events' ``ts``.
        on_round: called after each logged round with ``(poller, now, view, events)`` (the round's
            view and events, view None for a failed round), before the events are written, so
            the calls come in the order of ``now``; the awaitable it returns is awaited after the
            write (live judgement).

    Attributes:
        rounds: rounds done (good or failed).
        failures: failed rounds in a row.
        failures_by_reason: failed rounds since the start, per ``observe_error`` reason.
        last_ok_ms: epoch ms of the last round that got every answer (None before one).
        last_round_s: how long that round took, seconds.
        view: what the server answered in its last good round (None while failing).
    """

    def __init__(
        self,
        target: Target,
        writer: EventLogWriter,
        config: CollectConfig,
        report: Callable[[str], None],
        clock: Callable[[], int] = wall_clock_ms,
        on_round: Callable[..., Awaitable[None] | None] | None = None,
    ) -> None:
        self.target = target
        self.writer = writer
        self.config = config
        self.record = ObservedServer(target.addr, config.interval_ms)
        self.rounds = 0
        self.failures = 0
        self.failures_by_reason: dict[str, int] = {}
        self.last_ok_ms: int | None = None
        self.last_round_s: float | None = None
        self.view: ServerView | None = None
        self._bodies: dict[str, RouteBody] = {}  # the last good round's route answers (observe_round's known)
        self.last_ts = 0
        self._on_round = on_round
        self._report = report
        self._clock = clock
        self._client: RemotingClient | None = None

    async def run(self, stop: asyncio.Event, max_rounds: int = 0) -> None:
        """Write ``observe_start``, then poll until ``stop`` is set (or ``max_rounds`` > 0 are done).

        A round in progress when ``stop`` is set is abandoned and logs nothing. ``observe_stop`` is
        the caller's (:meth:`stop`), after every poller has ended.

        Raises:
            EventLogError: the stream cannot be written (fatal for the collector).
        """
        loop = asyncio.get_running_loop()
        await self.write(self.record.start(self._clock()))
        try:
            while not stop.is_set():
                round_task = asyncio.ensure_future(self._one_round())
                stop_task = asyncio.ensure_future(stop.wait())
                await asyncio.wait({round_task, stop_task}, return_when=asyncio.FIRST_COMPLETED)
                stop_task.cancel()
                if not round_task.done():
                    round_task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await round_task
                    break
                next_round_at = round_task.result()
                if max_rounds and self.rounds >= max_rounds:
                    break
                remaining = next_round_at - loop.time()
                if remaining > 0:
                    with contextlib.suppress(asyncio.TimeoutError):
                        await asyncio.wait_for(stop.wait(), remaining)
        finally:
            await self._disconnect()

    async def stop(self, reason: str) -> None:
        """Write ``observe_stop`` and make the stream durable."""
        await self.write(self.record.stop(self._clock(), reason))

    async def _one_round(self) -> float:
        """One round, logged; returns the loop time at which the next may start: an interval after
        this one started when it went well, the backoff from now after a failure."""
        self.rounds += 1
        number = self.rounds
        loop = asyncio.get_running_loop()
        started = loop.time()
        timeout_s = self.config.timeout_ms / 1000
        try:
            if self._client is None or not self._client.is_open:
                await self._disconnect()
                self._client = await connect(self.target.host, self.target.port, timeout_s)
            result = await observe_round(
                self._client,
                timeout_s,
                self.config.concurrency,
                self.config.interval_ms / 1000 * SPREAD_SHARE,
                self._bodies,
            )
            self._bodies = result.bodies
            self._client.unsolicited.clear()  # frames nobody asked for: a long-lived connection must not hoard them
        except ObserveFailure as failure:
            await self._disconnect()
            self.failures += 1
            self.failures_by_reason[failure.reason] = self.failures_by_reason.get(failure.reason, 0) + 1
            self.view = None
            wait = backoff_ms(self.failures, self.config)
            now = self._clock()
            events = self.record.failed(now, number, failure.reason, failure.detail)
            judged = self._on_round(self, now, None, events) if self._on_round is not None else None
            await self.write(events)
            if judged is not None:
                await judged
            self._report(
                f"collect {self.target.ns} ({self.target.addr}) round {number}: FAILED {failure.reason}: "
                f"{failure.detail}; failure {self.failures} in a row, retry in {wait / 1000:g} s"
            )
            return loop.time() + wait / 1000
        recovered = self.failures
        self.failures = 0
        now = self._clock()
        events = self.record.observed(result.view, now, number)
        self.view, self.last_ok_ms, self.last_round_s = result.view, now, loop.time() - started
        judged = self._on_round(self, now, result.view, events) if self._on_round is not None else None
        await self.write(events)
        if judged is not None:
            await judged
        self._report(self._ok_line(number, result, events, loop.time() - started, recovered))
        return started + self.config.interval_ms / 1000

    def _ok_line(
        self, number: int, result: RoundResult, events: list[dict[str, Any]], seconds: float, recovered: int
    ) -> str:
        view = result.view
        routed = sum(1 for r in view.routes.values() if r is not None)
        if events and events[0]["type"] == "observe_snapshot":
            logged = f"snapshot ({events[0]['reason']}) of {len(events) - 1} entries"
        else:
            logged = f"{len(events)} change{'s' if len(events) != 1 else ''}"
        back = f", answering again after {recovered} failed round{'s' if recovered != 1 else ''}" if recovered else ""
        return (
            f"collect {self.target.ns} ({self.target.addr}) round {number}: ok, {len(view.broker_addr_table)} "
            f"brokers, {len(view.routes)} topics ({routed} routed), {logged}, {result.requests} requests "
            f"in {seconds:.2f} s{back}"
        )

    async def write(self, events: list[dict[str, Any]]) -> None:
        """Append ``events`` to the stream and make them durable (the writer's sync, off the loop).

        A snapshot of many entries is appended in slices with a turn of the event loop between
        them, so a scrape or another server's round waits for no more than a slice. ``last_ts``
        keeps the stream's latest ``ts``.
        """
        if not events:
            return
        for i, event in enumerate(events):
            if i and i % APPEND_SLICE == 0:
                await asyncio.sleep(0)
            self.writer.append(event)
            self.last_ts = max(self.last_ts, event["ts"])
        await asyncio.get_running_loop().run_in_executor(None, self.writer.sync)

    async def _disconnect(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            client.abort()
