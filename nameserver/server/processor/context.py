"""What a handler works with: the connection a request came over, and what the request did."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping

from nameserver.codec import RemotingCommand, parse_int64
from nameserver.routes.manager import Event, RequestContext


@dataclass(frozen=True, slots=True)
class ConnectionContext:
    """One connection as the processor sees it: a stable channel id and the peer ``host:port``."""

    channel: str
    remote: str


@dataclass(slots=True)
class Outcome:
    """What one request did.

    Attributes:
        response: the command to send back, or None (oneway request, stray response).
        events: the events to append, in order (docs/event-log.md, without v/ns/seq).
        changed: True when a route table (live table included) may have changed.
    """

    response: RemotingCommand | None
    events: list[Event] = field(default_factory=list)
    changed: bool = False



def request_context(conn: ConnectionContext, cmd: RemotingCommand) -> RequestContext:
    """The request as the route tables log it: its connection and request code."""
    return RequestContext(conn.channel, conn.remote, cmd.code)


_BROKER_KEYS = (("clusterName", "cluster"), ("brokerName", "broker_name"), ("brokerAddr", "broker_addr"), ("topic", "topic"))


def decoded_keys(cmd: RemotingCommand) -> dict[str, Any]:
    """What a refused request decoded, in event-log names (never ACL keys or other extFields)."""
    ext: Mapping[str, str] = cmd.ext_fields or {}
    decoded: dict[str, Any] = {event_key: ext.get(wire_key) for wire_key, event_key in _BROKER_KEYS}
    try:
        decoded["broker_id"] = parse_int64(ext["brokerId"])
    except (KeyError, ValueError):
        pass
    decoded["request_version"] = cmd.version
    return decoded

