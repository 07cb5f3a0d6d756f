"""A tiny DSL for route-table tests in the notation of docs/nameserver-semantics.md §8.1.

Steps read like the scenario tables of docs/nameserver-semantics.md §8::

    s = Scenario()                                     # ns_start @0
    s.reg("C1", M, "broker-a", 0, dv1, [A], t=1000, c="c1")
    s.expect(QT="TopicA{broker-a 8/8/6/0}", BA="broker-a(C1){0:M}", LT="M(1000,dv1,c1)")
    assert s.R("TopicA") == "[broker-a(C1){0:M}] | [broker-a 8/8/6/0]"
    assert s.pub("TopicA") == "a:0-7"

Every step checks A7 (each event it caused carries the step's clock reading as ``ts``) and keeps the
events, numbered with ``seq``, as the event log would. With ``replay=True`` each step also feeds its
events, JSON round-tripped through orjson, into a ``RouteReplayer`` and asserts that the replayed
tables equal the live ones (docs/nameserver-semantics.md §6). ``strip_topics=True`` additionally
drops ``topics`` the way the log writer does (docs/event-log.md, payload keys), so the replay must
resolve them by digest.

The client derivation (publish/subscribe queue sets, docs/nameserver-semantics.md §3) lives here
because no production module provides it yet.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import orjson

from nameserver.model import MASTER_ID, PERM_READ, PERM_WRITE, DataVersion, TopicConfig
from nameserver.routes.manager import (
    RegisterResult,
    RequestContext,
    RouteInfoManager,
    TopicRouteData,
    ns_start_event,
    ns_stop_event,
)
from nameserver.routes.replay import RouteReplayer

# ---------------------------------------------------------------------------- §8.1 vocabulary

M = "10.0.0.1:10911"
S = "10.0.0.2:10911"
N = "10.0.0.3:10911"
HA = {M: "10.0.0.1:10912", S: "10.0.0.2:10912", N: "10.0.0.3:10912"}
ADDR_LETTER = {M: "M", S: "S", N: "N"}

dv0 = DataVersion(0, 0)
dv1 = DataVersion(100, 1)
dv2 = DataVersion(100, 2)
dv3 = DataVersion(200, 2)
DV_NAME = {dv0: "dv0", dv1: "dv1", dv2: "dv2", dv3: "dv3"}

EXPIRY_MS = 120_000
FIRST_SCAN_MS = 5_000
SCAN_INTERVAL_MS = 10_000

REGISTER_BROKER = 103
UNREGISTER_BROKER = 104
WIPE_WRITE_PERM = 205
DELETE_TOPIC = 216
QUERY_DATA_VERSION = 322
ADD_WRITE_PERM = 327
BROKER_HEARTBEAT = 904


def topic(text: str) -> TopicConfig:
    """``"TopicX 8/8/7/0"`` (name read/write/perm/sysflag) as a TopicConfig."""
    name, nums = text.split()
    read, write, perm, sys_flag = (int(x) for x in nums.split("/"))
    return TopicConfig(name, read, write, perm, sys_flag)


A = topic("TopicA 8/8/6/0")
B = topic("TopicB 4/4/6/0")
C = topic("TopicC 8/8/6/0")


# ---------------------------------------------------------------------------- client view (§3)


def publish_queues(route: TopicRouteData | None) -> list[tuple[str, int]]:
    """A producer's queues: writeable QueueData whose BrokerData has a master (id 0)."""
    if route is None:
        return []
    broker_datas = {b.broker_name: b for b in route.broker_datas}
    queues = []
    for queue_data in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if queue_data.perm & PERM_WRITE != PERM_WRITE:
            continue
        broker_data = broker_datas.get(queue_data.broker_name)
        if broker_data is None or MASTER_ID not in broker_data.broker_addrs:
            continue
        queues.extend((queue_data.broker_name, i) for i in range(queue_data.write_queue_nums))
    return queues


def subscribe_queues(route: TopicRouteData | None) -> list[tuple[str, int]]:
    """A consumer's queues: every readable QueueData, no master check (consumers read slaves)."""
    if route is None:
        return []
    queues = []
    for queue_data in sorted(route.queue_datas, key=lambda q: q.broker_name):
        if queue_data.perm & PERM_READ == PERM_READ:
            queues.extend((queue_data.broker_name, i) for i in range(queue_data.read_queue_nums))
    return queues


def queue_set_text(queues: Iterable[tuple[str, int]]) -> str:
    """``[("broker-a", 0..7), ("broker-b", 0..7)]`` -> ``"a:0-7, b:0-7"``; none -> ``"—"``."""
    by_name: dict[str, list[int]] = {}
    for name, queue_id in queues:
        by_name.setdefault(name, []).append(queue_id)
    parts = []
    for name in sorted(by_name):
        ids = sorted(by_name[name])
        short = name.removeprefix("broker-")
        runs, start = [], ids[0]
        for prev, cur in zip(ids, ids[1:] + [None], strict=True):
            if cur != prev + 1:
                runs.append(f"{start}-{prev}" if prev != start else f"{start}")
                start = cur
        parts.append(f"{short}:{','.join(runs)}")
    return ", ".join(parts) if parts else "—"


# ---------------------------------------------------------------------------- rendering


def _addr(addr: str) -> str:
    return ADDR_LETTER.get(addr, addr)


def _dv(dv: DataVersion) -> str:
    return DV_NAME.get(dv, f"dv({dv.timestamp},{dv.counter})")


def _queue(q) -> str:
    return f"{q.broker_name} {q.read_queue_nums}/{q.write_queue_nums}/{q.perm}/{q.topic_sys_flag}"


def _broker(b) -> str:
    addrs = ",".join(f"{i}:{_addr(a)}" for i, a in sorted(b.broker_addrs.items()))
    return f"{b.broker_name}({b.cluster}){{{addrs}}}"


def render_qt(core: RouteInfoManager) -> str:
    """QT in §8.1 notation: ``TopicA{broker-a 8/8/6/0, broker-b 8/8/6/0}, TopicB{...}``."""
    return ", ".join(
        f"{t}{{{', '.join(_queue(q) for _, q in sorted(core.topic_queue_table[t].items()))}}}"
        for t in sorted(core.topic_queue_table)
    )


def render_ba(core: RouteInfoManager) -> str:
    """BA: ``broker-a(C1){0:M,1:S}, broker-b(C1){0:N}``."""
    return ", ".join(_broker(core.broker_addr_table[n]) for n in sorted(core.broker_addr_table))


def render_ca(core: RouteInfoManager) -> str:
    """CA: ``C1{broker-a, broker-x}``."""
    return ", ".join(f"{c}{{{', '.join(sorted(core.cluster_addr_table[c]))}}}" for c in sorted(core.cluster_addr_table))


def render_lt(core: RouteInfoManager) -> str:
    """LT: ``M(1000,dv1,c1)`` = (last_update, dataVersion, connection)."""
    return ", ".join(
        f"{_addr(a)}({i.last_update},{_dv(i.data_version)},{i.channel})"
        for a, i in sorted(core.broker_live_table.items())
    )


def render_fs(core: RouteInfoManager) -> str:
    """FS: ``M["10.0.0.1:40001"]``."""
    return ", ".join(
        f"{_addr(a)}{orjson.dumps(core.filter_server_table[a]).decode()}" for a in sorted(core.filter_server_table)
    )


def render_route(route: TopicRouteData | None) -> str:
    """``R(T)``: ``null`` or ``[brokerDatas] | [queueDatas]``."""
    if route is None:
        return "null"
    brokers = ", ".join(_broker(b) for b in route.broker_datas)
    queues = ", ".join(_queue(q) for q in route.queue_datas)
    return f"[{brokers}] | [{queues}]"


def _norm(text: str) -> str:
    return re.sub(r"\s*,\s*", ",", text.strip())


RENDERERS = {"QT": render_qt, "BA": render_ba, "CA": render_ca, "LT": render_lt, "FS": render_fs}


def table_state(core: RouteInfoManager) -> dict[str, Any]:
    """All five tables as plain comparable values (live entries with their registration keys)."""
    return {
        "QT": {t: dict(q) for t, q in core.topic_queue_table.items()},
        "BA": {n: (b.cluster, dict(b.broker_addrs)) for n, b in core.broker_addr_table.items()},
        "CA": {c: set(names) for c, names in core.cluster_addr_table.items()},
        "LT": {
            a: (i.last_update, i.data_version, i.channel, i.ha_server_addr, i.cluster, i.broker_name, i.broker_id)
            for a, i in core.broker_live_table.items()
        },
        "FS": {a: list(v) for a, v in core.filter_server_table.items()},
    }


def to_log_lines(events: Sequence[dict], first_seq: int) -> list[dict]:
    """Events as the log holds them: ``seq`` added in order, JSON round-tripped through orjson."""
    return [orjson.loads(orjson.dumps({"seq": first_seq + k, **e})) for k, e in enumerate(events)]


def assert_events(events: Sequence[dict], expected: Sequence[tuple[str, dict]]) -> None:
    """Event types in order; for each, the listed keys have the listed values."""
    assert [e["type"] for e in events] == [t for t, _ in expected], events
    for event, (_, keys) in zip(events, expected, strict=True):
        for key, value in keys.items():
            assert event.get(key, "<absent>") == value, (key, event)


def ext_fields(result: RegisterResult) -> dict[str, str]:
    """The response's extFields as in §8.2 (only the present ones)."""
    fields = {"haServerAddr": result.ha_server_addr, "masterAddr": result.master_addr}
    return {k: v for k, v in fields.items() if v is not None}


# ---------------------------------------------------------------------------- the DSL

_DEFAULT: Any = object()


class Scenario:
    """One name server driven step by step; ``ns_start`` at ``start`` on construction.

    Attributes:
        core: the live route tables.
        events: the events of the latest step (as the core returned them).
        log: every event so far, as JSON log lines with ``seq``.
        result: the latest registration's ``RegisterResult``.
    """

    def __init__(
        self, *, start: int = 0, replay: bool = False, strip_topics: bool = False, expiry_ms: int = EXPIRY_MS
    ) -> None:
        self.expiry_ms = expiry_ms
        self.core = RouteInfoManager(expiry_ms)
        self.log: list[dict] = []
        self.events: list[dict] = []
        self.result: RegisterResult | None = None
        self.up = False
        self.open_channels: set[str] = set()
        self.replayer = RouteReplayer() if replay else None
        self.strip_topics = strip_topics
        self._segment_digests: dict[str, str] = {}
        self._next_tick = 0
        self.ns_start(start)

    # ------------------------------------------------------------------ bookkeeping

    def _ctx(self, channel: str, code: int) -> RequestContext:
        return RequestContext(channel, f"10.9.0.1:{50000 + sum(map(ord, channel))}", code)

    def _record(self, events: list[dict], now: int) -> list[dict]:
        for event in events:
            assert event["ts"] == now, f"A7: event ts {event['ts']} != clock {now}: {event}"
        self.events = events
        lines = to_log_lines(events, len(self.log) + 1)
        if self.strip_topics:
            lines = [self._strip(line) for line in lines]
        self.log.extend(lines)
        if self.replayer is not None:
            for line in lines:
                self.replayer.apply(line)
            self.check_replay()
        return events

    def _strip(self, line: dict) -> dict:
        # docs/event-log.md: topics only on an address's first digest-carrying event in a segment
        # and whenever its digest differs from that address's previous one
        if line["type"] == "ns_start":
            self._segment_digests.clear()
        digest = line.get("topics_digest")
        if digest is not None:
            if self._segment_digests.get(line["broker_addr"]) == digest:
                line = {k: v for k, v in line.items() if k != "topics"}
            self._segment_digests[line["broker_addr"]] = digest
        return line

    def check_replay(self) -> None:
        """The replayed tables equal the live ones; ``up`` agrees."""
        assert self.replayer is not None
        assert self.replayer.up == self.up
        assert table_state(self.replayer.routes) == table_state(self.core)

    # ------------------------------------------------------------------ steps (§8.1)

    def ns_start(self, t: int) -> list[dict]:
        """The server (re)starts: all tables empty; scan ticks restart at ``t + 5000``."""
        self.core.clear()
        self.up = True
        self.open_channels.clear()
        self._next_tick = t + FIRST_SCAN_MS
        return self._record([ns_start_event(t, self.expiry_ms, SCAN_INTERVAL_MS, "test")], t)

    def ns_stop(self, t: int) -> list[dict]:
        """Clean shutdown: the tables cease to exist (connection closes are not handled)."""
        self.core.clear()
        self.up = False
        self.open_channels.clear()
        return self._record([ns_stop_event(t, "test")], t)

    def reg(
        self,
        cluster: str,
        addr: str,
        name: str,
        broker_id: int,
        dv: DataVersion,
        topics: Iterable[TopicConfig] = (),
        *,
        t: int,
        c: str,
        filter: list[str] | None = _DEFAULT,
        ha: str | None = _DEFAULT,
        request_version: int = 407,
    ) -> RegisterResult:
        """``reg(cluster, addr, name, id, dv, {topics}) @t cN``; filter list ``[]`` unless given."""
        self.open_channels.add(c)
        self.result = self.core.register_broker(
            cluster,
            addr,
            name,
            broker_id,
            HA.get(addr) if ha is _DEFAULT else ha,
            dv,
            list(topics),
            [] if filter is _DEFAULT else filter,
            t,
            self._ctx(c, REGISTER_BROKER),
            request_version=request_version,
        )
        self._record(self.result.events, t)
        return self.result

    @property
    def ext(self) -> dict[str, str]:
        """extFields of the latest registration's response."""
        assert self.result is not None
        return ext_fields(self.result)

    def unreg(self, cluster: str, addr: str, name: str, broker_id: int, *, t: int, c: str = "c0") -> list[dict]:
        """``unreg(cluster, addr, name, id)``."""
        return self._record(
            self.core.unregister_broker(cluster, addr, name, broker_id, t, self._ctx(c, UNREGISTER_BROKER)), t
        )

    def close(self, channel: str, *, t: int) -> list[dict]:
        """``close(cN)``: the connection ended (§2.4)."""
        self.open_channels.discard(channel)
        return self._record(self.core.on_channel_close(channel, t, "10.9.0.1:1"), t)

    def hb(self, addr: str, *, t: int, c: str = "c5", cluster: str = "C1", name: str = "broker-a") -> list[dict]:
        """``hb(addr)`` = BROKER_HEARTBEAT (904)."""
        return self._record(self.core.broker_heartbeat(cluster, addr, name, t, self._ctx(c, BROKER_HEARTBEAT)), t)

    def qdv(
        self,
        addr: str,
        dv: DataVersion,
        *,
        t: int,
        c: str = "c5",
        cluster: str = "C1",
        name: str = "broker-a",
        broker_id: int = 0,
    ) -> tuple[bool, DataVersion | None]:
        """``qdv(addr, dv)`` = QUERY_DATA_VERSION (322); returns ``(changed, stored version)``."""
        changed, stored, events = self.core.query_data_version(
            cluster, addr, name, broker_id, dv, t, self._ctx(c, QUERY_DATA_VERSION)
        )
        self._record(events, t)
        return changed, stored

    def wipe(self, name: str, *, t: int, c: str = "c7") -> int:
        """``wipe(name)`` = WIPE_WRITE_PERM_OF_BROKER (205); returns wipeTopicCount."""
        count, events = self.core.wipe_write_perm_of_broker(name, t, self._ctx(c, WIPE_WRITE_PERM))
        self._record(events, t)
        return count

    def add(self, name: str, *, t: int, c: str = "c7") -> int:
        """``add(name)`` = ADD_WRITE_PERM_OF_BROKER (327); returns addTopicCount."""
        count, events = self.core.add_write_perm_of_broker(name, t, self._ctx(c, ADD_WRITE_PERM))
        self._record(events, t)
        return count

    def delete(self, topic_name: str, cluster: str | None = None, *, t: int, c: str = "c7") -> list[dict]:
        """``del(topic[, cluster])`` = DELETE_TOPIC_IN_NAMESRV (216)."""
        return self._record(self.core.delete_topic(topic_name, cluster, t, self._ctx(c, DELETE_TOPIC)), t)

    def scan(self, t: int) -> list[dict]:
        """``scan @t``: expire, then close each expired address's connection if still open (§2.5)."""
        expired, channels = self.core.scan_not_active_broker(t)
        events = list(expired)
        for channel in channels:
            if channel in self.open_channels:
                self.open_channels.discard(channel)
                events.extend(self.core.on_channel_close(channel, t, "10.9.0.1:1"))
        self._record(events, t)
        while self._next_tick <= t:
            self._next_tick += SCAN_INTERVAL_MS
        return events

    def quiet_scans(self, until: int) -> None:
        """Run every default scan tick (start + 5000 + k·10000) before ``until``; none may expire."""
        while self._next_tick < until:
            events = self.scan(self._next_tick)
            assert events == [], f"scan @{events[0]['ts']} expired something: {events}"

    # ------------------------------------------------------------------ reads and assertions

    def route(self, topic_name: str) -> TopicRouteData | None:
        """``route(T)``: GET_ROUTEINFO_BY_TOPIC's answer, None for TOPIC_NOT_EXIST."""
        return self.core.pickup_topic_route_data(topic_name)

    def R(self, topic_name: str) -> str:  # the docs' name
        """``R(T)`` in §8.1 notation."""
        return render_route(self.route(topic_name))

    def pub(self, topic_name: str) -> str:
        """The producer's queue set of ``T``, e.g. ``a:0-7`` or ``—``."""
        return queue_set_text(publish_queues(self.route(topic_name)))

    def sub(self, topic_name: str) -> str:
        """The consumer's queue set of ``T``."""
        return queue_set_text(subscribe_queues(self.route(topic_name)))

    def expect(self, **tables: str) -> None:
        """Assert the named tables (QT, BA, CA, LT, FS) in §8.1 notation; ``""`` = empty."""
        for key, expected in tables.items():
            actual = RENDERERS[key](self.core)
            assert _norm(actual) == _norm(expected), f"{key}: got {actual!r}, expected {expected!r}"

    def empty(self) -> None:
        """All five tables empty."""
        self.expect(QT="", BA="", CA="", LT="", FS="")

    def snapshot(self) -> dict[str, Any]:
        """The tables now, to assert "no change" after a later step."""
        return table_state(self.core)


def replay(events: Iterable[dict], replayer: RouteReplayer | None = None) -> RouteReplayer:
    """Apply ``events`` in the order given to ``replayer`` (a fresh one by default)."""
    replayer = RouteReplayer() if replayer is None else replayer
    for event in events:
        replayer.apply(event)
    return replayer
