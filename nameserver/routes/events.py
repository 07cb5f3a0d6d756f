"""The events the route tables return, as docs/event-log.md describes them (without ``v``,
``ns`` and ``seq``, which the writer stamps), and the request context they copy."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping, Sequence

from nameserver.model import DataVersion, TopicConfig

Event = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Where a request came from; copied into its event (docs/event-log.md, request events)."""

    channel: str
    remote: str
    request_code: int


def topic_key(topic: TopicConfig) -> str:
    """The sort key of topic configs: the topic name."""
    return topic.topic


def ns_start_event(now: int, broker_expiry_ms: int, scan_interval_ms: int, version: str) -> Event:
    """The first event of every server run; its tables start empty."""
    return {
        "ts": now,
        "type": "ns_start",
        "broker_expiry_ms": broker_expiry_ms,
        "scan_interval_ms": scan_interval_ms,
        "semantics": "rocketmq-4.9",
        "version": version,
    }


def ns_stop_event(now: int, reason: str, silent_closes: int | None = None) -> Event:
    """The last event of a clean shutdown; ``silent_closes``: the run's connections that closed
    without ever carrying a registration, which got no ``channel_close`` (None: not counted)."""
    event: Event = {"ts": now, "type": "ns_stop", "reason": reason}
    if silent_closes is not None:
        event["silent_closes"] = silent_closes
    return event


def rejected_event(now: int, reason: str, ctx: RequestContext | None, **decoded: Any) -> Event:
    """A refused request: the reason plus whatever was decoded (never secrets)."""
    event: Event = {"ts": now, "type": "rejected"}
    if ctx is not None:
        event.update(request_code=ctx.request_code, channel=ctx.channel, remote=ctx.remote)
    event["reason"] = reason
    event.update({k: v for k, v in decoded.items() if v is not None})
    return event


def iter_topic_configs(objs: Iterable[Mapping[str, Any] | TopicConfig]) -> tuple[TopicConfig, ...]:
    """Event-log topic objects (or ``TopicConfig`` values, from in-memory events) to a sorted tuple."""
    return tuple(
        sorted((o if isinstance(o, TopicConfig) else TopicConfig.from_json_obj(o) for o in objs), key=topic_key)
    )


def register_event(was_live: bool, cluster: str, broker_addr: str, broker_name: str, broker_id: int,
                   ha_addr: str | None, data_version: DataVersion, digest: str, topics: Sequence[TopicConfig],
                   filter_servers: list[str] | None, now: int, ctx: RequestContext, request_version: int) -> Event:
    """The event of a REGISTER_BROKER: ``heartbeat`` when the address was live, else ``register``."""
    return {
        "ts": now,
        "type": "heartbeat" if was_live else "register",
        "request_code": ctx.request_code,
        "channel": ctx.channel,
        "remote": ctx.remote,
        "cluster": cluster,
        "broker_name": broker_name,
        "broker_id": broker_id,
        "broker_addr": broker_addr,
        "ha_addr": ha_addr,
        "data_version": data_version,
        "topics_digest": digest,
        "topics": topics,
        "filter_servers": filter_servers,
        "request_version": request_version,
    }
