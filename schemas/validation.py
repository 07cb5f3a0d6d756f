"""What every reader checks of a line before it counts as an event, derived from
:data:`schemas.events.EVENT_KEYS` (docs/event-log.md, "What readers owe the writer").

:data:`EVENT_RULE` is the v1 event as a tree of :class:`ValueRule`: for each place in a line, the
JSON kind its value must have, whether JSON null may stand there, and for an object the only keys
it may hold. Every reader path applies this one tree (the JVM check in ``jobs.ingest.checks``,
the fast path in ``jobs.ingest.classifier``), so a line is judged alike whichever path reads it.

:data:`MAX_LINE_BYTES` bounds a line. The longest line the writer can produce is a ``register``
whose ``topics`` came from the largest body the name server decodes: a frame of at most
:data:`MAX_FRAME_BYTES` (its header gives the broker's strings), whose body may be compressed and
inflate to at most :data:`MAX_INFLATED_BYTES` of topic configs. Written as JSON, no part of either
grows by more than :data:`JSON_GROWTH` times: a control character in a name becomes ``\\u00XX``,
and a topic's fixed keys (about 120 bytes) come from at least 21 bytes of a compressed body's
topic text (length prefix, name, numbers and filter type).
"""

from __future__ import annotations

from dataclasses import dataclass

from schemas.events import BOOLEAN, EVENT_KEYS, INT32, INT64, STRING, Array, FieldType, Key, Struct

# The name server's limits (nameserver.codec: MAX_FRAME_BYTES, MAX_INFLATED_BYTES); schemas sit
# below the name server, so they are restated here and a test keeps them equal.
MAX_FRAME_BYTES = 16 * 1024 * 1024
MAX_INFLATED_BYTES = 256 * 1024 * 1024
JSON_GROWTH = 6
# Bytes of a line without its "\n". Below 2 GiB, so every line a reader keeps fits one Arrow or
# JVM string.
MAX_LINE_BYTES = JSON_GROWTH * (MAX_FRAME_BYTES + MAX_INFLATED_BYTES)

# JSON kinds of a value
JSON_STRING = "string"
JSON_INTEGER = "integer"
JSON_BOOLEAN = "boolean"
JSON_OBJECT = "object"
JSON_ARRAY = "array"

_INT_BOUNDS = {INT32: (-(2**31), 2**31 - 1), INT64: (-(2**63), 2**63 - 1)}
_SCALAR_KINDS = {STRING: JSON_STRING, INT32: JSON_INTEGER, INT64: JSON_INTEGER, BOOLEAN: JSON_BOOLEAN}


@dataclass(frozen=True)
class ValueRule:
    """What may stand at one place of a line.

    Attributes:
        path: the place as reasons name it: ``broker_addr``, ``data_version.counter``,
            ``topics[].perm``, ``filter_servers[]``; empty for the line itself.
        kind: the JSON kind of the value (``JSON_*``).
        null_is_wrong_type: JSON null here is ``wrong_type``. False where null is allowed, and
            where the key is required (its null is reported as ``missing_key``).
        bounds: ``(low, high)`` of an integer, None otherwise.
        keys: an object's keys, the only ones it may hold, each with its rule.
        element: an array's element rule.
    """

    path: str
    kind: str
    null_is_wrong_type: bool = False
    bounds: tuple[int, int] | None = None
    keys: tuple[tuple[str, ValueRule], ...] = ()
    element: ValueRule | None = None


def _rule(path: str, kind: FieldType, null_is_wrong_type: bool) -> ValueRule:
    if isinstance(kind, Struct):
        keys = tuple((k.name, _key_rule(f"{path}.{k.name}", k)) for k in kind.keys)
        return ValueRule(path, JSON_OBJECT, null_is_wrong_type, keys=keys)
    if isinstance(kind, Array):
        # an array's elements are never null (schemas.events.Array)
        return ValueRule(path, JSON_ARRAY, null_is_wrong_type, element=_rule(f"{path}[]", kind.element, True))
    return ValueRule(path, _SCALAR_KINDS[kind], null_is_wrong_type, bounds=_INT_BOUNDS.get(kind))


def _key_rule(path: str, key: Key) -> ValueRule:
    return _rule(path, key.type, not key.nullable and not key.required)


EVENT_RULE = ValueRule("", JSON_OBJECT, keys=tuple((k.name, _key_rule(k.name, k)) for k in EVENT_KEYS))

# Top-level keys that may be absent but not null (``topics``). Where a reader cannot tell an
# absent key from a null one, it must look at the text for these.
NOT_NULL_WHEN_PRESENT: tuple[str, ...] = tuple(name for name, rule in EVENT_RULE.keys if rule.null_is_wrong_type)
