"""The compressed form of REGISTER_BROKER bodies (docs/remoting-protocol.md §8.3): a zlib stream
of length-prefixed parts, topic configs as ``TopicConfig.encode()`` text."""

from __future__ import annotations

import struct
import zlib

from nameserver.codec.fastjson import loads
from nameserver.codec.headers import parse_int32
from nameserver.codec.register.body import FILTER_TYPES, I32, BadBody, RegisterBrokerBody, RegisterLimits
from nameserver.codec.register.json_form import filter_list, parse_data_version, sorted_topics
from nameserver.model import TopicConfig

# Inflated first, to read the topic count before the rest: the data version's JSON is short.
HEAD_BYTES = 64 * 1024


def inflate(data: bytes, limits: RegisterLimits) -> bytes:
    """The zlib stream's content. Its topic count (at the start of the content) is checked after
    the first :data:`HEAD_BYTES`, and the whole is refused beyond ``limits.max_body_bytes``, so an
    oversized body is refused having inflated no more than the cap.

    Raises:
        RegisterTooLarge: too many topics, or more bytes than the cap.
        BadBody: not a complete zlib stream.
    """
    limit = limits.max_body_bytes
    inflater = zlib.decompressobj()
    try:
        content = inflater.decompress(data, min(limit, HEAD_BYTES))
        count = _topic_count(content)
        if count is not None:
            limits.check_topics(count)
        if not inflater.eof and len(content) < limit:
            content += inflater.decompress(inflater.unconsumed_tail, limit - len(content))
        # at the cap, one more byte of output (from the input left or from zlib's window) is too many
        over = not inflater.eof and len(content) >= limit and inflater.decompress(inflater.unconsumed_tail, 1)
    except zlib.error as exc:
        raise BadBody(f"Failed to decode RegisterBrokerBody: bad zlib stream: {exc}") from None
    if over:
        limits.check_bytes(limit + 1, f"inflates beyond {limit} bytes")
    if not inflater.eof:
        raise BadBody("Failed to decode RegisterBrokerBody: truncated zlib stream")
    return content  # bytes after the stream's end are ignored, as InflaterInputStream does


def _topic_count(head: bytes) -> int | None:
    """The topic count of inflated content: after the data version's length and JSON; None when
    ``head`` does not reach it."""
    count: int
    try:
        (n,) = I32.unpack_from(head, 0)
        if n < 0:
            return None
        (count,) = I32.unpack_from(head, 4 + n)
    except struct.error:
        return None
    return count


def parse_topic_config_text(text: str) -> TopicConfig:
    """``TopicConfig.encode()`` text: ``name read write perm filterType [attributes]`` (§8.3).

    ``topicSysFlag`` and ``order`` are not carried and decode as 0 / false.

    Raises:
        BadBody: fewer than 5 tokens, a bad integer, or an unknown filter type.
    """
    tokens = text.split(" ")
    while tokens and tokens[-1] == "":  # Java split(" ") drops trailing empty tokens
        tokens.pop()
    if len(tokens) < 5 or tokens[4] not in FILTER_TYPES:
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


def decode_compressed(content: bytes, now: int) -> RegisterBrokerBody:
    """The inflated content: data version, topic config texts and the filter list."""
    end = len(content)
    unpack = I32.unpack_from
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
        filter_servers = filter_list(loads(filter_json))
    except ValueError:
        filter_servers = []
    # Whatever follows (the 5.x mapping section) is ignored, as 4.9.7 ignores it.
    return RegisterBrokerBody(data_version, sorted_topics(topics), filter_servers)
