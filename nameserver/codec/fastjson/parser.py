"""The lenient decoder (docs/remoting-protocol.md §10.2) and the body parsers built on it (for
tests and tools)."""

from __future__ import annotations

import json
import re
from typing import Any

import orjson


class FastjsonError(ValueError):
    """Text that is neither JSON nor fastjson's default form, or a body of the wrong shape."""


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


# --- body parsers (for tests and tools) -----------------------------------------------------


def _object(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise FastjsonError(f"{what} is not an object")
    return value


def _int(value: Any, what: str) -> int:
    if value is None:
        return 0  # a Java int field left unset
    if isinstance(value, bool) or not isinstance(value, int):
        raise FastjsonError(f"{what} is not an integer: {value!r}")
    return value


def _parse_broker_data(obj: Any) -> dict[str, Any]:
    obj = _object(obj, "BrokerData")
    try:
        addrs = {int(k): v for k, v in _object(obj.get("brokerAddrs") or {}, "brokerAddrs").items() if v is not None}
    except ValueError:
        raise FastjsonError(f"brokerAddrs has a non-integer key: {obj.get('brokerAddrs')!r}") from None
    return {
        "cluster": obj.get("cluster"),
        "broker_name": obj.get("brokerName"),
        "broker_addrs": dict(sorted(addrs.items())),
    }


def _parse_queue_data(obj: Any) -> dict[str, Any]:
    obj = _object(obj, "QueueData")
    # 4.8 and older spell it topicSynFlag (renamed in RocketMQ 4.9.0); our tools read either (§10.2).
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


def parse_route(data: bytes | str) -> dict[str, Any]:
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


def parse_cluster_info(data: bytes | str) -> dict[str, Any]:
    """Parse a ClusterInfo body into ``{"broker_addr_table": {name: BrokerData dict},
    "cluster_addr_table": {cluster: [names]}}`` (BrokerData dicts as in :func:`parse_route`)."""
    obj = _object(loads(data), "ClusterInfo")
    brokers = _object(obj.get("brokerAddrTable") or {}, "brokerAddrTable")
    clusters = _object(obj.get("clusterAddrTable") or {}, "clusterAddrTable")
    return {
        "broker_addr_table": {k: _parse_broker_data(v) for k, v in brokers.items() if v is not None},
        "cluster_addr_table": {k: list(v) for k, v in clusters.items() if v is not None},
    }


def parse_topic_list(data: bytes | str) -> dict[str, Any]:
    """Parse a TopicList body into ``{"topic_list": [str], "broker_addr": str | None}``."""
    obj = _object(loads(data), "TopicList")
    return {"topic_list": list(obj.get("topicList") or ()), "broker_addr": obj.get("brokerAddr")}


def parse_kv_table(data: bytes | str) -> dict[str, str]:
    """Parse a KVTable body into its ``table`` map."""
    obj = _object(loads(data), "KVTable")
    return dict(_object(obj.get("table") or {}, "table"))
