"""Custom headers <-> extFields (docs/remoting-protocol.md §6), and the request errors they raise.

Typed request and response headers travel only as ``extFields`` strings: :func:`decode_custom_header`
reads them, :func:`to_ext_fields` writes them. Re-exported by :mod:`nameserver.codec`.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from nameserver.codec.constants import RequestCode
from nameserver.codec.fastjson import java_double_text


class RequestError(Exception):
    """A request the handler refuses with SYSTEM_ERROR (§9.2); the connection stays open.

    Attributes:
        remark: the response remark.
        reason: the ``rejected`` event reason (``bad_header``, ``bad_body``, ``crc_mismatch``).
    """

    reason = "internal_error"

    def __init__(self, remark: str) -> None:
        super().__init__(remark)
        self.remark = remark


class BadHeader(RequestError):
    """A required extField missing or unparsable, or a negative REGISTER_BROKER version (§6, §8.1).

    Attributes:
        field: the extField name (``version`` for the command's version).
    """

    reason = "bad_header"

    def __init__(self, field: str, remark: str) -> None:
        super().__init__(remark)
        self.field = field


INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1

# [0-9], not \d: Python's \d also matches non-ASCII digits.
_INTEGER = re.compile(r"[+-]?[0-9]+")
# Java Double.parseDouble: decimal or hex float, NaN/Infinity, optional f/F/d/D suffix.
_DECIMAL = re.compile(r"[+-]?(?:NaN|Infinity|(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?[fFdD]?)")
_HEX_FLOAT = re.compile(r"([+-]?0[xX](?:[0-9a-fA-F]+\.?[0-9a-fA-F]*|\.[0-9a-fA-F]+)[pP][+-]?[0-9]+)[fFdD]?")


def _parse_integer(text: str, low: int, high: int, kind: str) -> int:
    # Plain ASCII digits (every value Java writes for a non-negative number) skip the regex:
    # for ASCII text, ``isdigit`` is exactly [0-9].
    if not (type(text) is str and text.isascii() and text.isdigit()):
        if not isinstance(text, str) or _INTEGER.fullmatch(text) is None:
            raise ValueError(f"not an {kind}: {text!r}")
    value = int(text)
    if not low <= value <= high:
        raise ValueError(f"{kind} out of range: {text!r}")
    return value


def parse_int32(text: str) -> int:
    """Parse an int extField (§6). Raises ValueError on anything else, e.g. ``" 5"`` or ``2**31``."""
    return _parse_integer(text, INT32_MIN, INT32_MAX, "int32")


def parse_int64(text: str) -> int:
    """Parse a long extField (§6). Raises ValueError on anything else."""
    return _parse_integer(text, INT64_MIN, INT64_MAX, "int64")


def parse_bool(text: str | None) -> bool:
    """Java ``Boolean.parseBoolean``: true iff the text equals ``true`` ignoring case; never fails."""
    return text is not None and len(text) == 4 and text.lower() == "true"


def parse_double(text: str) -> float:
    """Java ``Double.parseDouble`` (surrounding whitespace and control chars trimmed).

    Raises:
        ValueError: not a Java double literal.
    """
    stripped = text.strip("".join(chr(c) for c in range(33)))  # Java String.trim()
    hex_match = _HEX_FLOAT.fullmatch(stripped)
    if hex_match is not None:
        return float.fromhex(hex_match.group(1))
    if _DECIMAL.fullmatch(stripped) is None:
        raise ValueError(f"not a double: {text!r}")
    core = stripped.rstrip("fFdD") if not stripped.endswith(("NaN", "Infinity")) else stripped
    return float(core.replace("Infinity", "inf"))


def format_ext_value(value: Any) -> str:
    """The text a Java writer puts in extFields: ``true``/``false``, decimal ints, Java doubles."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double_text(value)
    if isinstance(value, str):
        return value
    raise TypeError(f"no extFields text for {type(value).__name__}")


def to_ext_fields(values: Mapping[str, Any]) -> dict[str, str]:
    """extFields of a custom header: every non-null field as text (§6, T6/T7), ``None`` omitted."""
    return {k: format_ext_value(v) for k, v in values.items() if v is not None}


# --- declarative headers --------------------------------------------------------------------

STRING, INT32, INT64, BOOL, DOUBLE = "string", "int32", "int64", "bool", "double"
_PARSERS = {STRING: lambda text: text, INT32: parse_int32, INT64: parse_int64, BOOL: parse_bool, DOUBLE: parse_double}


@dataclass(frozen=True, slots=True)
class HeaderField:
    """One field of a custom header: extField name, kind, required (``!`` in §7), default."""

    name: str
    kind: str = STRING
    required: bool = False
    default: Any = None


def decode_custom_header(ext_fields: Mapping[str, str] | None, fields: Sequence[HeaderField]) -> dict[str, Any]:
    """Typed values of ``fields`` from ``ext_fields``; unknown extFields are ignored (§6).

    Parsing follows §6: int32/int64 by the regex ``^[+-]?[0-9]+$`` plus range, booleans as Java
    ``Boolean.parseBoolean``. A missing or unparsable **required** field raises :class:`BadHeader`
    (the handler answers SYSTEM_ERROR with its remark); an unparsable **optional** field keeps its
    default, as RocketMQ does.

    Returns:
        field name -> parsed value; an absent or unparsable optional field gets its default.

    Raises:
        BadHeader: a required field is missing (remark ``the custom field <name> is null``) or
            unparsable (remark names the field and the text). Fields are checked in order.

    Example:
        >>> decode_custom_header({"topic": "T"}, REQUEST_HEADERS[105])
        {'topic': 'T', 'acceptStandardJsonOnly': False}
    """
    get = (ext_fields or _NO_EXT).get
    values: dict[str, Any] = {}
    for name, parse, required, default, kind in _plan(fields):
        text = get(name)
        if text is None:
            if required:
                raise BadHeader(name, f"the custom field {name} is null")
            values[name] = default
        elif parse is None:
            values[name] = text  # a string field takes the text as it is
        else:
            try:
                values[name] = parse(text)
            except ValueError:
                if required:
                    raise BadHeader(name, f"the custom field {name} is not a valid {kind}: {text}") from None
                values[name] = default
    return values


_NO_EXT: Mapping[str, str] = {}
# Each header's fields as plain tuples, made once per header (request headers are constants).
# Keyed by id(); the entry holds the header itself, so an id cannot be reused while cached.
_PLANS: dict[int, tuple[Sequence[HeaderField], tuple[tuple[Any, ...], ...]]] = {}


def _plan(fields: Sequence[HeaderField]) -> tuple[tuple[Any, ...], ...]:
    entry = _PLANS.get(id(fields))
    if entry is not None and entry[0] is fields:
        return entry[1]
    plan = tuple(
        (f.name, None if f.kind == STRING else _PARSERS[f.kind], f.required, f.default, f.kind) for f in fields
    )
    if isinstance(fields, tuple):  # immutable: safe to remember
        if len(_PLANS) >= 256:
            _PLANS.clear()
        _PLANS[id(fields)] = (fields, plan)
    return plan


def _required(*names: str) -> tuple[HeaderField, ...]:
    return tuple(HeaderField(n, required=True) for n in names)


_BROKER_ID = HeaderField("brokerId", INT64, required=True)

# Request headers of §7, in RocketMQ's field order (which decides the field a remark names).
REQUEST_HEADERS: dict[int, tuple[HeaderField, ...]] = {
    RequestCode.PUT_KV_CONFIG: _required("namespace", "key", "value"),
    RequestCode.GET_KV_CONFIG: _required("namespace", "key"),
    RequestCode.DELETE_KV_CONFIG: _required("namespace", "key"),
    RequestCode.REGISTER_BROKER: _required("brokerName", "brokerAddr", "clusterName", "haServerAddr")
    + (_BROKER_ID, HeaderField("compressed", BOOL, default=False), HeaderField("bodyCrc32", INT32, default=0)),
    RequestCode.UNREGISTER_BROKER: _required("brokerName", "brokerAddr", "clusterName") + (_BROKER_ID,),
    RequestCode.GET_ROUTEINFO_BY_TOPIC: _required("topic")
    + (HeaderField("acceptStandardJsonOnly", BOOL, default=False),),
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: _required("brokerName"),
    RequestCode.DELETE_TOPIC_IN_NAMESRV: _required("topic") + (HeaderField("clusterName"),),
    RequestCode.GET_KVLIST_BY_NAMESPACE: _required("namespace"),
    RequestCode.GET_TOPICS_BY_CLUSTER: _required("cluster"),
    RequestCode.QUERY_DATA_VERSION: _required("brokerName", "brokerAddr", "clusterName") + (_BROKER_ID,),
    RequestCode.ADD_WRITE_PERM_OF_BROKER: _required("brokerName"),
    RequestCode.BROKER_HEARTBEAT: _required("clusterName", "brokerAddr", "brokerName"),
    # 5.x only (the "5" release profile): GetBrokerMemberGroupRequestHeader
    RequestCode.GET_BROKER_MEMBER_GROUP: _required("clusterName", "brokerName"),
}
