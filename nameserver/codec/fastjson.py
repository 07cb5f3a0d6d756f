"""JSON bodies as RocketMQ's fastjson 1.x writes and reads them (remoting protocol §10).

Two output forms (§10.1, §10.3):

* **default form** (``standard=False``): non-string map keys (broker ids) unquoted, ``{0:"addr"}``,
  which is not valid JSON; non-ASCII written as raw UTF-8.
* **standard form** (``standard=True``, fastjson ``BrowserCompatible``): every key quoted,
  ``/`` written ``\\/`` and every character >= U+007F written ``\\uXXXX`` (uppercase UTF-16 units).

Both forms: no whitespace, object fields in alphabetical order, null fields omitted, map keys
sorted (strings by code point, which is UTF-8 byte order; broker ids numerically; SEM A3).

Input (:func:`loads`) is RFC 8259 JSON plus bare-integer object keys, which come back as strings
(``{0:"a"}`` and ``{"0":"a"}`` parse equal). Pure functions: no clock, no I/O.

Body builders take the route table's value objects *or* plain mappings with the same
snake_case names (duck typed), so the server passes its dataclasses straight in:

* TopicRouteData: ``broker_datas``, ``queue_datas``, ``filter_server_table``
* BrokerData: ``cluster``, ``broker_name``, ``broker_addrs`` (``{int: str}``)
* QueueData: ``broker_name``, ``read_queue_nums``, ``write_queue_nums``, ``perm``,
  ``topic_sys_flag`` (``nameserver.model.QueueData``)
* ClusterInfo: ``broker_addr_table`` (name -> BrokerData), ``cluster_addr_table`` (cluster -> names)

Example:
    >>> encode_kv_table({"TopicTest": "broker-a:4"})
    b'{"table":{"TopicTest":"broker-a:4"}}'
    >>> dumps({1: "b", 0: "a"})
    b'{0:"a",1:"b"}'
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping
from decimal import Decimal
from operator import attrgetter
from typing import Any

import orjson

from nameserver.model import DataVersion


class FastjsonError(ValueError):
    """Text that is neither JSON nor fastjson's default form, or a body of the wrong shape."""


# --- strings (§10.1 rule 5, as fastjson 1.2.83 SerializeWriter.writeStringWithDoubleQuote) ---

# Default form: fastjson also escapes DEL..U+009F and U+2028/U+2029, besides the JSON minimum.
_DEFAULT_SPECIAL = re.compile('["\\\\\x00-\x1f\x7f-\x9f\u2028\u2029]')
# Standard form (BrowserCompatible): '/' and everything >= U+007F as well.
_STANDARD_SPECIAL = re.compile('["\\\\/\x00-\x1f\x7f-\U0010ffff]')
_SHORT_ESCAPES = {
    '"': '\\"', "\\": "\\\\", "/": "\\/",
    "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t",
}


def _escape_char(match: re.Match[str]) -> str:
    ch = match.group()
    short = _SHORT_ESCAPES.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if code > 0xFFFF:  # Java strings are UTF-16: a supplementary character is two escapes
        code -= 0x10000
        return f"\\u{0xD800 + (code >> 10):04X}\\u{0xDC00 + (code & 0x3FF):04X}"
    return f"\\u{code:04X}"


def _quote(text: str, standard: bool) -> str:
    special = _STANDARD_SPECIAL if standard else _DEFAULT_SPECIAL
    if special.search(text) is None:  # the common case: names and addresses are plain ASCII
        return '"' + text + '"'
    return '"' + special.sub(_escape_char, text) + '"'


# Route bodies repeat the same few names and addresses at tens of thousands of lookups a
# second: a bounded memo turns quoting into one dict lookup. Cleared wholesale when full.
_QUOTE_CACHE_MAX = 65536
_quoted_default: dict[str, str] = {}
_quoted_standard: dict[str, str] = {}


def quote(text: str, standard: bool = False) -> str:
    """One JSON string literal in the given form, e.g. ``quote("a/b", True) == '"a\\\\/b"'``."""
    cache = _quoted_standard if standard else _quoted_default
    quoted = cache.get(text)
    if quoted is None:
        quoted = _quote(text, standard)
        if len(cache) >= _QUOTE_CACHE_MAX:
            cache.clear()
        cache[text] = quoted
    return quoted


def java_double_text(value: float) -> str:
    """Java's ``Double.toString``: ``0.618``, ``5.0``, ``1.0E10``, ``1.5E-5``, ``NaN``, ``-Infinity``."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    sign = "-" if value < 0 else ""
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:  # Java's plain-notation range; repr is plain there too
        return sign + repr(magnitude)
    digits_tuple = Decimal(repr(magnitude)).as_tuple()
    digits = "".join(map(str, digits_tuple.digits))
    exponent = digits_tuple.exponent + len(digits) - 1  # type: ignore[operator]
    digits = digits.rstrip("0") or "0"
    return f"{sign}{digits[0]}.{digits[1:] or '0'}E{exponent}"


# --- generic encoder -------------------------------------------------------------------------


def _sorted_items(mapping: Mapping[Any, Any]) -> list[tuple[Any, Any]]:
    items = [(k, v) for k, v in mapping.items() if v is not None]  # null map values omitted
    if all(isinstance(k, int) and not isinstance(k, bool) for k, _ in items):
        return sorted(items)  # broker ids numerically (SEM A3)
    return sorted(items, key=lambda kv: str(kv[0]))


def _write(value: Any, out: list[str], standard: bool) -> None:
    if isinstance(value, str):
        out.append(quote(value, standard))
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(java_double_text(value))
    elif value is None:
        out.append("null")  # only reachable at top level or inside a list
    elif isinstance(value, Mapping):
        out.append("{")
        for i, (key, item) in enumerate(_sorted_items(value)):
            if i:
                out.append(",")
            if isinstance(key, str):
                out.append(quote(key, standard))
            elif standard:  # §10.1 rule 4: BrowserCompatible quotes non-string keys
                out.append(quote(str(key), standard))
            else:
                out.append(str(key))
            out.append(":")
            _write(item, out, standard)
        out.append("}")
    elif isinstance(value, (list, tuple, set, frozenset)):
        items = sorted(value) if isinstance(value, (set, frozenset)) else value
        out.append("[")
        for i, item in enumerate(items):
            if i:
                out.append(",")
            _write(item, out, standard)
        out.append("]")
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as a fastjson body")


def dumps(value: Any, standard: bool = False) -> bytes:
    """Encode plain data (dict, list, tuple, set, str, int, float, bool, None) as UTF-8.

    Maps are written with sorted keys and without their ``None`` values; sets become sorted
    arrays. Map keys that are ints are unquoted in the default form.
    """
    out: list[str] = []
    _write(value, out, standard)
    # A lone surrogate cannot be UTF-8; Java's encoder writes '?' for it, and so do we.
    return "".join(out).encode("utf-8", "replace")


# --- lenient decoder (§10.2) ----------------------------------------------------------------

# A string literal (skipped as is) or a bare integer key after '{' or ','. Outside strings that
# position can only hold an object key, so only keys are ever quoted.
_BARE_KEY = re.compile(r'"(?:[^"\\]|\\.)*"|([{,]\s*)(-?[0-9]+)(?=\s*:)', re.DOTALL)


def _quote_bare_key(match: re.Match[str]) -> str:
    if match.group(1) is None:
        return match.group()
    return f'{match.group(1)}"{match.group(2)}"'


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def loads(data: bytes | bytearray | memoryview | str) -> Any:
    """Parse RFC 8259 JSON or fastjson's default form; bare integer keys become strings.

    Bytes are UTF-8; invalid sequences become U+FFFD, as Java's ``new String(bytes, UTF_8)``.

    Raises:
        FastjsonError: the text is neither.
    """
    try:
        return orjson.loads(data)  # fast path: standard-form and ordinary JSON
    except orjson.JSONDecodeError:
        pass
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
    text = _BARE_KEY.sub(_quote_bare_key, text)
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:  # the stdlib also takes lone surrogate escapes and integers beyond 64 bits
        return json.loads(text, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as exc:
        raise FastjsonError(f"not JSON: {exc}") from None


# --- body builders (§10.6) ------------------------------------------------------------------


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


# The server passes dataclasses: read their attributes in one C call, fall back to mappings.
_BROKER_NAMES = ("broker_name", "cluster", "broker_addrs")
_QUEUE_NAMES = ("broker_name", "perm", "read_queue_nums", "topic_sys_flag", "write_queue_nums")
_BROKER_DATA = attrgetter(*_BROKER_NAMES)
_QUEUE_DATA = attrgetter(*_QUEUE_NAMES)


def _fields(obj: Any, getter: attrgetter, names: tuple[str, ...]) -> tuple:
    try:
        return getter(obj)
    except AttributeError:
        if not isinstance(obj, Mapping):
            raise
        return tuple(map(obj.get, names))


def _name_key(fields: tuple) -> str:
    return fields[0] or ""


def _sorted_ids(addrs: Mapping[Any, str]) -> list[tuple[int, str]]:
    """Broker ids in numeric order (SEM A3), null addresses dropped."""
    try:
        ids = sorted(addrs.items())  # keys are unique: only keys are compared
        if not ids or type(ids[0][0]) is int:
            return [(i, a) for i, a in ids if a is not None]
    except TypeError:  # mixed key types
        pass
    return sorted((int(k), a) for k, a in addrs.items() if a is not None)  # keys parsed from text


def _broker_data_text(fields: tuple, standard: bool) -> str:
    name, cluster, addrs = fields
    if standard:
        entries = ",".join([f'"{i}":{quote(a, True)}' for i, a in _sorted_ids(addrs or {})])
    else:
        entries = ",".join([f"{i}:{quote(a)}" for i, a in _sorted_ids(addrs or {})])
    if name is not None and cluster is not None:  # the usual case, in one step
        return (
            f'{{"brokerAddrs":{{{entries}}},"brokerName":{quote(name, standard)}'
            f',"cluster":{quote(cluster, standard)}}}'
        )
    parts = ['{"brokerAddrs":{', entries, "}"]
    if name is not None:  # §10.1 rule 2: null fields are omitted
        parts += [',"brokerName":', quote(name, standard)]
    if cluster is not None:
        parts += [',"cluster":', quote(cluster, standard)]
    parts.append("}")
    return "".join(parts)


def _queue_data_text(fields: tuple, standard: bool) -> str:
    name, perm, read_queue_nums, topic_sys_flag, write_queue_nums = fields
    head = '{"brokerName":' + quote(name, standard) + "," if name is not None else "{"
    return (
        f'{head}"perm":{perm:d},"readQueueNums":{read_queue_nums:d}'
        f',"topicSysFlag":{topic_sys_flag or 0:d},"writeQueueNums":{write_queue_nums:d}}}'
    )


def encode_route(route: Any, standard: bool = False) -> bytes:
    """TopicRouteData body (§10.6): ``{"brokerDatas":[..],"filterServerTable":{..},"queueDatas":[..]}``.

    Args:
        route: a TopicRouteData-like object or mapping (see the module docstring). Both lists
            are written sorted by broker name; ``filter_server_table`` maps a broker address to
            its filter-server list (written as given) and may be missing or ``None`` (``{}``).
        standard: the standard form (request version >= 401 or ``acceptStandardJsonOnly``, §10.3).
    """
    broker_fields = [_fields(b, _BROKER_DATA, _BROKER_NAMES) for b in _get(route, "broker_datas") or ()]
    queue_fields = [_fields(q, _QUEUE_DATA, _QUEUE_NAMES) for q in _get(route, "queue_datas") or ()]
    brokers = ",".join([_broker_data_text(f, standard) for f in sorted(broker_fields, key=_name_key)])
    queues = ",".join([_queue_data_text(f, standard) for f in sorted(queue_fields, key=_name_key)])
    filters = _get(route, "filter_server_table") or {}
    filter_text = ",".join(
        quote(addr, standard) + ":[" + ",".join(quote(f, standard) for f in servers) + "]"
        for addr, servers in sorted(filters.items())
        if servers is not None
    )
    text = (
        '{"brokerDatas":[' + brokers + '],"filterServerTable":{' + filter_text
        + '},"queueDatas":[' + queues + "]}"
    )
    return text.encode("utf-8", "replace")


def encode_cluster_info(cluster_info: Any) -> bytes:
    """ClusterInfo body (§10.6), always the default form (§7, code 106).

    Args:
        cluster_info: a ClusterInfo-like object or mapping with ``broker_addr_table`` (broker
            name -> BrokerData-like) and ``cluster_addr_table`` (cluster name -> broker names,
            any iterable; written sorted).
    """
    brokers = ",".join(
        quote(name) + ":" + _broker_data_text(_fields(bd, _BROKER_DATA, _BROKER_NAMES), False)
        for name, bd in sorted((_get(cluster_info, "broker_addr_table") or {}).items())
        if bd is not None
    )
    clusters = ",".join(
        quote(cluster) + ":[" + ",".join(quote(n) for n in sorted(names)) + "]"
        for cluster, names in sorted((_get(cluster_info, "cluster_addr_table") or {}).items())
        if names is not None
    )
    text = '{"brokerAddrTable":{' + brokers + '},"clusterAddrTable":{' + clusters + "}}"
    return text.encode("utf-8", "replace")


def encode_topic_list(topics: Iterable[str], broker_addr: str | None = None) -> bytes:
    """TopicList body: ``{"topicList":[..]}``, topics sorted; ``brokerAddr`` only when given (304)."""
    names = ",".join(quote(t) for t in sorted(topics))
    head = '{"brokerAddr":' + quote(broker_addr) + "," if broker_addr is not None else "{"
    return (head + '"topicList":[' + names + "]}").encode("utf-8", "replace")


def encode_kv_table(table: Mapping[str, str]) -> bytes:
    """KVTable body: ``{"table":{"<key>":"<value>",..}}``, keys sorted, ``None`` values omitted."""
    return dumps({"table": dict(table)})


def encode_data_version(data_version: DataVersion) -> bytes:
    """DataVersion body in the 4.x form ``{"counter":3,"timestamp":1700000000000}`` (G10f)."""
    return f'{{"counter":{data_version.counter},"timestamp":{data_version.timestamp}}}'.encode()


# --- body parsers (for tests and tools) -----------------------------------------------------


def _object(value: Any, what: str) -> dict:
    if not isinstance(value, dict):
        raise FastjsonError(f"{what} is not an object")
    return value


def _int(value: Any, what: str) -> int:
    if value is None:
        return 0  # a Java int field left unset
    if isinstance(value, bool) or not isinstance(value, int):
        raise FastjsonError(f"{what} is not an integer: {value!r}")
    return value


def _parse_broker_data(obj: Any) -> dict:
    obj = _object(obj, "BrokerData")
    try:
        addrs = {
            int(k): v for k, v in _object(obj.get("brokerAddrs") or {}, "brokerAddrs").items()
            if v is not None
        }
    except ValueError:
        raise FastjsonError(f"brokerAddrs has a non-integer key: {obj.get('brokerAddrs')!r}") from None
    return {
        "cluster": obj.get("cluster"),
        "broker_name": obj.get("brokerName"),
        "broker_addrs": dict(sorted(addrs.items())),
    }


def _parse_queue_data(obj: Any) -> dict:
    obj = _object(obj, "QueueData")
    # 4.8 and older spell it topicSynFlag (issue #2800); our tools read either (§10.2).
    flag = obj.get("topicSysFlag")
    if flag is None:
        flag = obj.get("topicSynFlag")
    return {
        "broker_name": obj.get("brokerName"),
        "read_queue_nums": _int(obj.get("readQueueNums"), "readQueueNums"),
        "write_queue_nums": _int(obj.get("writeQueueNums"), "writeQueueNums"),
        "perm": _int(obj.get("perm"), "perm"),
        "topic_sys_flag": _int(flag, "topicSysFlag"),
    }


def parse_route(data: bytes | str) -> dict:
    """Parse a TopicRouteData body (either form, any RocketMQ version) into plain dicts.

    Returns:
        ``{"broker_datas": [{"cluster", "broker_name", "broker_addrs": {int: str}}],
        "queue_datas": [{"broker_name", "read_queue_nums", "write_queue_nums", "perm",
        "topic_sys_flag"}], "filter_server_table": {addr: [str]}}``. Unknown keys
        (``enableActingMaster``, ``orderTopicConf``, static-topic mappings) are ignored.

    Raises:
        FastjsonError: not JSON, or not shaped like a route.
    """
    obj = _object(loads(data), "TopicRouteData")
    filters = _object(obj.get("filterServerTable") or {}, "filterServerTable")
    return {
        "broker_datas": [_parse_broker_data(b) for b in obj.get("brokerDatas") or ()],
        "queue_datas": [_parse_queue_data(q) for q in obj.get("queueDatas") or ()],
        "filter_server_table": {k: list(v) for k, v in filters.items() if v is not None},
    }


def parse_cluster_info(data: bytes | str) -> dict:
    """Parse a ClusterInfo body into ``{"broker_addr_table": {name: BrokerData dict},
    "cluster_addr_table": {cluster: [names]}}`` (BrokerData dicts as in :func:`parse_route`)."""
    obj = _object(loads(data), "ClusterInfo")
    brokers = _object(obj.get("brokerAddrTable") or {}, "brokerAddrTable")
    clusters = _object(obj.get("clusterAddrTable") or {}, "clusterAddrTable")
    return {
        "broker_addr_table": {k: _parse_broker_data(v) for k, v in brokers.items() if v is not None},
        "cluster_addr_table": {k: list(v) for k, v in clusters.items() if v is not None},
    }


def parse_topic_list(data: bytes | str) -> dict:
    """Parse a TopicList body into ``{"topic_list": [str], "broker_addr": str | None}``."""
    obj = _object(loads(data), "TopicList")
    return {"topic_list": list(obj.get("topicList") or ()), "broker_addr": obj.get("brokerAddr")}


def parse_kv_table(data: bytes | str) -> dict[str, str]:
    """Parse a KVTable body into its ``table`` map."""
    obj = _object(loads(data), "KVTable")
    return dict(_object(obj.get("table") or {}, "table"))
