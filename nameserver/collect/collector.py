"""``nsaudit collect``'s lifecycle: open one stream per server, poll them all, stop cleanly.

start -> serve -> shutdown, as the name server's controller: :meth:`Collector.start` opens every
stream (failing before anything is polled when one cannot be opened), :meth:`Collector.run` polls
until :meth:`Collector.request_stop` (SIGTERM/SIGINT in the command) or until every poller has done
its rounds, then writes ``observe_stop`` to every stream and closes it.
"""

from __future__ import annotations

import asyncio
import gc
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from common.config import CollectConfig, EventLogConfig
from nameserver.collect.live.findings import StreamEvent
from nameserver.collect.live.judge import LiveJudge
from nameserver.collect.metrics import live_families, server_families, unwritable_counts
from nameserver.collect.poller import ServerPoller, wall_clock_ms
from nameserver.collect.targets import Target
from nameserver.collect.view import ServerView
from nameserver.eventlog.writer import EventLogWriter
from nameserver.metrics.exposition import Family, render

log = logging.getLogger(__name__)


# The garbage collector's thresholds while the collector runs. It holds every server's last answers
# (for 3 x 10,000 topics, about 500,000 acyclic containers), and at Python's defaults (700, 10, 10)
# a round that parses a few thousand answers sets off full passes over all of them, up to a second
# of CPU each, several per snapshot round. Young objects are collected 70 times less often instead;
# the cyclic garbage a collector makes is small (bench/README.md, "Live judgement and metrics").
GC_THRESHOLDS = (50_000, 20, 20)


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
            ``live_incident`` events; None judges nothing. It runs on a thread of its own, one
            round after the other in the order of their ``ts``, so a round that changed much
            (a snapshot of 10,000 topics) keeps neither the other rounds nor a scrape waiting.

    Attributes:
        failure: the exception that stopped the collector (a stream that cannot be written), or None.
        opened_total: live incidents opened, by root cause.
    """

    def __init__(
        self,
        targets: Sequence[Target],
        events_dir: str | Path,
        config: CollectConfig,
        eventlog: EventLogConfig,
        report: Callable[[str], None],
        clock: Callable[[], int] = wall_clock_ms,
        judge: LiveJudge | None = None,
    ) -> None:
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
        self.opened_total: Counter[str] = Counter()
        self._by_ns: dict[str, ServerPoller] = {}
        self._judging: ThreadPoolExecutor | None = None
        # what the judge's thread made after its last round, replaced whole (the metrics read them
        # from the endpoint's thread)
        self._live_families: list[Family] = []
        self._unwritable: dict[str, int] | None = None

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
        self.pollers = [
            ServerPoller(t, w, self.config, self._report, self._clock, self._on_round)
            for t, w in zip(self.targets, writers, strict=True)
        ]
        self._by_ns = {p.target.ns: p for p in self.pollers}
        if self.judge is not None:
            self._judging = ThreadPoolExecutor(max_workers=1, thread_name_prefix="nsaudit-live")
            self._live_families = live_families(self.judge, self.opened_total, self.judge.grace_ms)
            self._unwritable = {}

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
        thresholds = gc.get_threshold()
        gc.set_threshold(*GC_THRESHOLDS)  # the process's: put back when the run ends
        tasks = [asyncio.ensure_future(p.run(self._stop, max_rounds)) for p in self.pollers]
        for task in tasks:
            task.add_done_callback(self._watch)
        try:
            await asyncio.gather(*tasks, return_exceptions=True)
            if self.stop_reason == "stopped" and max_rounds:
                self.stop_reason = f"{max_rounds} rounds done"
        finally:
            if self._judging is not None:
                self._judging.shutdown(wait=True)
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
            gc.set_threshold(*thresholds)

    def metrics_body(self) -> bytes:
        """The metrics exposition now (docs/collect.md, "Metrics and alerts"); safe to call from
        another thread: it reads the pollers' numbers and views (replaced whole each round) and
        what the judge published."""
        live, unwritable = self._live_families, self._unwritable
        return render(server_families(self.pollers, self._clock(), unwritable) + live)

    def _on_round(
        self, poller: ServerPoller, now: int, view: ServerView | None, events: list[dict[str, Any]]
    ) -> Awaitable[None] | None:
        """A round was logged: hand it to the judge (in the order of the rounds' ``now``); the
        awaitable logs the live incidents that opened or closed."""
        if self.judge is None:
            return None
        topics: set[str] | None = None
        brokers: set[str] | None = None
        if view is not None and not (events and events[0]["type"] == "observe_snapshot"):
            topics = {e["topic"] for e in events if e["type"] == "observed_route"}
            brokers = {e["broker_name"] for e in events if e["type"] == "observed_broker"}
        judged = asyncio.get_running_loop().run_in_executor(
            self._judging, self._judge_round, poller.target.ns, now, view, topics, brokers
        )
        return self._log_live(judged, poller)

    def _judge_round(
        self, ns: str, now: int, view: ServerView | None, topics: set[str] | None, brokers: set[str] | None
    ) -> list[StreamEvent]:
        """On the judge's thread: one round, then the live families the metrics serve."""
        judge = self.judge
        assert judge is not None  # rounds are judged only with a judge
        if view is None:
            written = judge.failed(ns, now)
        else:
            written = judge.observed(ns, now, view, topics, brokers)
        for _, event in written:
            if event["incident_state"] == "open":
                self.opened_total[event["root_cause"]] += 1
        self._live_families = live_families(judge, self.opened_total, judge.grace_ms)
        self._unwritable = unwritable_counts(judge)
        return written

    async def _log_live(self, judged: Awaitable[list[StreamEvent]], poller: ServerPoller) -> None:
        by_stream: dict[str, list[dict[str, Any]]] = {}
        for stream, event in await judged:
            target = self._by_ns.get(stream or "", poller)
            by_stream.setdefault(target.target.ns, []).append(event)
            self._report(
                f"collect live: incident {event['incident_state']} {event['root_cause']} "
                f"{event['subject']} on {','.join(event['servers'])} ({event['severity']}, "
                f"{event['incident_id']})"
            )
        for stream, stream_events in by_stream.items():
            target = self._by_ns[stream]
            for event in stream_events:
                # the stream may have logged a later round meanwhile: ts never goes back in a
                # stream, and the incident's start (ts - incident_ms) stays where it was
                late = target.last_ts - event["ts"]
                if late > 0:
                    event["ts"] += late
                    event["incident_ms"] += late
            await target.write(stream_events)

    def _watch(self, task: asyncio.Future[Any]) -> None:
        if task.cancelled() or task.exception() is None:
            return
        exc = task.exception()
        log.error("collector stops: %s", exc)
        self.failure = self.failure or exc
        self.request_stop(f"failure: {exc}")
