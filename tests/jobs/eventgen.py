"""Random valid event logs for property tests of the rebuild, made by driving ``RouteInfoManager``.

Each name server gets its own route table and clock. A seeded ``random.Random`` picks operations
the way a small, unlucky fleet would cause them, so the log is exactly what a server would have
written for those requests, and the semantic corners are visited often:

* steady re-registrations (the bulk: unchanged heartbeats the rebuild must skip), 904 and 322;
* new data versions, incremental and changed topic lists, filter lists ``None``/``[]``/non-empty,
  reconnects on a new channel;
* promotions and demotions, another address taking an occupied slot while the old one stays live
  (semantics W8), one address under two names (W22), a group moving cluster (W21);
* unregisters naming the right or a wrong group, channel closes, expiry scans (with the scan's
  connection close), wipe/add write perm, delete topic (all, one cluster, an unknown one),
  rejected requests;
* clean restarts (``ns_stop`` ... ``ns_start``, sometimes down across midnight) and crashes
  (``ns_start`` with no ``ns_stop``); bursts of events in the same millisecond; an event exactly at
  midnight.

:func:`write_log` writes the events with the real ``EventLogWriter`` (a new segment per server
run, as a restarted server opens one), optionally losing a few lines afterwards (a seq gap).

Example:
    >>> events = generate_events(seed=3, ns_ids=("ns-a", "ns-b"), start_ms=T0, duration_ms=4 * 3600_000)
    >>> write_log(tmp_path / "events", events)
"""

from __future__ import annotations

import os
import random
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from common.config import EventLogConfig
from nameserver.codec import RequestCode
from nameserver.eventlog.writer import EventLogWriter, list_segments
from nameserver.model import DataVersion, TopicConfig
from nameserver.routes.manager import RequestContext, RouteInfoManager, ns_start_event, ns_stop_event, rejected_event

CLUSTERS = ("C1", "C2")
BROKER_NAMES = ("broker-a", "broker-b", "broker-c", "broker-d")
TOPICS = tuple(f"Topic{c}" for c in "ABCDEFGH")
ADDRS = tuple(f"10.0.0.{i}:10911" for i in range(1, 9))
FILTERS = ("10.0.1.1:40001", "10.0.1.2:40001")
EXPIRY_MS = 120_000
SCAN_MS = 10_000
FIRST_SCAN_MS = 5_000


@dataclass
class BrokerProcess:
    """One broker address as it registers: identity, version, topics, filter list, connection."""

    addr: str
    cluster: str
    broker_name: str
    broker_id: int
    data_version: DataVersion
    topics: tuple[TopicConfig, ...]
    filter_servers: list[str] | None = field(default_factory=list)
    channel_no: int = 0

    @property
    def ha_addr(self) -> str:
        """HA port beside the broker port."""
        return self.addr.replace(":10911", ":10912")


def _initial_fleet(rng: random.Random) -> list[BrokerProcess]:
    # broker-a: .1 (master), .2 (slave); broker-b: .3, .4; broker-c: .5, .8; broker-d: .6, .7
    slots = [
        ("C1", "broker-a", 0),
        ("C1", "broker-a", 1),
        ("C1", "broker-b", 0),
        ("C1", "broker-b", 1),
        ("C2", "broker-c", 0),
        ("C2", "broker-d", 0),
        ("C2", "broker-d", 1),
        ("C2", "broker-c", 1),
    ]
    group_topics = {name: _random_topics(rng, full=True) for name in BROKER_NAMES}
    return [
        BrokerProcess(addr, cluster, name, broker_id, DataVersion(1_000, 1), group_topics[name])
        for addr, (cluster, name, broker_id) in zip(ADDRS, slots, strict=True)
    ]


def _random_topics(rng: random.Random, full: bool) -> tuple[TopicConfig, ...]:
    count = rng.randint(2, 5) if full else 1
    chosen = sorted(rng.sample(TOPICS, count))
    return tuple(
        TopicConfig(
            t,
            rng.choice((4, 8, 16)),
            rng.choice((4, 8, 16)),
            rng.choice((6, 6, 6, 7, 4, 2)),
            rng.choice((0, 0, 0, 1, 2)),
        )
        for t in chosen
    )


class _Server:
    """One name server being driven: its route table, clock, run state and events."""

    def __init__(self, ns: str, rng: random.Random, fleet: list[BrokerProcess], start_ms: int) -> None:
        self.ns, self.rng, self.fleet = ns, rng, fleet
        self.routes = RouteInfoManager(EXPIRY_MS)
        self.now = start_ms
        self.events: list[dict[str, Any]] = []
        self.up = False
        self.run_no = 0
        self.next_scan = 0

    def emit(self, events: list[dict[str, Any]]) -> None:
        for event in events:
            assert event["ts"] == self.now
            self.events.append(event)

    def start(self) -> None:
        self.routes.clear()  # a (re)started server has empty tables
        self.run_no += 1
        self.up = True
        self.emit([ns_start_event(self.now, EXPIRY_MS, SCAN_MS, "0.1.0")])
        self.next_scan = self.now + FIRST_SCAN_MS

    def stop(self) -> None:
        self.emit([ns_stop_event(self.now, "SIGTERM")])
        self.routes.clear()
        self.up = False

    def channel(self, broker: BrokerProcess) -> str:
        return f"r{self.run_no}-{broker.addr}-{broker.channel_no}"

    def ctx(self, broker: BrokerProcess, code: int) -> RequestContext:
        return RequestContext(self.channel(broker), broker.addr.replace(":10911", ":50000"), int(code))

    def scans_until(self, t: int) -> None:
        """Run every expiry scan due before ``t`` at its own tick (docs/nameserver-semantics.md §2.5)."""
        while self.up and self.next_scan <= t:
            self.now = self.next_scan
            expired, channels = self.routes.scan_not_active_broker(self.now)
            self.emit(expired)
            for channel in channels:  # the server closes an expired broker's connection
                self.emit(self.routes.on_channel_close(channel, self.now))
            self.next_scan += SCAN_MS

    # ------------------------------------------------------------------ operations

    def register(self, broker: BrokerProcess) -> None:
        result = self.routes.register_broker(
            broker.cluster,
            broker.addr,
            broker.broker_name,
            broker.broker_id,
            broker.ha_addr,
            broker.data_version,
            broker.topics,
            broker.filter_servers,
            self.now,
            self.ctx(broker, RequestCode.REGISTER_BROKER),
            request_version=401,
        )
        self.emit(result.events)

    def op(self) -> None:
        rng, fleet = self.rng, self.fleet
        broker = rng.choice(fleet)
        roll = rng.random()
        if roll < 0.50:  # steady re-registration: the heartbeat bulk
            self.register(broker)
        elif roll < 0.58:
            self.register(self.mutate(broker))
        elif roll < 0.64:
            self.emit(
                self.routes.broker_heartbeat(
                    broker.cluster,
                    broker.addr,
                    broker.broker_name,
                    self.now,
                    self.ctx(broker, RequestCode.BROKER_HEARTBEAT),
                )
            )
        elif roll < 0.70:
            dv = broker.data_version if rng.random() < 0.8 else DataVersion(broker.data_version.timestamp, 0)
            ctx = self.ctx(broker, RequestCode.QUERY_DATA_VERSION)
            self.emit(
                self.routes.query_data_version(
                    broker.cluster, broker.addr, broker.broker_name, broker.broker_id, dv, self.now, ctx
                )[2]
            )
        elif roll < 0.74:
            name = broker.broker_name if rng.random() < 0.8 else rng.choice(BROKER_NAMES + ("broker-zz",))
            cluster = broker.cluster if rng.random() < 0.8 else rng.choice(CLUSTERS)
            self.emit(
                self.routes.unregister_broker(
                    cluster,
                    broker.addr,
                    name,
                    broker.broker_id,
                    self.now,
                    self.ctx(broker, RequestCode.UNREGISTER_BROKER),
                )
            )
        elif roll < 0.78:
            channel = self.channel(broker) if rng.random() < 0.8 else "r0-nobody"
            self.emit(self.routes.on_channel_close(channel, self.now, "10.9.9.9:1"))
            broker.channel_no += 1  # the broker reconnects on a new connection
        elif roll < 0.81:
            name = rng.choice(BROKER_NAMES)
            ctx = RequestContext("admin", "10.9.0.1:5000", int(RequestCode.WIPE_WRITE_PERM_OF_BROKER))
            add_code = int(RequestCode.ADD_WRITE_PERM_OF_BROKER)
            if rng.random() < 0.5:
                self.emit(self.routes.wipe_write_perm_of_broker(name, self.now, ctx)[1])
            else:
                self.emit(self.routes.add_write_perm_of_broker(name, self.now, replace(ctx, request_code=add_code))[1])
        elif roll < 0.84:
            cluster = rng.choice((None, "", "C1", "C2", "C9"))
            ctx = RequestContext("admin", "10.9.0.1:5000", int(RequestCode.DELETE_TOPIC_IN_NAMESRV))
            self.emit(self.routes.delete_topic(rng.choice(TOPICS), cluster, self.now, ctx))
        elif roll < 0.85:
            ctx = self.ctx(broker, RequestCode.REGISTER_BROKER)
            self.emit([rejected_event(self.now, "crc32 not match", ctx, broker_addr=broker.addr)])
        else:  # quiet time: nothing happens but the clock
            pass

    def mutate(self, broker: BrokerProcess) -> BrokerProcess:
        """Change what one broker registers (in place) and return it."""
        rng = self.rng
        kind = rng.random()
        if kind < 0.30:
            broker.data_version = DataVersion(
                broker.data_version.timestamp + rng.choice((0, 1000)), broker.data_version.counter + 1
            )
            if rng.random() < 0.5:
                broker.topics = _random_topics(rng, full=rng.random() < 0.6)
        elif kind < 0.42:
            broker.topics = _random_topics(rng, full=True)  # same data version: ignored (W20)
        elif kind < 0.54:
            broker.filter_servers = rng.choice((None, [], [FILTERS[0]], list(FILTERS)))
        elif kind < 0.64:
            broker.channel_no += 1  # reconnect
        elif kind < 0.76:  # promotion/demotion inside the group (W7, W8)
            broker.broker_id = 0 if broker.broker_id else rng.choice((1, 2))
        elif kind < 0.88:  # take another broker's slot while it may still be live (W8)
            other = rng.choice(self.fleet)
            broker.cluster, broker.broker_name, broker.broker_id = other.cluster, other.broker_name, other.broker_id
        elif kind < 0.94:  # the group moves cluster (W21)
            broker.cluster = rng.choice(CLUSTERS)
        else:  # one address under another name (W22)
            broker.broker_name = rng.choice(BROKER_NAMES)
        return broker


def generate_events(
    seed: int,
    ns_ids: tuple[str, ...] = ("ns-a", "ns-b"),
    start_ms: int = 0,
    duration_ms: int = 4 * 3_600_000,
    mean_step_ms: int = 2_000,
    midnight_ms: int | None = None,
) -> dict[str, list[dict[str, Any]]]:
    """Events per name server (route-table events with ``ts``, no ``v``/``ns``/``seq``).

    Args:
        seed: the same seed gives the same events.
        start_ms: the first ``ns_start`` (each server's is a little later than the previous one's).
        duration_ms: the log covers ``[start_ms, start_ms + duration_ms]``.
        mean_step_ms: mean time between operations (exponential; 20% of steps are 0 ms).
        midnight_ms: an instant at which one event is forced (a day boundary).
    """
    rng = random.Random(seed)
    fleet = _initial_fleet(rng)
    out = {}
    for i, ns in enumerate(ns_ids):
        server = _Server(ns, random.Random(rng.random()), [replace(b) for b in fleet], start_ms + 7 * i)
        server.start()
        end = start_ms + duration_ms
        forced_midnight = midnight_ms is None
        while server.now < end:
            step = 0 if rng.random() < 0.2 else int(rng.expovariate(1 / mean_step_ms))
            target = server.now + step
            if not forced_midnight and target >= midnight_ms:
                target, forced_midnight = midnight_ms, True
            server.scans_until(target)
            server.now = target
            if target == midnight_ms and server.up:
                server.register(server.rng.choice(server.fleet))  # an event exactly at 00:00
                continue
            roll = server.rng.random()
            if not server.up:
                if roll < 0.02:
                    server.start()
                continue
            if roll < 0.002:
                server.stop()
            elif roll < 0.004:
                server.start()  # crash: a new run with no ns_stop
            else:
                server.op()
        out[ns] = server.events
    return out


def write_log(
    events_dir: str | os.PathLike, events_by_ns: dict[str, list[dict[str, Any]]], lose_rate: float = 0.0, seed: int = 0
) -> None:
    """Write each server's events with the real writer, one writer (segment) per server run.

    Args:
        lose_rate: share of lines removed afterwards (never ``ns_start``/``ns_stop`` nor a line that
            carries ``topics``), leaving seq gaps as lost telemetry would.
    """
    config = EventLogConfig(durability="none")
    for ns, events in events_by_ns.items():
        writer = None
        for event in events:
            if event["type"] == "ns_start" and writer is not None:
                writer.close("restart")
                writer = None
            if writer is None:
                writer = EventLogWriter(events_dir, ns, config).open()
            writer.append(event)
        if writer is not None:
            writer.close("end of test log")
    if lose_rate > 0:
        _lose_lines(events_dir, list(events_by_ns), lose_rate, random.Random(seed))


def _lose_lines(events_dir: str | os.PathLike, ns_ids: list[str], rate: float, rng: random.Random) -> None:
    for ns in ns_ids:
        for seg in list_segments(events_dir, ns):
            lines = Path(seg.path).read_bytes().splitlines(keepends=True)
            kept = [line for line in lines if b'"topics":' in line or b'"type":"ns_st' in line or rng.random() >= rate]
            Path(seg.path).write_bytes(b"".join(kept))


def stamp(events_by_ns: dict[str, list[dict[str, Any]]]) -> list[dict[str, Any]]:
    """Log lines as the writer would stamp them (``v``, ``ns``, ``seq`` from 1), in JSON form."""
    import orjson

    def default(value: Any) -> Any:
        return value.to_json_obj()

    lines = []
    for ns, events in events_by_ns.items():
        for seq, event in enumerate(events, 1):
            lines.append(orjson.loads(orjson.dumps({"v": 1, "ns": ns, "seq": seq, **event}, default=default)))
    return lines


def rebuild_from_lines(spark: Any, lines: list[dict[str, Any]], lake_dir: str | os.PathLike, days: list) -> list:
    """Rebuild ``days`` (in order) from in-memory log lines, the way ``run_rebuild`` does from the lake."""
    from common.timeutil import utc_date
    from jobs.rebuild.stage import read_previous_state, rebuild_day
    from jobs.rebuild.walker import WALK_EVENT_COLUMNS
    from schemas.events import EVENT_SCHEMA

    names = EVENT_SCHEMA.names
    results = []
    for day in days:
        rows = [tuple(line.get(n) for n in names) for line in lines if utc_date(line["ts"]) == day]
        day_df = spark.createDataFrame(rows, EVENT_SCHEMA).select(*WALK_EVENT_COLUMNS)
        results.append(rebuild_day(day_df, read_previous_state(spark, str(lake_dir), day), str(lake_dir), day))
    return results
