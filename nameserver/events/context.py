"""What every builder shares: the untyped form consumers read, and a request's context."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ParamSpec

# What the writer, the journal and the replay take: any event, read by key. Each builder's
# TypedDict says which keys its type has.
Event = dict[str, Any]

P = ParamSpec("P")


def builder(build: Callable[P, Any]) -> Callable[P, Event]:
    """Mark an event builder: mypy checks its body against the TypedDict it returns, and its callers
    get the plain :data:`Event` the writer, the journal and the replay take (to mypy a TypedDict is
    no ``dict[str, Any]``). The function itself is returned: no cost on the hot path."""
    return build


@dataclass(frozen=True, slots=True)
class RequestContext:
    """Where a request came from; copied into its event (docs/event-log.md, request keys).

    ``request_code`` is None for a connection refused or cut before any request was decoded.
    """

    channel: str
    remote: str
    request_code: int | None
