"""REGISTER_BROKER bodies (remoting protocol §8) and DataVersion bodies (codes 103, 322).

Decoding never reads a clock: a DataVersion without ``timestamp`` takes the ``now`` argument
(SEM §1.3). Errors raise :class:`BadBody` / :class:`CrcMismatch` / :class:`BadHeader`, which the
request handler turns into SYSTEM_ERROR responses (§9.2). The encoders exist for our own tools
(fleet simulator, tests). Re-exported by :mod:`nameserver.codec`.

Example:
    >>> body = encode_register_body(DataVersion(1700000000000, 3), [TopicConfig("T", 4, 4)])
    >>> decode_register_body(body, version=407, compressed=False, now=0).topics[0].read_queue_nums
    4
"""

from __future__ import annotations

import re
import struct
import zlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

import orjson

from nameserver.codec.constants import SERVER_VERSION, Version
from nameserver.codec.headers import (
    INT32_MAX,
    INT32_MIN,
    INT64_MAX,
    INT64_MIN,
    BadHeader,
    RequestError,
    parse_int32,
)
from nameserver.codec.fastjson import FastjsonError, dumps, loads, quote
from nameserver.model import MULTI_TAG, SINGLE_TAG, ZERO_DATA_VERSION, DataVersion, TopicConfig


class BadBody(RequestError):
    """A body that cannot be decoded (§8.3, §9.2): answered SYSTEM_ERROR, event ``bad_body``."""

    reason = "bad_body"


class CrcMismatch(RequestError):
    """Header ``bodyCrc32`` differs from the body's CRC (§8.2): remark ``crc32 not match``."""

    reason = "crc_mismatch"

    def __init__(self, expected: int, actual: int) -> None:
        super().__init__("crc32 not match")
        self.expected = expected
        self.actual = actual


@dataclass(frozen=True, slots=True)
class RegisterBrokerBody:
    """What a REGISTER_BROKER body says.

    Attributes:
        data_version: the broker's topic-config version.
        topics: its topic configs, sorted by topic name (one per name; the last one sent wins).
        filter_servers: the filter-server list; ``None`` for a pre-3.0.11 sender (filter table
            untouched, §8.1) or an explicit ``null``.
    """

    data_version: DataVersion
    topics: tuple[TopicConfig, ...]
    filter_servers: list[str] | None


# A 16 MiB frame can inflate without bound; no real broker comes near this (10000 topics ~ 330 KB).
MAX_INFLATED_BYTES = 256 * 1024 * 1024

_I32 = struct.Struct(">i")
_INTEGER = re.compile(r"[+-]?[0-9]+")
_FILTER_TYPES = (SINGLE_TAG, MULTI_TAG)
# A TopicConfig's JSON fields, read in one call (KeyError when one is absent).
_G7_FIELDS = itemgetter("topicName", "readQueueNums", "writeQueueNums", "perm", "topicSysFlag", "order",
                        "topicFilterType")


def body_crc32(body: bytes | None) -> int:
    """``bodyCrc32`` of a body (§8.2): CRC-32 masked to 31 bits; 0 for no body."""
    return zlib.crc32(body) & 0x7FFFFFFF if body else 0


def check_body_crc32(body: bytes | None, expected: int) -> None:
    """Check the header's ``bodyCrc32`` (§8.2); 0 means no check.

    Raises:
        CrcMismatch: ``expected`` is non-zero and differs (a negative value never matches).
    """
    if expected != 0:
        actual = body_crc32(body)
        if actual != expected:
            raise CrcMismatch(expected, actual)


# --- JSON values ---------------------------------------------------------------------------


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
        if (type(timestamp) is int and type(counter) is int
                and INT64_MIN <= timestamp <= INT64_MAX and INT64_MIN <= counter <= INT64_MAX):
            return DataVersion(timestamp, counter)
    if not isinstance(obj, Mapping):
        raise BadBody("Failed to decode DataVersion: not an object")
    return DataVersion(
        timestamp=_json_int(obj.get("timestamp"), "timestamp", now, INT64_MIN, INT64_MAX),
        counter=_json_int(obj.get("counter"), "counter", 0, INT64_MIN, INT64_MAX),
    )


def parse_data_version(data: Mapping[str, Any] | bytes | str, now: int) -> DataVersion:
    """A DataVersion from its JSON text or parsed object (SEM §1.3).

    Missing ``counter`` -> 0, missing ``timestamp`` -> ``now``; ``stateVersion`` (5.x) and unknown
    keys are ignored.

    Raises:
        BadBody: not JSON, not an object, or a non-integer value.
    """
    obj = data if isinstance(data, Mapping) else _load(data, "DataVersion")
    return _data_version_from_obj(obj, now)


def decode_data_version_body(body: bytes | None, now: int) -> DataVersion:
    """The required DataVersion body of QUERY_DATA_VERSION (322).

    Raises:
        BadBody: no body, or not a DataVersion.
    """
    if not body:
        raise BadBody("Failed to decode DataVersion: no body")
    return parse_data_version(body, now)


def _load(body: bytes | str, what: str) -> Any:
    try:
        return loads(body)
    except FastjsonError as exc:
        raise BadBody(f"Failed to decode {what}: {exc}") from None


def _topic_from_json(key: str, obj: Any) -> TopicConfig:
    # What every broker writes (G7): all seven fields, each of its JSON type, ints in range. That
    # needs none of the defaults or coercions below, so it is checked in one expression.
    if type(obj) is dict:
        try:
            name, read, write, perm, flag, order, filter_type = _G7_FIELDS(obj)
        except KeyError:
            return _topic_from_json_lenient(key, obj)
        if (type(name) is str and type(read) is int and type(write) is int and type(perm) is int
                and type(flag) is int and (order is True or order is False) and filter_type in _FILTER_TYPES
                and INT32_MIN <= read <= INT32_MAX and INT32_MIN <= write <= INT32_MAX
                and INT32_MIN <= perm <= INT32_MAX and INT32_MIN <= flag <= INT32_MAX):
            return TopicConfig(name, read, write, perm, flag, order, filter_type)
    return _topic_from_json_lenient(key, obj)


def _topic_from_json_lenient(key: str, obj: Any) -> TopicConfig:
    """Absent fields take RocketMQ's defaults, numeric strings coerce (SEM §1.3); else BadBody."""
    if not isinstance(obj, Mapping):
        raise BadBody(f"Failed to decode RegisterBrokerBody: topic {key!r} is not an object")
    name = obj.get("topicName")
    if name is None:
        name = key  # SEM §1.3: an absent topicName takes the map key
    filter_type = obj.get("topicFilterType")
    if filter_type is None:
        filter_type = SINGLE_TAG
    if not isinstance(name, str) or filter_type not in _FILTER_TYPES:
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


def _sorted_topics(topics: dict[str, TopicConfig]) -> tuple[TopicConfig, ...]:
    return tuple(map(topics.__getitem__, sorted(topics)))  # SEM A3: emit in order


def _decode_wrapper(obj: Any, now: int) -> tuple[DataVersion, tuple[TopicConfig, ...]]:
    """TopicConfigSerializeWrapper JSON; absent parts take Java's constructor defaults."""
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise BadBody("Failed to decode RegisterBrokerBody: topicConfigSerializeWrapper is not an object")
    dv_obj = obj.get("dataVersion")
    data_version = DataVersion(now, 0) if dv_obj is None else _data_version_from_obj(dv_obj, now)
    table = obj.get("topicConfigTable")
    if table is None:
        return data_version, ()
    if type(table) is not dict and not isinstance(table, Mapping):
        raise BadBody("Failed to decode RegisterBrokerBody: topicConfigTable is not an object")
    topics: dict[str, TopicConfig] = {}
    for key, value in table.items():
        if value is not None:  # a null entry carries no topic
            config = _topic_from_json(key, value)
            topics[config.topic] = config
    return data_version, _sorted_topics(topics)


def _filter_list(value: Any) -> list[str] | None:
    """A filter-server list; non-string scalars become their JSON text (fastjson coercion)."""
    if value is None:
        return None
    if not isinstance(value, list) or any(isinstance(v, (list, dict)) for v in value):
        raise ValueError("filterServerList is not a list of strings")
    return [v if isinstance(v, str) else orjson.dumps(v).decode() for v in value if v is not None]


# --- compressed form (§8.3) -------------------------------------------------------------------


def _inflate(data: bytes, limit: int) -> bytes:
    inflater = zlib.decompressobj()
    try:
        content = inflater.decompress(data, limit)
    except zlib.error as exc:
        raise BadBody(f"Failed to decode RegisterBrokerBody: bad zlib stream: {exc}") from None
    if inflater.unconsumed_tail:
        raise BadBody(f"Failed to decode RegisterBrokerBody: inflates beyond {limit} bytes")
    if not inflater.eof:
        raise BadBody("Failed to decode RegisterBrokerBody: truncated zlib stream")
    return content  # bytes after the stream's end are ignored, as InflaterInputStream does


def parse_topic_config_text(text: str) -> TopicConfig:
    """``TopicConfig.encode()`` text: ``name read write perm filterType [attributes]`` (§8.3).

    ``topicSysFlag`` and ``order`` are not carried and decode as 0 / false.

    Raises:
        BadBody: fewer than 5 tokens, a bad integer, or an unknown filter type.
    """
    tokens = text.split(" ")
    while tokens and tokens[-1] == "":  # Java split(" ") drops trailing empty tokens
        tokens.pop()
    if len(tokens) < 5 or tokens[4] not in _FILTER_TYPES:
        raise BadBody(f"Failed to decode RegisterBrokerBody: bad topic config text {text!r}")
    try:
        return TopicConfig(
            topic=tokens[0],
            read_queue_nums=parse_int32(tokens[1]),
            write_queue_nums=parse_int32(tokens[2]),
            perm=parse_int32(tokens[3]),
            topic_filter_type=tokens[4],
        )
    except ValueError:
        raise BadBody(f"Failed to decode RegisterBrokerBody: bad topic config text {text!r}") from None


def _decode_compressed(content: bytes, now: int) -> RegisterBrokerBody:
    end = len(content)
    unpack = _I32.unpack_from
    truncated = BadBody("Failed to decode RegisterBrokerBody: truncated content")
    try:
        (n,) = unpack(content, 0)
        if n < 0 or 4 + n > end:
            raise truncated
        data_version = parse_data_version(content[4 : 4 + n], now)
        pos = 4 + n
        (count,) = unpack(content, pos)
        if count < 0:
            raise BadBody(f"Failed to decode RegisterBrokerBody: negative topic count {count}")
        pos += 4
        topics: dict[str, TopicConfig] = {}
        for _ in range(count):
            (n,) = unpack(content, pos)
            pos += 4
            if n < 0 or pos + n > end:
                raise truncated
            config = parse_topic_config_text(content[pos : pos + n].decode("utf-8", "replace"))
            topics[config.topic] = config
            pos += n
        (n,) = unpack(content, pos)
        pos += 4
        if n < 0 or pos + n > end:
            raise truncated
        filter_json = content[pos : pos + n]
    except struct.error:
        raise truncated from None
    try:  # 4.9.7 logs an unparsable filter list and goes on with an empty one
        filter_servers = _filter_list(loads(filter_json))
    except ValueError:
        filter_servers = []
    # Whatever follows (the 5.x mapping section) is ignored, as 4.9.7 ignores it.
    return RegisterBrokerBody(data_version, _sorted_topics(topics), filter_servers)


# --- entry point ------------------------------------------------------------------------------


def decode_register_body(
    body: bytes | None,
    *,
    version: int,
    compressed: bool,
    now: int,
    body_crc32: int = 0,
    max_inflated: int = MAX_INFLATED_BYTES,
) -> RegisterBrokerBody:
    """Decode a REGISTER_BROKER body by the rules of §8.1, after the CRC check of §8.2.

    Args:
        body: the frame body (``None`` or empty: no body).
        version: the request's ``version``; < 37 means a bare TopicConfigSerializeWrapper.
        compressed: the parsed ``compressed`` extField (ignored when ``version`` < 37).
        now: the server clock (ms), for a DataVersion without ``timestamp``.
        body_crc32: the parsed ``bodyCrc32`` extField; 0 skips the check.
        max_inflated: refuse a compressed body that inflates beyond this many bytes.

    Raises:
        BadHeader: ``version`` is negative (field ``version``).
        CrcMismatch: the CRC check failed.
        BadBody: the body cannot be decoded.
    """
    if version < 0:  # RocketMQ fails with an index error on MQVersion.Version
        raise BadHeader("version", f"invalid request version {version}")
    check_body_crc32(body, body_crc32)
    old_format = version < Version.V3_0_11
    if not body:
        return RegisterBrokerBody(ZERO_DATA_VERSION, (), None if old_format else [])
    if old_format:
        data_version, topics = _decode_wrapper(_load(body, "TopicConfigSerializeWrapper"), now)
        return RegisterBrokerBody(data_version, topics, None)
    if compressed:
        return _decode_compressed(_inflate(body, max_inflated), now)
    obj = _load(body, "RegisterBrokerBody")
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise BadBody("Failed to decode RegisterBrokerBody: not an object")
    wrapper = obj.get("topicConfigSerializeWrapper")
    if wrapper is None:  # Java's field initializer: an empty wrapper stamped now
        data_version, topics = DataVersion(now, 0), ()
    else:
        data_version, topics = _decode_wrapper(wrapper, now)
    try:
        filter_servers = _filter_list(obj["filterServerList"]) if "filterServerList" in obj else []
    except ValueError as exc:
        raise BadBody(f"Failed to decode RegisterBrokerBody: {exc}") from None
    return RegisterBrokerBody(data_version, topics, filter_servers)


# --- encoders (our tools act as brokers) --------------------------------------------------------


def topic_config_json(config: TopicConfig) -> str:
    """One TopicConfig as a 4.x broker writes it (G7): alphabetical fields, no ``attributes``."""
    return (
        f'{{"order":{"true" if config.order else "false"},"perm":{config.perm}'
        f',"readQueueNums":{config.read_queue_nums},"topicFilterType":{quote(config.topic_filter_type)}'
        f',"topicName":{quote(config.topic)},"topicSysFlag":{config.topic_sys_flag}'
        f',"writeQueueNums":{config.write_queue_nums}}}'
    )


def topic_config_text(config: TopicConfig, with_attributes: bool = False) -> str:
    """``TopicConfig.encode()`` text (§8.3); 5.x appends the attributes JSON (``{}``)."""
    text = (
        f"{config.topic} {config.read_queue_nums} {config.write_queue_nums} "
        f"{config.perm} {config.topic_filter_type}"
    )
    return text + " {}" if with_attributes else text


def _wrapper_json(data_version: DataVersion, topics: Iterable[TopicConfig]) -> str:
    by_name = {t.topic: t for t in topics}
    table = ",".join(quote(name) + ":" + topic_config_json(by_name[name]) for name in sorted(by_name))
    return (
        f'{{"dataVersion":{{"counter":{data_version.counter},"timestamp":{data_version.timestamp}}}'
        f',"topicConfigTable":{{{table}}}}}'
    )


def encode_register_body(
    data_version: DataVersion,
    topics: Iterable[TopicConfig],
    filter_servers: Iterable[str] | None = (),
    *,
    version: int = SERVER_VERSION,
    compressed: bool = False,
) -> bytes:
    """A REGISTER_BROKER body as a broker of ``version`` sends it.

    * ``version`` < 37: a bare TopicConfigSerializeWrapper (``compressed`` ignored).
    * uncompressed: the 4.x RegisterBrokerBody JSON (G7 exactly); a ``None`` filter list is
      omitted (fastjson drops nulls), which reads back as ``[]``.
    * compressed: the §8.3 zlib stream at level 9 (``78 da``); ``version`` >= 413 writes the 5.x
      content (``stateVersion``, attributes ``{}``, an empty mapping section; G8), else 4.x (G9).
    """
    topics = list(topics)
    if version < Version.V3_0_11:
        return _wrapper_json(data_version, topics).encode("utf-8", "replace")
    if not compressed:
        head = "{"  # fastjson omits a null filterServerList
        if filter_servers is not None:
            head = '{"filterServerList":' + dumps(list(filter_servers)).decode() + ","
        wrapper = _wrapper_json(data_version, topics)
        return (head + '"topicConfigSerializeWrapper":' + wrapper + "}").encode("utf-8", "replace")
    five = version >= Version.V5_0_0
    state = ',"stateVersion":0' if five else ""
    dv_json = f'{{"counter":{data_version.counter}{state},"timestamp":{data_version.timestamp}}}'.encode()
    parts = [_I32.pack(len(dv_json)), dv_json, _I32.pack(len(topics))]
    for config in topics:
        text = topic_config_text(config, five).encode("utf-8", "replace")
        parts += [_I32.pack(len(text)), text]
    filter_json = b"null" if filter_servers is None else dumps(list(filter_servers))
    parts += [_I32.pack(len(filter_json)), filter_json]
    if five:
        parts.append(_I32.pack(0))  # no static-topic mappings
    return zlib.compress(b"".join(parts), 9)
