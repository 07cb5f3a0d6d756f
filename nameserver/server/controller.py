"""The name server's asyncio shell: ``NameServerController`` (start -> serve -> shutdown).

RocketMQ's split: the controller owns the lifecycle, the event log and the housekeeping tasks
(expiry scan, connection defences); :class:`nameserver.server.processor.RequestProcessor` owns the route
tables; :class:`nameserver.server.channel.RemotingChannel` moves bytes. A route lookup (105) is
answered by the processor's :class:`~nameserver.server.processor.RouteAnswers` whichever way it
comes: from its bytes in the channel, from its kept encoding here, or through the processor.

Critical section (docs/nameserver-semantics.md A7): the event loop is the only thread that touches
the tables, and every table change is applied and its events appended back to back with no ``await``
in between, using one clock reading. So the log's order is the order of application. A request's
change whose event cannot be written (a full disk, §2.13) is undone in the same section and the
request refused: an answer never says "refused" for a change that stays.

Durability: an answer leaves only once every table change appended before it was computed is
durable under ``eventlog.durability`` (``group``: one fsync per window for all waiting answers, on
an executor thread); refusal events hold back no answer. A reader therefore never sees state that
a crash could take back.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.config import EventLogConfig, NameServerConfig
from nameserver import package_version
from nameserver.acl import AccessController
from nameserver.codec import (
    HeaderMemo,
    RegisterLimits,
    RemotingCommand,
    RequestCode,
    RequestKey,
    ResponseCode,
    encode_frame,
    make_response,
)
from nameserver.eventlog.writer import EventLogError, EventLogWriter
from nameserver.routes.manager import RequestContext, RouteInfoManager, ns_start_event, ns_stop_event, rejected_event
from nameserver.server.address import parse_listen
from nameserver.server.admission import Admission
from nameserver.server.channel import RemotingChannel, encode_response
from nameserver.server.defences import ConnectionDefences
from nameserver.server.durable import DurableAnswers
from nameserver.server.housekeeping import HousekeepingService
from nameserver.server.inflation import RegisterInflation
from nameserver.server.journal import Journal
from nameserver.server.kvconfig import NamesrvConfigStore, own_properties
from nameserver.server.processor import ROUTE_CHANGE_CODES, ConnectionContext, RequestProcessor
from nameserver.server.profile import PROFILES

log = logging.getLogger(__name__)

# How long a clean shutdown waits for in-flight answers and their bytes to leave.
SHUTDOWN_DRAIN_S = 5.0
_GET_ROUTEINFO_BY_TOPIC = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)  # counts the lookups channels answer
_REGISTER_BROKER = int(RequestCode.REGISTER_BROKER)


def wall_clock_ms() -> int:
    """The server clock: wall time in epoch ms (the ``ts`` of every event)."""
    return time.time_ns() // 1_000_000


class NameServerController(ConnectionDefences):
    """One name-server run: its tables, its event log, its listening socket and housekeeping.

    Args:
        ns_id: the server id, the log folder under ``events_dir``.
        events_dir: root of the event log.
        config: timers, limits and defences.
        eventlog_config: segments and durability.
        clock: epoch-ms clock (tests may pass a fake one).
        access: access control for route changes (``[security]``); None checks nothing.
    """

    def __init__(
        self,
        ns_id: str,
        events_dir: str | Path,
        config: NameServerConfig | None = None,
        eventlog_config: EventLogConfig | None = None,
        clock: Callable[[], int] = wall_clock_ms,
        access: AccessController | None = None,
    ) -> None:
        self.ns_id = ns_id
        self.access = access
        self.config = config or NameServerConfig()
        self.eventlog_config = eventlog_config or EventLogConfig()
        self._clock = clock
        self._events_dir = Path(events_dir)
        self.routes = RouteInfoManager(self.config.broker_expiry_ms)
        self.processor: RequestProcessor | None = None
        self._inflation: RegisterInflation[RemotingChannel] | None = None
        self._journal = Journal(self._events_dir, ns_id, self.eventlog_config, clock, self._fatal, self.routes)
        self._deferred_closes: list[ConnectionContext] = []  # broker channels closed while the log was unavailable
        self._server: asyncio.base_events.Server | None = None
        self._channels: dict[str, RemotingChannel] = {}
        self._admission = Admission(ns_id, self.config)
        self._next_channel = 0
        self._silent_closes = 0  # closes of connections that never carried a registration
        self.requests_by_code: dict[int, int] = {}  # requests handled, by code (the metrics)
        # one for every connection: clients repeat the same headers (route polls), whoever they are
        self._header_memo = HeaderMemo()
        self._tasks: list[asyncio.Task[Any]] = []
        self._stopped = asyncio.Event()
        self._stop_reason: str | None = None
        self._stop_task: asyncio.Task[Any] | None = None  # held so the task is not garbage-collected
        self._failure: BaseException | None = None
        self.stopping = False  # no new connections, no new reads, no scans
        self._log_closed = False  # after ns_stop: no request is handled any more
        self.start_ts = 0
        self.host = ""
        self.port = 0

    # ------------------------------------------------------------------ lifecycle

    async def start(self) -> tuple[str, int]:
        """Open the log, append ``ns_start``, listen, start housekeeping.

        Returns:
            The bound ``(host, port)`` (the real port when asked for 0).

        Raises:
            OSError: the address cannot be bound or the log cannot be opened.
        """
        self._journal.open()
        host, port = parse_listen(self.config.listen)
        loop = asyncio.get_running_loop()

        def channel() -> RemotingChannel:  # one per accepted connection
            return RemotingChannel(self, self.config.max_frame_bytes, self._header_memo)

        try:
            self._server = await loop.create_server(channel, host, port, reuse_address=True, backlog=1024)
        except OSError:
            writer = self.writer
            assert writer is not None  # the journal opened above
            writer.close("bind failed")
            raise
        sock = self._server.sockets[0].getsockname()
        self.host, self.port = sock[0], sock[1]
        limits = RegisterLimits(self.config.max_register_topics, self.config.max_register_body_bytes)
        self.processor = RequestProcessor(
            self.routes,
            namesrv_config=NamesrvConfigStore(own_properties(self.config, self.port)),
            access=self.access,
            register_limits=limits,
            profile=PROFILES[self.config.rocketmq_version],
        )
        self._inflation = RegisterInflation(self.processor.register_bodies, self.handle_command)
        self.start_ts = self._clock()
        config = self.config
        start = ns_start_event(self.start_ts, config.broker_expiry_ms, config.scan_interval_ms, package_version())
        self._journal.append_all([start])
        await self._answers.wait_all_durable()
        self._tasks = HousekeepingService(self, self._clock).start(loop)
        log.info("name server %s listening on %s:%d", self.ns_id, self.host, self.port)
        return self.host, self.port

    def request_stop(self, reason: str) -> None:
        """Ask for a clean shutdown (signal handlers call this)."""
        if self._stop_reason is None:
            self._stop_reason = reason
            self._stop_task = asyncio.get_running_loop().create_task(self.shutdown(reason))

    async def wait_stopped(self) -> None:
        """Return when the server has shut down (cleanly or after a fatal log failure)."""
        await self._stopped.wait()

    @property
    def failure(self) -> BaseException | None:
        """The fatal error that stopped the server, if any."""
        return self._failure

    async def shutdown(self, reason: str = "shutdown") -> None:
        """Stop accepting, finish in-flight answers, append ``ns_stop``, close the log.

        Connections still open are closed without ``channel_close`` events: ``ns_stop`` ends
        their brokers' liveness (docs/interfaces.md).
        """
        if self.stopping:
            await self._stopped.wait()
            return
        self.stopping = True
        try:
            if self._server is not None:
                self._server.close()
            for channel in list(self._channels.values()):
                channel.stop_reading()
            for task in self._tasks:
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
            await self._finish_in_flight()
            self._log_closed = True  # ns_stop is the last event
            if self.writer is not None and self._failure is None and self._journal.try_resume():
                self._journal.append_all([ns_stop_event(self._clock(), reason, self._silent_closes)])
                await self._answers.drain_commits()
                self.writer.close(reason)
            elif self.writer is not None:
                try:  # release the file; the failed writer keeps what it had written (no ns_stop)
                    self.writer.close(reason)
                except EventLogError:
                    pass
            for channel in list(self._channels.values()):
                channel.close()
            await self._wait_channels_gone()
        finally:
            if self._inflation is not None:
                self._inflation.close()
            self._stopped.set()

    async def _finish_in_flight(self) -> None:
        """Handle the requests already received, then wait until their answers have left."""
        deadline = time.monotonic() + SHUTDOWN_DRAIN_S
        while time.monotonic() < deadline and any(c.has_backlog for c in self._channels.values()):
            await asyncio.sleep(0.005)
        while self._journal.answers is not None and self._journal.answers.waiting and time.monotonic() < deadline:
            await asyncio.sleep(0.005)
        while time.monotonic() < deadline and any(c.write_buffer_size for c in self._channels.values()):
            await asyncio.sleep(0.005)

    async def _wait_channels_gone(self) -> None:
        deadline = time.monotonic() + 1.0
        while self._channels and time.monotonic() < deadline:
            await asyncio.sleep(0.01)
        for channel in list(self._channels.values()):
            channel.abort()
        await asyncio.sleep(0)

    def _fatal(self, exc: BaseException) -> None:
        """The log failed: the tables may now be ahead of it, so serving must stop (A7)."""
        if self._failure is None:
            self._failure = exc
            log.critical("name server %s stops: event log failure: %s", self.ns_id, exc)
            for channel in list(self._channels.values()):
                channel.abort()
            self.request_stop("event log failure")

    # ------------------------------------------------------------------ events and answers

    @property
    def writer(self) -> EventLogWriter | None:
        """The event-log writer in use."""
        return self._journal.writer

    @property
    def _answers(self) -> DurableAnswers:
        answers = self._journal.answers
        assert answers is not None, "the journal is not open"
        return answers

    @property
    def log_available(self) -> bool:
        """The event log can be written; otherwise route changes are refused (journal)."""
        return self._journal.available

    def retry_log(self) -> None:
        """Try to write the log again; once it resumes, handle the broker channels that closed
        meanwhile (docs/nameserver-semantics.md §2.13)."""
        if self._log_closed or not self._journal.try_resume():
            return
        closes, self._deferred_closes = self._deferred_closes, []
        now = self._clock()
        processor = self.processor
        assert processor is not None  # housekeeping runs once started
        try:
            for ctx in closes:
                self._journal.append_all(processor.on_channel_close(ctx, now))
        except EventLogError:
            return

    def _refuse_change(self, channel: RemotingChannel, cmd: RemotingCommand, events: list[Any], now: int) -> None:
        """A route change that cannot be logged, already undone: SYSTEM_ERROR, counted for the gap
        event; a refresh of a live broker is remembered, so the outage expires no broker whose
        heartbeats it refused (§2.13)."""
        outage, processor = self._journal.outage, self.processor
        assert outage is not None and processor is not None  # refused: the log is unavailable
        outage.refused += 1
        for event in events:
            addr = self.routes.refreshed_by(event)
            if addr is not None:
                self._journal.note_refused_refresh(addr, now)
        if not cmd.is_oneway and not cmd.is_response:
            remark = f"event log unavailable ({outage.detail}): route changes are refused until it can be written"
            answer = make_response(cmd, ResponseCode.SYSTEM_ERROR, remark=remark)
            self._answers.send(channel, encode_frame(processor.profile.frame(answer)))

    # ------------------------------------------------------------------ channel callbacks

    def channel_closed(self, channel: RemotingChannel) -> None:
        """A connection ended: its brokers leave the tables (docs/nameserver-semantics.md §2.4),
        except at shutdown."""
        if not self.forget_channel(channel):
            return
        if self.stopping or self._failure is not None or self.processor is None:
            return
        if not channel.carried_registration:
            # No live entry can be stored on it (only a 103 stores one), so its close changes no
            # table: counted for ns_stop instead of one channel_close per connect (A2).
            self._silent_closes += 1
            return
        if not self._journal.available:
            self._deferred_closes.append(channel.ctx)  # removed once the log resumes (§2.13)
            return
        try:
            self._journal.append_all(self.processor.on_channel_close(channel.ctx, self._clock()))
        except EventLogError:
            return

    def known_answered(self, count: int) -> None:
        """A channel answered ``count`` GET_ROUTEINFO_BY_TOPIC from their bytes (the metrics)."""
        counts = self.requests_by_code
        counts[_GET_ROUTEINFO_BY_TOPIC] = counts.get(_GET_ROUTEINFO_BY_TOPIC, 0) + count

    @property
    def journal(self) -> Journal:
        """The event log as the controller uses it (its state, for the metrics)."""
        return self._journal

    @property
    def admission(self) -> Admission:
        """Connection caps and the buffer budget (their state, for the metrics)."""
        return self._admission

    @property
    def connections(self) -> int:
        """Connections open now."""
        return len(self._channels)

    def known_lookups(self) -> dict[RequestKey, tuple[Any, ...]] | None:
        """What a channel may answer straight from a request's bytes now
        (``FrameDecoder.answer_known``), or None when every request must come to
        :meth:`handle_command`.

        Only while an answer would leave at once (nothing waits for an fsync, everything
        appended is durable: a lookup shows state, A7) and while requests are handled at all.
        Valid until the channel hands a command to :meth:`handle_command` (it may change the
        tables or queue an answer behind an fsync); the known lookups themselves change nothing.
        """
        if self._log_closed or self._failure is not None or self.processor is None or not self._answers.immediate:
            return None
        return self.processor.route_answers.known_lookups()

    def handle_command(self, channel: RemotingChannel, cmd: RemotingCommand, key: RequestKey | None = None) -> None:
        """Process one request: the table change and its events in one critical section (A7).

        ``key``: the decoder's ``last_key`` for ``cmd``; a lookup answered from its kept encoding
        with a key becomes one of :meth:`known_lookups`.
        """
        if self._log_closed or self._failure is not None:
            return
        counts = self.requests_by_code
        counts[cmd.code] = counts.get(cmd.code, 0) + 1
        processor, answers = self.processor, self._journal.answers
        assert processor is not None and answers is not None
        now = None
        try:
            # A route lookup, the commonest request by far, is answered from its kept encoding
            # (no clock, no events); None for every other request and any lookup it leaves to
            # the processor.
            frame = processor.route_answers.frame(cmd, key)
            if frame is not None:
                answers.send(channel, frame)
                return
            now = self._clock()
            if cmd.code in ROUTE_CHANGE_CODES:
                inflation = self._inflation
                assert inflation is not None  # made with the processor
                if inflation.wants(cmd):
                    inflation.defer(channel, cmd)  # handled again once its body is inflated
                    return
                channel.carried_registration |= cmd.code == _REGISTER_BROKER
                self._change(channel, cmd, now)
                return
            outcome = processor.process(cmd, channel.ctx, now)
            for event in outcome.events:  # a lookup's or a KV request's refusal: no table change
                self._journal.append_quietly(event)
            if outcome.response is not None:
                answers.send(channel, encode_response(outcome.response))
        except EventLogError:
            return  # _fatal already stopped the server
        except Exception as exc:  # never die of client input
            # (docs/remoting-protocol.md §9.2)
            log.exception("internal error on %s", channel.ctx.channel)
            self._internal_error(channel, cmd, self._clock() if now is None else now, exc)

    def _change(self, channel: RemotingChannel, cmd: RemotingCommand, now: int) -> None:
        """A request that may change the route tables: applied and logged in one critical section,
        or undone and refused (§2.13). A refusal (bad request, no permission, an internal error
        midway) keeps no change either."""
        routes, processor = self.routes, self.processor
        assert processor is not None  # handle_command checked it
        routes.begin_change()
        try:
            outcome = processor.process(cmd, channel.ctx, now)
        except BaseException:
            routes.undo_change()
            raise
        if any(event["type"] == "rejected" for event in outcome.events):
            routes.undo_change()
            for event in outcome.events:
                self._journal.append_quietly(event)
        elif not self._journal.append_request(outcome.events):
            routes.undo_change()  # the revision moves on: no cached answer shows the undone change
            self._refuse_change(channel, cmd, outcome.events, now)
            return
        else:
            routes.keep_change()
        if outcome.response is not None:
            self._answers.send(channel, encode_response(outcome.response))

    def _internal_error(self, channel: RemotingChannel, cmd: RemotingCommand, now: int, exc: Exception) -> None:
        detail = f"{type(exc).__name__}: {exc}"
        ctx = RequestContext(channel.ctx.channel, channel.ctx.remote, cmd.code)
        try:
            self._journal.append_quietly(rejected_event(now, "internal_error", ctx, detail=detail))
            if not cmd.is_oneway and not cmd.is_response:
                answer = make_response(cmd, ResponseCode.SYSTEM_ERROR, remark=detail[:1000])
                assert self.processor is not None  # handle_command checked it
                self._answers.send(channel, encode_frame(self.processor.profile.frame(answer)))
        except EventLogError:
            return
        except Exception:  # even the error answer failed: drop this connection
            log.exception("cannot answer %s; closing it", channel.ctx.channel)
            channel.abort()

    # ------------------------------------------------------------------ housekeeping's actions

    def scan(self, now: int) -> None:
        """One expiry scan (docs/nameserver-semantics.md §2.5) in one critical section, then close
        the expired brokers' connections, as RocketMQ does; their closes log ``channel_close``
        (§2.4)."""
        assert self.processor is not None
        if self.stopping or self._failure is not None or not self._journal.available:
            return  # no expiry while the log cannot record it (§2.13)
        try:
            events, channels = self.processor.scan_not_active_broker(now)
            self._journal.append_all(events)
        except EventLogError:
            return
        for channel_id in channels:
            channel = self._channels.get(channel_id)
            if channel is not None:
                channel.abort()
