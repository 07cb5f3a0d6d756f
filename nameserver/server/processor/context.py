"""What a handler works with: the connection a request came over, and what the request did; the
shape of a handler and of a dispatch table."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import MethodType
from typing import Any

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


# A handler as dispatch calls it: (request, its connection, now in epoch ms) -> what it did.
Handler = Callable[[RemotingCommand, ConnectionContext, int], Outcome]
# A handler class's ``TABLE``: request code -> the class's own function for it, written in the
# class body below the functions it names (bound to an instance by :func:`bind_table`).
HandlerTable = dict[int, Callable[..., Outcome]]


def bind_table(owner: Any) -> dict[int, Handler]:
    """``owner``'s class's ``TABLE``, each function bound to ``owner``.

    Example:
        >>> class Echo:
        ...     def _echo(self, cmd, conn, now):
        ...         return Outcome(cmd)
        ...     TABLE = {7: _echo}
        >>> bind_table(Echo())[7](None, None, 0)
        Outcome(response=None, events=[], changed=False)
    """
    table: HandlerTable = type(owner).TABLE
    return {int(code): MethodType(function, owner) for code, function in table.items()}


def request_context(conn: ConnectionContext, cmd: RemotingCommand) -> RequestContext:
    """The request as the route tables log it: its connection and request code."""
    return RequestContext(conn.channel, conn.remote, cmd.code)


_BROKER_KEYS = (
    ("clusterName", "cluster"),
    ("brokerName", "broker_name"),
    ("brokerAddr", "broker_addr"),
    ("topic", "topic"),
)


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
