"""One simulated name server: a ``RouteInfoManager`` and its event-log writer, driven by the engine.

It makes exactly the route-table calls the real server makes for what reaches it, and logs
what they return. Nothing here schedules: the engine calls in, in time order, with ``now``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from common.config import EventLogConfig, NameServerConfig
from nameserver.eventlog.writer import EventLogWriter
from nameserver.routes.manager import RequestContext, RouteInfoManager, ns_start_event, ns_stop_event
from nameserver.sim.brokers import Connection, Payload, SimBroker

# 4.x brokers send FilterServerManager's list, empty without filter servers. Shared: the route
# table copies a non-empty list and never mutates the one it is given.
NO_FILTER_SERVERS: list[str] = []

ADMIN_REQUEST_CODE = {"wipe": 205, "delete_topic": 216, "add": 327}

# The admin tool (mqadmin) connects from here, one short connection per request.
ADMIN_HOST = "10.250.0.10"


class SimServer:
    """A name server of the simulation.

    Attributes:
        index / ns_id: position and id (``ns-a`` ...).
        routes: the live route tables, what the log must replay to.
        up: False between ``ns_stop`` and the next ``ns_start``.
        run: bumped at every stop, so deliveries and scans of an earlier run are dropped.
        start_ts: ``ts`` of the current run's ``ns_start`` (the scan schedule's origin).
        events: events written so far (all runs).
        pending_expiries: truth expectations of ``expire`` events on this server, by address;
            the scan removes them, a stop marks them as overtaken.
    """

    def __init__(
        self,
        index: int,
        ns_id: str,
        events_dir: Path,
        config: NameServerConfig,
        log_config: EventLogConfig,
        version: str,
    ) -> None:
        self.index = index
        self.ns_id = ns_id
        self.config = config
        self.routes = RouteInfoManager(config.broker_expiry_ms)
        self.up = False
        self.run = 0
        self.start_ts = 0
        self.events = 0
        self.pending_expiries: dict[str, dict[str, Any]] = {}
        self._events_dir = events_dir
        self._log_config = log_config
        self._version = version
        self._writer: EventLogWriter | None = None
        self._append = _refuse
        self._next_channel = 0
        self._next_admin_port = 50000
        self._channel_owner: dict[str, tuple[SimBroker, str]] = {}  # channel -> (broker, remote)

    # ------------------------------------------------------------------------------- lifecycle

    def start(self, now: int) -> None:
        """Start a run: a fresh writer that continues the seq on disk, then ``ns_start``."""
        self._writer = EventLogWriter(self._events_dir, self.ns_id, self._log_config).open()
        self._append = self._writer.append
        self.routes.clear()
        self.up = True
        self.start_ts = now
        cfg = self.config
        self._log(ns_start_event(now, cfg.broker_expiry_ms, cfg.scan_interval_ms, self._version))

    def stop(self, now: int, reason: str) -> None:
        """Clean shutdown: ``ns_stop``, close the segment, drop every table and connection.

        No ``channel_close`` is logged for connected brokers (docs/interfaces.md: ``ns_stop``
        ends their liveness windows); they notice the reset and reconnect after the restart.
        """
        self._log(ns_stop_event(now, reason))
        self.close_log(reason)
        self.routes.clear()
        self.up = False
        self.run += 1
        for broker, _ in self._channel_owner.values():
            broker.conns[self.index] = None
        self._channel_owner.clear()
        for expectation in self.pending_expiries.values():
            # the stop removed the entry before any scan could: the truth says so
            last_update = expectation["last_update_ts"]
            expectation.clear()
            expectation.update(event="ns_stop", last_update_ts=last_update, ts=now)
        self.pending_expiries.clear()

    def close_log(self, reason: str) -> None:
        """Close the writer (end of a run or of the simulation); the server keeps its tables."""
        if self._writer is not None:
            self._writer.close(reason)
            self._writer = None
            self._append = _refuse

    # ------------------------------------------------------------------------------ connections

    def connect(self, broker: SimBroker) -> Connection:
        """Accept a new connection from ``broker``: a channel id unique across runs."""
        self._next_channel += 1
        channel = f"c{self._next_channel}"
        remote = broker.new_remote()
        conn = Connection(self.run, channel, remote)
        broker.conns[self.index] = conn
        self._channel_owner[channel] = (broker, remote)
        return conn

    def close_channel(self, now: int, run: int, conn: Connection) -> list[str] | None:
        """The connection ended (peer close or the server's own): ``on_channel_close``.

        Returns:
            The addresses it removed, or None when it belonged to an earlier run (nothing logged).
        """
        if run != self.run:
            return None
        self._forget_channel(conn.channel)
        events = self.routes.on_channel_close(conn.channel, now, conn.remote)
        self._log_all(events)
        return [e["broker_addr"] for e in events if e["broker_addr"] is not None]

    def _forget_channel(self, channel: str) -> str:
        """Drop the server's record of a channel; the broker's side learns it is gone too.

        Returns:
            The channel's remote address ("" if unknown).
        """
        owner = self._channel_owner.pop(channel, None)
        if owner is None:
            return ""
        broker, remote = owner
        conn = broker.conns[self.index]
        if conn is not None and conn.channel == channel:
            broker.conns[self.index] = None
        return remote

    # --------------------------------------------------------------------------------- requests

    def register(self, now: int, run: int, conn: Connection, p: Payload) -> list[dict[str, Any]] | None:
        """REGISTER_BROKER arrived (the hot path: one per broker per server every 30 s).

        Returns:
            The events logged, or None when it belonged to an earlier run.
        """
        if run != self.run:
            return None
        result = self.routes.register_broker(
            p[0], p[1], p[2], p[3], p[4], p[5], p[6], NO_FILTER_SERVERS, now, conn.register_ctx, digest=p[7]
        )
        append = self._append
        events = result.events
        for event in events:
            # Same bytes, less work: the writer serializes a plain dict natively but a
            # DataVersion through a callback, and the payload's dict is built once.
            event["data_version"] = p.data_version_json
            append(event)
        self.events += len(events)
        return events

    def unregister(self, now: int, run: int, conn: Connection, p: Payload) -> bool:
        """UNREGISTER_BROKER arrived; False when it belonged to an earlier run."""
        if run != self.run:
            return False
        self._log_all(
            self.routes.unregister_broker(
                p.cluster, p.broker_addr, p.broker_name, p.broker_id, now, conn.unregister_ctx
            )
        )
        return True

    def scan(self, now: int) -> None:
        """The expiry scan; then close each expired broker's connection, as RocketMQ does."""
        events, channels = self.routes.scan_not_active_broker(now)
        self._log_all(events)
        for event in events:
            self.pending_expiries.pop(event["broker_addr"], None)
        for channel in channels:
            remote = self._forget_channel(channel)
            self._log_all(self.routes.on_channel_close(channel, now, remote))

    def admin(self, now: int, kind: str, arg: str, cluster: str | None = None) -> int | None:
        """An mqadmin request over its own short connection: wipe, add (by broker name) or
        delete_topic (topic, optional cluster). Returns the topic count of wipe/add."""
        self._next_channel += 1
        self._next_admin_port += 1
        channel, remote = f"c{self._next_channel}", f"{ADMIN_HOST}:{self._next_admin_port}"
        ctx = RequestContext(channel, remote, ADMIN_REQUEST_CODE[kind])
        count = None
        if kind == "wipe":
            count, events = self.routes.wipe_write_perm_of_broker(arg, now, ctx)
        elif kind == "add":
            count, events = self.routes.add_write_perm_of_broker(arg, now, ctx)
        else:
            events = self.routes.delete_topic(arg, cluster, now, ctx)
        self._log_all(events)
        # mqadmin closes its connection once answered
        self._log_all(self.routes.on_channel_close(channel, now, remote))
        return count

    # ------------------------------------------------------------------------------------ log

    def _log(self, event: dict[str, Any]) -> None:
        self._append(event)
        self.events += 1

    def _log_all(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            self._append(event)
        self.events += len(events)


def _refuse(event: dict[str, Any]) -> int:
    raise RuntimeError(f"name server is down, cannot log {event.get('type')!r}")
