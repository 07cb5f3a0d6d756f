"""The events of brokers' requests and of the expiry scan: ``register``, ``heartbeat``,
``unregister``, ``expire`` and ``channel_close`` (docs/event-log.md, Event types).

``register`` and ``heartbeat`` are built on the server's hot path (one per broker per server every
30 s), so the builders are plain functions filling a dict literal.
"""

# no ``from __future__ import annotations``: TypedDict reads NotRequired[...] only from evaluated
# annotations
from collections.abc import Sequence
from typing import Any, NotRequired, TypedDict

from nameserver.events.context import RequestContext, builder
from nameserver.model import DataVersion, TopicConfig


class _BrokerRequestEvent(TypedDict):
    # the request keys and the broker keys, in the log's order, shared by 103, 104, 322 and 904
    ts: int
    type: str
    request_code: int
    channel: str
    remote: str
    cluster: str | None
    broker_name: str | None
    broker_id: int | None
    broker_addr: str
    ha_addr: str | None


class RegisterEvent(_BrokerRequestEvent):
    """REGISTER_BROKER (103) from an address with no live entry."""

    data_version: DataVersion | dict[str, Any]
    topics_digest: str
    topics: Sequence[TopicConfig]  # the writer leaves them out when the segment already has them
    filter_servers: list[str] | None
    request_version: int


class HeartbeatEvent(_BrokerRequestEvent):
    """REGISTER_BROKER (103) from a live address, BROKER_HEARTBEAT (904) or QUERY_DATA_VERSION (322)."""

    data_version: NotRequired[DataVersion | dict[str, Any]]  # 103 and 322
    topics_digest: NotRequired[str]  # this and the rest: 103 only
    topics: NotRequired[Sequence[TopicConfig]]
    filter_servers: NotRequired[list[str] | None]
    request_version: NotRequired[int]


class UnregisterEvent(_BrokerRequestEvent):
    """UNREGISTER_BROKER (104); ``ha_addr`` is that of the live entry it removed, if any."""


class ExpireEvent(TypedDict):
    """The expiry scan removed a silent broker."""

    ts: int
    type: str
    broker_addr: str
    last_update_ts: int
    cluster: str
    broker_name: str
    broker_id: int


class ChannelCloseEvent(TypedDict):
    """A connection that carried a registration closed: one per live address, or one with a null address."""

    ts: int
    type: str
    channel: str
    remote: str
    broker_addr: str | None
    cluster: NotRequired[str]  # this and the rest: the live entry's, when there was one
    broker_name: NotRequired[str]
    broker_id: NotRequired[int]


def _broker_request(
    kind: str,
    now: int,
    ctx: RequestContext,
    cluster: str | None,
    broker_name: str | None,
    broker_id: int | None,
    broker_addr: str,
    ha_addr: str | None,
) -> Any:
    return {
        "ts": now,
        "type": kind,
        "request_code": ctx.request_code,
        "channel": ctx.channel,
        "remote": ctx.remote,
        "cluster": cluster,
        "broker_name": broker_name,
        "broker_id": broker_id,
        "broker_addr": broker_addr,
        "ha_addr": ha_addr,
    }


@builder
def register_event(
    now: int,
    ctx: RequestContext,
    cluster: str,
    broker_name: str,
    broker_id: int,
    broker_addr: str,
    ha_addr: str | None,
    data_version: DataVersion,
    topics_digest: str,
    topics: Sequence[TopicConfig],
    filter_servers: list[str] | None,
    request_version: int,
) -> RegisterEvent:
    """A REGISTER_BROKER from an address that had no live entry (its topics sorted by topic)."""
    event: RegisterEvent = _broker_request("register", now, ctx, cluster, broker_name, broker_id, broker_addr, ha_addr)
    event["data_version"] = data_version
    event["topics_digest"] = topics_digest
    event["topics"] = topics
    event["filter_servers"] = filter_servers
    event["request_version"] = request_version
    return event


@builder
def heartbeat_event(
    now: int,
    ctx: RequestContext,
    cluster: str | None,
    broker_name: str | None,
    broker_id: int | None,
    broker_addr: str,
    ha_addr: str | None,
    data_version: DataVersion | None = None,
    topics_digest: str | None = None,
    topics: Sequence[TopicConfig] = (),
    filter_servers: list[str] | None = None,
    request_version: int = 0,
) -> HeartbeatEvent:
    """A request that refreshes a live address: a REGISTER_BROKER (103) from a live address (every
    argument given, as :func:`register_event`), a 322 (``data_version`` only) or a 904 (none of them).

    Example:
        >>> ctx = RequestContext("c1", "10.0.0.5:50112", 904)
        >>> list(heartbeat_event(5, ctx, "DefaultCluster", "broker-a", None, "10.0.0.5:10911", None))[-2:]
        ['broker_addr', 'ha_addr']
    """
    event: HeartbeatEvent = _broker_request(
        "heartbeat", now, ctx, cluster, broker_name, broker_id, broker_addr, ha_addr
    )
    if data_version is not None:
        event["data_version"] = data_version
    if topics_digest is not None:
        event["topics_digest"] = topics_digest
        event["topics"] = topics
        event["filter_servers"] = filter_servers
        event["request_version"] = request_version
    return event


@builder
def unregister_event(
    now: int, ctx: RequestContext, cluster: str, broker_name: str, broker_id: int, broker_addr: str, ha_addr: str | None
) -> UnregisterEvent:
    """An UNREGISTER_BROKER (104)."""
    event: UnregisterEvent = _broker_request(
        "unregister", now, ctx, cluster, broker_name, broker_id, broker_addr, ha_addr
    )
    return event


@builder
def expire_event(
    now: int, broker_addr: str, last_update_ts: int, cluster: str, broker_name: str, broker_id: int
) -> ExpireEvent:
    """The expiry scan removed ``broker_addr``, last refreshed at ``last_update_ts``."""
    return {
        "ts": now,
        "type": "expire",
        "broker_addr": broker_addr,
        "last_update_ts": last_update_ts,
        "cluster": cluster,
        "broker_name": broker_name,
        "broker_id": broker_id,
    }


@builder
def channel_close_event(
    now: int,
    channel: str,
    remote: str,
    broker_addr: str | None = None,
    cluster: str = "",
    broker_name: str = "",
    broker_id: int = 0,
) -> ChannelCloseEvent:
    """A connection closed: the live address registered over it with its broker keys, or, with
    ``broker_addr`` None, the single event of a connection that had none."""
    if broker_addr is None:
        return {"ts": now, "type": "channel_close", "channel": channel, "remote": remote, "broker_addr": None}
    return {
        "ts": now,
        "type": "channel_close",
        "channel": channel,
        "remote": remote,
        "broker_addr": broker_addr,
        "cluster": cluster,
        "broker_name": broker_name,
        "broker_id": broker_id,
    }
