"""``nsaudit collect``'s lifecycle: open one stream per server, poll them all, stop cleanly.

start -> serve -> shutdown, as the name server's controller: :meth:`Collector.start` opens every
stream (failing before anything is polled when one cannot be opened), :meth:`Collector.run` polls
until :meth:`Collector.request_stop` (SIGTERM/SIGINT in the command) or until every poller has done
its rounds, then writes ``observe_stop`` to every stream and closes it.
"""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

from common.config import CollectConfig, EventLogConfig
from nameserver.collect.live.judge import LiveJudge
from nameserver.collect.metrics import live_families, server_families
from nameserver.collect.poller import ServerPoller, wall_clock_ms
from nameserver.collect.targets import Target
from nameserver.collect.view import ServerView
from nameserver.eventlog.writer import EventLogWriter
from nameserver.metrics.exposition import render

log = logging.getLogger(__name__)


class Collector:
    """Observes several name servers, each on its own connection, into one stream each.

    Args:
        targets: the servers (their stream ids distinct).
        events_dir: the event-log root; streams are ``<events_dir>/<target.ns>``.
        config: the ``[collect]`` settings.
        eventlog: segment size and durability of the streams.
        report: takes the progress lines.
        clock: epoch ms for the events.
        judge: judges every round live (docs/collect.md, "Live incidents") and writes the
            ``live_incident`` events; None judges nothing.

    Attributes:
        failure: the exception that stopped the collector (a stream that cannot be written), or None.
        opened_total: live incidents opened, by root cause.
    """

    def __init__(self, targets: Sequence[Target], events_dir: str | Path, config: CollectConfig,
                 eventlog: EventLogConfig, report: Callable[[str], None],
                 clock: Callable[[], int] = wall_clock_ms, judge: LiveJudge | None = None) -> None:
        self.targets = tuple(targets)
        self.events_dir = Path(events_dir)
        self.config = config
        self.eventlog = eventlog
        self.failure: BaseException | None = None
        self.stop_reason = "stopped"
        self.pollers: list[ServerPoller] = []
        self._report = report
        self._clock = clock
        self._stop: asyncio.Event | None = None
        self.judge = judge
        self.opened_total: Counter = Counter()
        self._by_ns: dict[str, ServerPoller] = {}

    def start(self) -> None:
        """Open every stream (recovering what a crash left) and build the pollers.

        Raises:
            OSError: a stream cannot be opened; the ones already opened are closed again.
        """
        self._stop = asyncio.Event()
        writers: list[EventLogWriter] = []
        try:
            for target in self.targets:
                writers.append(EventLogWriter(self.events_dir, target.ns, self.eventlog).open())
        except BaseException:
            for writer in writers:
                writer.close("start failed")
            raise
        self.pollers = [ServerPoller(t, w, self.config, self._report, self._clock, self._on_round)
                        for t, w in zip(self.targets, writers)]
        self._by_ns = {p.target.ns: p for p in self.pollers}

    def request_stop(self, reason: str) -> None:
        """Ask :meth:`run` to finish: rounds in progress are abandoned, then every stream closes."""
        if self._stop is not None and not self._stop.is_set():
            self.stop_reason = reason
            self._stop.set()

    async def run(self, max_rounds: int = 0) -> None:
        """Poll until stopped (or until each server had ``max_rounds`` rounds, when > 0), then write
        ``observe_stop`` to every stream and close them all. A stream that cannot be written stops
        the whole collector (:attr:`failure`)."""
        assert self._stop is not None, "start() first"
        tasks = [asyncio.ensure_future(p.run(self._stop, max_rounds)) for p in self.pollers]
        for task in tasks:
            task.add_done_callback(self._watch)
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.stop_reason == "stopped" and max_rounds:
                self.stop_reason = f"{max_rounds} rounds done"
        finally:
            for poller in self.pollers:
                try:
                    await poller.stop(self.stop_reason)
                except OSError as exc:
                    self.failure = self.failure or exc
                finally:
                    try:
                        poller.writer.close(self.stop_reason)
                    except OSError as exc:
                        self.failure = self.failure or exc

    def metrics_body(self) -> bytes:
        """The metrics exposition now (docs/collect.md, "Metrics and alerts")."""
        families = server_families(self.pollers, self._clock(), self.judge)
        if self.judge is not None:
            families += live_families(self.judge, self.opened_total, self.judge.grace_ms)
        return render(families)

    async def _on_round(self, poller: ServerPoller, now: int, view: ServerView | None, events: list[dict]) -> None:
        """A round was logged: judge it live and log the live incidents that opened or closed."""
        if self.judge is None:
            return
        ns = poller.target.ns
        if view is None:
            written = self.judge.failed(ns, now)
        elif events and events[0]["type"] == "observe_snapshot":
            written = self.judge.observed(ns, now, view)
        else:
            topics = {e["topic"] for e in events if e["type"] == "observed_route"}
            brokers = {e["broker_name"] for e in events if e["type"] == "observed_broker"}
            written = self.judge.observed(ns, now, view, topics, brokers)
        by_stream: dict[str, list[dict]] = {}
        for stream, event in written:
            target = self._by_ns.get(stream or "", poller)
            by_stream.setdefault(target.target.ns, []).append(event)
            if event["incident_state"] == "open":
                self.opened_total[event["root_cause"]] += 1
            self._report(f"collect live: incident {event['incident_state']} {event['root_cause']} "
                         f"{event['subject']} on {','.join(event['servers'])} ({event['severity']}, "
                         f"{event['incident_id']})")
        for stream, stream_events in by_stream.items():
            await self._by_ns[stream].write(stream_events)

    def _watch(self, task: asyncio.Future) -> None:
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        log.error("collector stops: %s", exc)
        self.failure = self.failure or exc
        self.request_stop(f"failure: {exc}")
