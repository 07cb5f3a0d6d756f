"""The JSON form of REGISTER_BROKER and DataVersion bodies: Java's field defaults for what is
absent, int32/int64 ranges for what is present (docs/nameserver-semantics.md §1.3)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from operator import itemgetter
from typing import Any

import orjson

from nameserver.codec.fastjson import FastjsonError, loads
from nameserver.codec.headers import INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from nameserver.codec.register.body import FILTER_TYPES, NO_LIMITS, BadBody, RegisterLimits
from nameserver.model import SINGLE_TAG, DataVersion, TopicConfig

_INTEGER = re.compile(r"[+-]?[0-9]+")
# A TopicConfig's JSON fields, read in one call (KeyError when one is absent).
_G7_FIELDS = itemgetter(
    "topicName", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag", "order", "topicFilterType"
)


def _json_int(value: Any, name: str, default: int, low: int, high: int) -> int:
    if value is None:
        return default
    if isinstance(value, str) and _INTEGER.fullmatch(value):
        value = int(value)  # fastjson coerces numeric strings into int fields
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadBody(f"Failed to decode RegisterBrokerBody: {name} is not an integer: {value!r}")
    if not low <= value <= high:
        raise BadBody(f"Failed to decode RegisterBrokerBody: {name} out of range: {value}")
    return value


def _json_bool(value: Any, name: str) -> bool:
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value in ("true", "false"):
        return value == "true"
    raise BadBody(f"Failed to decode RegisterBrokerBody: {name} is not a boolean: {value!r}")


def _data_version_from_obj(obj: Any, now: int) -> DataVersion:
    if type(obj) is dict:  # a broker's own: both fields, plain longs
        timestamp, counter = obj.get("timestamp"), obj.get("counter")
        if (
            type(timestamp) is int
            and type(counter) is int
            and INT64_MIN <= timestamp <= INT64_MAX
            and INT64_MIN <= counter <= INT64_MAX
        ):
            return DataVersion(timestamp, counter)
    if not isinstance(obj, Mapping):
        raise BadBody("Failed to decode DataVersion: not an object")
    return DataVersion(
        timestamp=_json_int(obj.get("timestamp"), "timestamp", now, INT64_MIN, INT64_MAX),
        counter=_json_int(obj.get("counter"), "counter", 0, INT64_MIN, INT64_MAX),
    )


def parse_data_version(data: Mapping[str, Any] | bytes | str, now: int) -> DataVersion:
    """A DataVersion from its JSON text or parsed object (docs/nameserver-semantics.md §1.3).

    Missing ``counter`` -> 0, missing ``timestamp`` -> ``now``; ``stateVersion`` (5.x) and unknown
    keys are ignored.

    Raises:
        BadBody: not JSON, not an object, or a non-integer value.
    """
    obj = data if isinstance(data, Mapping) else load_json(data, "DataVersion")
    return _data_version_from_obj(obj, now)


def decode_data_version_body(body: bytes | None, now: int) -> DataVersion:
    """The required DataVersion body of QUERY_DATA_VERSION (322).

    Raises:
        BadBody: no body, or not a DataVersion.
    """
    if not body:
        raise BadBody("Failed to decode DataVersion: no body")
    return parse_data_version(body, now)


def load_json(body: bytes | str, what: str) -> Any:
    """``fastjson.loads``, failing as :class:`BadBody` naming ``what``."""
    try:
        return loads(body)
    except FastjsonError as exc:
        raise BadBody(f"Failed to decode {what}: {exc}") from None


def _topic_from_json(key: str, obj: Any) -> TopicConfig:
    # What every broker writes (docs/remoting-protocol.md §11, G7): all seven fields, each of its
    # JSON type, ints in range. That needs none of the defaults or coercions below, so it is checked
    # in one expression.
    if type(obj) is dict:
        try:
            name, read, write, perm, flag, order, filter_type = _G7_FIELDS(obj)
        except KeyError:
            return _topic_from_json_lenient(key, obj)
        if (
            type(name) is str
            and type(read) is int
            and type(write) is int
            and type(perm) is int
            and type(flag) is int
            and (order is True or order is False)
            and filter_type in FILTER_TYPES
            and INT32_MIN <= read <= INT32_MAX
            and INT32_MIN <= write <= INT32_MAX
            and INT32_MIN <= perm <= INT32_MAX
            and INT32_MIN <= flag <= INT32_MAX
        ):
            return TopicConfig(name, read, write, perm, flag, order, filter_type)
    return _topic_from_json_lenient(key, obj)


def _topic_from_json_lenient(key: str, obj: Any) -> TopicConfig:
    """Absent fields take RocketMQ's defaults, numeric strings coerce (docs/nameserver-semantics.md
    §1.3); else BadBody."""
    if not isinstance(obj, Mapping):
        raise BadBody(f"Failed to decode RegisterBrokerBody: topic {key!r} is not an object")
    name = obj.get("topicName")
    if name is None:
        name = key  # docs/nameserver-semantics.md §1.3: an absent topicName takes the map key
    filter_type = obj.get("topicFilterType")
    if filter_type is None:
        filter_type = SINGLE_TAG
    if not isinstance(name, str) or filter_type not in FILTER_TYPES:
        raise BadBody(f"Failed to decode RegisterBrokerBody: bad topic config {key!r}")
    return TopicConfig(
        topic=name,
        read_queue_nums=_json_int(obj.get("readQueueNums"), "readQueueNums", 16, INT32_MIN, INT32_MAX),
        write_queue_nums=_json_int(obj.get("writeQueueNums"), "writeQueueNums", 16, INT32_MIN, INT32_MAX),
        perm=_json_int(obj.get("perm"), "perm", 6, INT32_MIN, INT32_MAX),
        topic_sys_flag=_json_int(obj.get("topicSysFlag"), "topicSysFlag", 0, INT32_MIN, INT32_MAX),
        order=_json_bool(obj.get("order"), "order"),
        topic_filter_type=filter_type,
    )


def sorted_topics(topics: dict[str, TopicConfig]) -> tuple[TopicConfig, ...]:
    """The configs by topic name, in name order."""
    # docs/nameserver-semantics.md A3: emit in order
    return tuple(map(topics.__getitem__, sorted(topics)))


def decode_wrapper(
    obj: Any, now: int, limits: RegisterLimits = NO_LIMITS
) -> tuple[DataVersion, tuple[TopicConfig, ...]]:
    """TopicConfigSerializeWrapper JSON; absent parts take Java's constructor defaults.

    Raises:
        BadBody: not the wrapper's shape.
        RegisterTooLarge: more entries in ``topicConfigTable`` than ``limits`` allow.
    """
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise BadBody("Failed to decode RegisterBrokerBody: topicConfigSerializeWrapper is not an object")
    dv_obj = obj.get("dataVersion")
    data_version = DataVersion(now, 0) if dv_obj is None else _data_version_from_obj(dv_obj, now)
    table = obj.get("topicConfigTable")
    if table is None:
        return data_version, ()
    if type(table) is not dict and not isinstance(table, Mapping):
        raise BadBody("Failed to decode RegisterBrokerBody: topicConfigTable is not an object")
    limits.check_topics(len(table))
    topics: dict[str, TopicConfig] = {}
    for key, value in table.items():
        if value is not None:  # a null entry carries no topic
            config = _topic_from_json(key, value)
            topics[config.topic] = config
    return data_version, sorted_topics(topics)


def filter_list(value: Any) -> list[str] | None:
    """A filter-server list; non-string scalars become their JSON text (fastjson coercion)."""
    if value is None:
        return None
    if not isinstance(value, list) or any(isinstance(v, (list, dict)) for v in value):
        raise ValueError("filterServerList is not a list of strings")
    return [v if isinstance(v, str) else orjson.dumps(v).decode() for v in value if v is not None]
