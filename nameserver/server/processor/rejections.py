"""The ``rejected`` events of frames and connections the server refuses or cuts."""

from __future__ import annotations

from typing import Any

from nameserver.codec import MalformedFrame
from nameserver.routes.manager import Event, RequestContext, rejected_event
from nameserver.server.processor.context import ConnectionContext


def malformed_frame_event(now: int, conn: ConnectionContext, exc: MalformedFrame) -> Event:
    """The ``rejected`` event of a frame that closes its connection (docs/remoting-protocol.md
    §9.1): reason
    ``malformed_frame``, the decoder's reason as ``detail``, plus whatever was decoded."""
    decoded = dict(exc.decoded_so_far)
    code = decoded.pop("code", None)
    version = decoded.pop("version", None)
    # the frame's shape keeps its own keys; header fields read before the fault go into detail,
    # because their types differ between the JSON and ROCKETMQ headers (language name vs byte)
    shape = {key: decoded.pop(key) for key in ("frame_length", "serialize_type", "header_length") if key in decoded}
    detail = exc.reason
    if decoded:
        detail += " (" + ", ".join(f"{k}={v}" for k, v in sorted(decoded.items())) + ")"
    return rejected_event(
        now,
        "malformed_frame",
        RequestContext(conn.channel, conn.remote, code),
        detail=detail,
        request_version=version,
        **shape,
    )


def connection_event(now: int, conn: ConnectionContext, reason: str, **extra: Any) -> Event:
    """A ``rejected`` event for a connection the server refused or cut (limit, slowloris, slow reader)."""
    return rejected_event(now, reason, RequestContext(conn.channel, conn.remote, None), **extra)
