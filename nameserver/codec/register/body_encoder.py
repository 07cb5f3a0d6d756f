"""REGISTER_BROKER bodies as brokers send them, for our own tools (fleet, simulator, tests); the
G7-G9 vectors are those of docs/remoting-protocol.md §11."""

from __future__ import annotations

import zlib
from collections.abc import Iterable

from nameserver.codec.constants import SERVER_VERSION, Version
from nameserver.codec.fastjson import dumps, quote
from nameserver.codec.register.body import I32
from nameserver.model import DataVersion, TopicConfig


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
    text = f"{config.topic} {config.read_queue_nums} {config.write_queue_nums} {config.perm} {config.topic_filter_type}"
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
    parts = [I32.pack(len(dv_json)), dv_json, I32.pack(len(topics))]
    for config in topics:
        text = topic_config_text(config, five).encode("utf-8", "replace")
        parts += [I32.pack(len(text)), text]
    filter_json = b"null" if filter_servers is None else dumps(list(filter_servers))
    parts += [I32.pack(len(filter_json)), filter_json]
    if five:
        parts.append(I32.pack(0))  # no static-topic mappings
    return zlib.compress(b"".join(parts), 9)
