"""A server's own events and its admin requests: ``ns_start``, ``ns_stop``, ``rejected``,
``wipe_write_perm``, ``add_write_perm`` and ``delete_topic`` (docs/event-log.md, Event types)."""

# no ``from __future__ import annotations``: TypedDict reads NotRequired[...] only from evaluated
# annotations
from collections.abc import Mapping, Sequence
from typing import Any, NotRequired, TypedDict, cast

from nameserver.events.context import RequestContext, builder

# the routing semantics this name server implements (docs/nameserver-semantics.md)
SEMANTICS = "rocketmq-4.9"


class NsStartEvent(TypedDict):
    """The first event of every server run; its tables start empty."""

    ts: int
    type: str
    broker_expiry_ms: int
    scan_interval_ms: int
    semantics: str
    version: str


class NsStopEvent(TypedDict):
    """The last event of a clean shutdown."""

    ts: int
    type: str
    reason: str | None
    silent_closes: NotRequired[int]


class RejectedEvent(TypedDict):
    """A refused request, frame or connection: the reason and whatever was decoded (never secrets).

    Every key but ``ts``, ``type`` and ``reason`` is written only when known, in this order.
    """

    ts: int
    type: str
    request_code: NotRequired[int | None]  # with channel and remote: the request's or connection's
    channel: NotRequired[str]
    remote: NotRequired[str]
    reason: str
    detail: NotRequired[str]
    access_key: NotRequired[str]  # no_permission: the AccessKey id named
    cluster: NotRequired[str]  # this and the next five: what the refused request's header decoded
    broker_name: NotRequired[str]
    broker_addr: NotRequired[str]
    topic: NotRequired[str]
    broker_id: NotRequired[int]
    request_version: NotRequired[int]
    frame_length: NotRequired[int]  # this and the next two: malformed_frame, the frame's shape
    serialize_type: NotRequired[int]
    header_length: NotRequired[int]
    max_connections: NotRequired[int]  # connection_limit
    write_buffer_bytes: NotRequired[int]  # slow_reader
    frame_timeout_ms: NotRequired[int]  # frame_timeout
    refused_count: NotRequired[int]  # this and the next three: log_unavailable
    unlogged_count: NotRequired[int]
    outage_ms: NotRequired[int]
    refreshes: NotRequired[list[Mapping[str, Any]]]


class _AdminEvent(TypedDict):
    ts: int
    type: str
    request_code: int
    channel: str
    remote: str


class WipeWritePermEvent(_AdminEvent):
    """WIPE_WRITE_PERM_OF_BROKER (205)."""

    broker_name: str
    topic_count: int


class AddWritePermEvent(_AdminEvent):
    """ADD_WRITE_PERM_OF_BROKER (327)."""

    broker_name: str
    topic_count: int


class DeleteTopicEvent(_AdminEvent):
    """DELETE_TOPIC_IN_NAMESRV (216); ``cluster`` None: every cluster."""

    topic: str
    cluster: str | None


@builder
def ns_start_event(now: int, broker_expiry_ms: int, scan_interval_ms: int, version: str) -> NsStartEvent:
    """The first event of every server run; its tables start empty."""
    return {
        "ts": now,
        "type": "ns_start",
        "broker_expiry_ms": broker_expiry_ms,
        "scan_interval_ms": scan_interval_ms,
        "semantics": SEMANTICS,
        "version": version,
    }


@builder
def ns_stop_event(now: int, reason: str | None, silent_closes: int | None = None) -> NsStopEvent:
    """The last event of a clean shutdown; ``silent_closes``: the run's connections that closed
    without ever carrying a registration, which got no ``channel_close`` (None: not counted)."""
    event: NsStopEvent = {"ts": now, "type": "ns_stop", "reason": reason}
    if silent_closes is not None:
        event["silent_closes"] = silent_closes
    return event


@builder
def rejected_event(
    now: int,
    reason: str,
    ctx: RequestContext | None = None,
    *,
    detail: str | None = None,
    access_key: str | None = None,
    cluster: str | None = None,
    broker_name: str | None = None,
    broker_addr: str | None = None,
    topic: str | None = None,
    broker_id: int | None = None,
    request_version: int | None = None,
    frame_length: int | None = None,
    serialize_type: int | None = None,
    header_length: int | None = None,
    max_connections: int | None = None,
    write_buffer_bytes: int | None = None,
    frame_timeout_ms: int | None = None,
    refused_count: int | None = None,
    unlogged_count: int | None = None,
    outage_ms: int | None = None,
    refreshes: Sequence[Mapping[str, Any]] | None = None,
) -> RejectedEvent:
    """A refused request (``ctx`` its context), frame or connection (``ctx`` without a request code),
    or the end of a log outage (no ``ctx``): the reason plus every other key that is not None.

    Example:
        >>> event = rejected_event(7, "unknown_code", RequestContext("c1", "10.0.0.7:4000", 999), detail=None)
        >>> list(event.items())  # doctest: +NORMALIZE_WHITESPACE
        [('ts', 7), ('type', 'rejected'), ('request_code', 999), ('channel', 'c1'),
         ('remote', '10.0.0.7:4000'), ('reason', 'unknown_code')]
    """
    event = _rejected_head(now, reason, ctx)
    for key, value in (
        ("detail", detail),
        ("access_key", access_key),
        ("cluster", cluster),
        ("broker_name", broker_name),
        ("broker_addr", broker_addr),
        ("topic", topic),
        ("broker_id", broker_id),
        ("request_version", request_version),
        ("frame_length", frame_length),
        ("serialize_type", serialize_type),
        ("header_length", header_length),
        ("max_connections", max_connections),
        ("write_buffer_bytes", write_buffer_bytes),
        ("frame_timeout_ms", frame_timeout_ms),
        ("refused_count", refused_count),
        ("unlogged_count", unlogged_count),
        ("outage_ms", outage_ms),
        ("refreshes", list(refreshes) if refreshes else None),
    ):
        if value is not None:
            event[key] = value
    return cast(RejectedEvent, event)


def _rejected_head(now: int, reason: str, ctx: RequestContext | None) -> dict[str, Any]:
    """A rejected event's leading keys: the time, the type, the request context if any, the reason."""
    event: dict[str, Any] = {"ts": now, "type": "rejected"}
    if ctx is not None:
        event["request_code"] = ctx.request_code
        event["channel"] = ctx.channel
        event["remote"] = ctx.remote
    event["reason"] = reason
    return event


def _admin(kind: str, now: int, ctx: RequestContext) -> Any:
    return {"ts": now, "type": kind, "request_code": ctx.request_code, "channel": ctx.channel, "remote": ctx.remote}


@builder
def wipe_write_perm_event(now: int, ctx: RequestContext, broker_name: str, topic_count: int) -> WipeWritePermEvent:
    """WIPE_WRITE_PERM_OF_BROKER (205): ``topic_count`` queue-data entries of ``broker_name``."""
    event: WipeWritePermEvent = _admin("wipe_write_perm", now, ctx)
    event["broker_name"] = broker_name
    event["topic_count"] = topic_count
    return event


@builder
def add_write_perm_event(now: int, ctx: RequestContext, broker_name: str, topic_count: int) -> AddWritePermEvent:
    """ADD_WRITE_PERM_OF_BROKER (327): ``topic_count`` queue-data entries of ``broker_name``."""
    event: AddWritePermEvent = _admin("add_write_perm", now, ctx)
    event["broker_name"] = broker_name
    event["topic_count"] = topic_count
    return event


@builder
def delete_topic_event(now: int, ctx: RequestContext, topic: str, cluster: str | None) -> DeleteTopicEvent:
    """DELETE_TOPIC_IN_NAMESRV (216) of ``topic``, in ``cluster`` or (None) every cluster."""
    event: DeleteTopicEvent = _admin("delete_topic", now, ctx)
    event["topic"] = topic
    event["cluster"] = cluster
    return event
