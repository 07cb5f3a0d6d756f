"""Replay of the event log into a ``RouteInfoManager`` (docs/nameserver-semantics.md §6).

Events are applied per name server in ``seq`` order with ``now`` = the event's ``ts``. The replay
never runs scans: expiries are in the log. The result is the server's exact table state, which is
what ``nsaudit route``/``cluster`` and the Spark rebuild must agree with.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nameserver.model import DataVersion, TopicConfig
from nameserver.routes.manager import RequestContext, RouteInfoManager, iter_topic_configs
from schemas.event_types import OBSERVATION_TYPES


class ReplayError(ValueError):
    """An event that cannot be replayed (a 103 whose topics were never logged, an unknown type)."""


class RouteReplayer:
    """One name server's tables rebuilt from its events.

    Attributes:
        routes: the replayed tables.
        up: False between ``ns_stop`` and the next ``ns_start`` (no server was answering).
        last_seq / last_ts: the last applied event.
    """

    def __init__(self, broker_expiry_ms: int = 120_000, journal: list[Any] | None = None) -> None:
        self.routes = RouteInfoManager(broker_expiry_ms, journal=journal)
        self.up = True
        self.last_seq: int | None = None
        self.last_ts: int | None = None
        # topic lists by digest: content-addressed, so valid across segments and days
        self._topics_by_digest: dict[str, tuple[TopicConfig, ...]] = {}

    def learn_topics(self, digest: str, topics: Iterable[Mapping[str, Any]]) -> None:
        """Make a digest's topic list known (e.g. from an earlier segment than the replay saw)."""
        self._topics_by_digest[digest] = iter_topic_configs(topics)

    def apply(self, event: Mapping[str, Any]) -> None:
        """Apply one event (§6 table)."""
        kind = event["type"]
        now = event["ts"]
        handler = _HANDLERS.get(kind)
        if handler is None:
            raise ReplayError(f"unknown event type {kind!r} (seq {event.get('seq')})")
        handler(self, event, now)
        self.last_seq = event.get("seq", self.last_seq)
        self.last_ts = now

    # ------------------------------------------------------------------ handlers

    def _ns_start(self, event: Mapping[str, Any], now: int) -> None:
        self.routes.clear()
        if "broker_expiry_ms" in event and event["broker_expiry_ms"] is not None:
            self.routes.broker_expiry_ms = event["broker_expiry_ms"]
        self.up = True

    def _ns_stop(self, event: Mapping[str, Any], now: int) -> None:
        self.routes.clear()
        self.up = False

    def _register(self, event: Mapping[str, Any], now: int) -> None:
        code = event.get("request_code")
        ctx = RequestContext(event.get("channel") or "", event.get("remote") or "", code or 103)
        addr = event["broker_addr"]
        if code == 904:
            live = self.routes.broker_live_table.get(addr)
            if live is not None:
                self.routes._refresh_live(addr, live, now)
            return
        data_version = _data_version(event.get("data_version"))
        if code == 322:
            live = self.routes.broker_live_table.get(addr)
            if live is not None and live.data_version == data_version:
                self.routes._refresh_live(addr, live, now)
            return
        digest = event.get("topics_digest")
        topics = event.get("topics")
        if topics is not None:
            resolved = iter_topic_configs(topics)
            if digest is not None:
                self._topics_by_digest[digest] = resolved
        elif digest is not None and digest in self._topics_by_digest:
            resolved = self._topics_by_digest[digest]
        else:
            raise ReplayError(
                f"event seq {event.get('seq')} ({addr}) has topics digest {digest} but its topics were never logged"
            )
        self.routes.register_broker(
            event["cluster"],
            addr,
            event["broker_name"],
            event["broker_id"],
            event.get("ha_addr"),
            data_version,
            resolved,
            event.get("filter_servers"),
            now,
            ctx,
            request_version=event.get("request_version") or 0,
            digest=digest or "",
        )

    def _unregister(self, event: Mapping[str, Any], now: int) -> None:
        ctx = RequestContext(event.get("channel") or "", event.get("remote") or "", 104)
        self.routes.unregister_broker(
            event["cluster"], event["broker_addr"], event["broker_name"], event.get("broker_id") or 0, now, ctx
        )

    def _remove(self, event: Mapping[str, Any], now: int) -> None:
        addr = event.get("broker_addr")
        if addr is not None:
            self.routes.remove_address(addr)

    def _wipe(self, event: Mapping[str, Any], now: int) -> None:
        self.routes.wipe_write_perm_of_broker(event["broker_name"], now, _NO_CTX)

    def _add(self, event: Mapping[str, Any], now: int) -> None:
        self.routes.add_write_perm_of_broker(event["broker_name"], now, _NO_CTX)

    def _delete_topic(self, event: Mapping[str, Any], now: int) -> None:
        self.routes.delete_topic(event["topic"], event.get("cluster"), now, _NO_CTX)

    def _rejected(self, event: Mapping[str, Any], now: int) -> None:
        # a refusal changes no table; the gap event of a log outage may credit the liveness of
        # brokers whose refreshes were refused meanwhile (docs/nameserver-semantics.md §2.13)
        refreshes = event.get("refreshes")
        if refreshes:
            self.routes.apply_refreshes(refreshes)

    def _nothing(self, event: Mapping[str, Any], now: int) -> None:
        return None


_NO_CTX = RequestContext("", "", 0)

_HANDLERS = {
    "ns_start": RouteReplayer._ns_start,
    "ns_stop": RouteReplayer._ns_stop,
    "register": RouteReplayer._register,
    "heartbeat": RouteReplayer._register,
    "unregister": RouteReplayer._unregister,
    "channel_close": RouteReplayer._remove,
    "expire": RouteReplayer._remove,
    "wipe_write_perm": RouteReplayer._wipe,
    "add_write_perm": RouteReplayer._add,
    "delete_topic": RouteReplayer._delete_topic,
    "rejected": RouteReplayer._rejected,
    # what a collector saw on another server (nsaudit collect): no table of this stream changes
    **{kind: RouteReplayer._nothing for kind in OBSERVATION_TYPES},
}


def _data_version(obj: Mapping[str, Any] | DataVersion | None) -> DataVersion:
    if obj is None:
        return DataVersion(0, 0)
    if isinstance(obj, DataVersion):
        return obj
    return DataVersion(obj.get("timestamp") or 0, obj.get("counter") or 0)
