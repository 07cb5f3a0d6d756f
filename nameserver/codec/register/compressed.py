"""The compressed form of REGISTER_BROKER bodies (docs/remoting-protocol.md §8.3): a zlib stream
of length-prefixed parts, topic configs as ``TopicConfig.encode()`` text."""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from typing import TypeVar

from nameserver.codec.fastjson import loads
from nameserver.codec.headers import parse_int32
from nameserver.codec.register.body import FILTER_TYPES, I32, BadBody, RegisterBrokerBody, RegisterLimits
from nameserver.codec.register.json_form import filter_list, parse_data_version, sorted_topics
from nameserver.model import TopicConfig

# Content comes out of zlib a piece at a time, from input fed a slice at a time, so that inflating
# never holds CPython's GIL for long: zlib releases it while it inflates, a piece of CHUNK_BYTES
# fills one output block, which CPython hands back as is (a larger piece is copied once more into
# a fresh object, with the GIL held), and each call copies no more than INPUT_BYTES of unconsumed
# input into ``unconsumed_tail`` (the whole rest of the body if it were given at once).
CHUNK_BYTES = 32 * 1024
INPUT_BYTES = 16 * 1024
# The topic count follows the data version's JSON (a few dozen bytes), so the first content of a
# real body holds it: check_topic_head inflates no more than this much, from no more than
# HEAD_INPUT_BYTES of the body, a few microseconds.
HEAD_CONTENT_BYTES = 4 * 1024
HEAD_INPUT_BYTES = 1024
_Head = TypeVar("_Head", bytearray, bytes)


def inflate_chunks(data: bytes, limits: RegisterLimits) -> Iterator[bytes]:
    """The zlib stream's content, in pieces of at most :data:`CHUNK_BYTES`.

    The topic count (after the data version's JSON) is checked as soon as the content reaches it,
    and the content is refused as soon as it passes ``limits.max_body_bytes``, before the piece
    that passes it is handed out: an oversized body is refused having inflated no more than the cap
    (a body over the topic cap, usually only its first piece), and its content is never built.

    Raises:
        RegisterTooLarge: too many topics, or more bytes than the cap (while iterating).
        BadBody: not a complete zlib stream (while iterating).
    """
    limit = limits.max_body_bytes
    inflater = zlib.decompressobj()
    view = memoryview(data)
    taken = 0  # input bytes fed to zlib so far
    tail: bytes | memoryview = b""  # fed but not consumed (zlib stopped at the piece's size)
    size = 0
    head: bytearray | None = bytearray()  # the content up to the topic count, until it is read
    try:
        while not inflater.eof:
            fed = tail or view[taken : taken + INPUT_BYTES]
            if not tail:
                taken += len(fed)
            piece = inflater.decompress(fed, min(CHUNK_BYTES, limit + 1 - size))
            tail = inflater.unconsumed_tail
            if not piece:
                if not fed:
                    break  # no input left and nothing more from zlib: truncated
                continue
            size += len(piece)
            if head is not None:
                head += piece
                head = _check_topic_count(head, limits)
            if size > limit:  # one byte more than the cap is too many
                limits.check_bytes(size, f"inflates beyond {limit} bytes")
            yield piece
    except zlib.error as exc:
        raise BadBody(f"Failed to decode RegisterBrokerBody: bad zlib stream: {exc}") from None
    if not inflater.eof:
        raise BadBody("Failed to decode RegisterBrokerBody: truncated zlib stream")
    # bytes after the stream's end are ignored, as InflaterInputStream does


def inflate(data: bytes, limits: RegisterLimits) -> bytes:
    """The zlib stream's content, all of it (:func:`inflate_chunks` joined).

    Raises:
        RegisterTooLarge: too many topics, or more bytes than the cap.
        BadBody: not a complete zlib stream.
    """
    return b"".join(inflate_chunks(data, limits))


def check_topic_head(data: bytes, limits: RegisterLimits) -> None:
    """Refuse a compressed body whose topic count, read from the start of its content, is over the
    cap, having inflated no more than :data:`HEAD_CONTENT_BYTES`.

    A start that does not reach the count, or is no zlib stream, passes: the whole inflation
    (:func:`inflate_chunks`) checks the count and the stream again.

    Raises:
        RegisterTooLarge: too many topics.
    """
    try:
        head = zlib.decompressobj().decompress(memoryview(data)[:HEAD_INPUT_BYTES], HEAD_CONTENT_BYTES)
    except zlib.error:
        return
    _check_topic_count(head, limits)


def _check_topic_count(head: _Head, limits: RegisterLimits) -> _Head | None:
    """Check the topic count once ``head`` (the content so far) reaches it, after the data
    version's length and JSON; ``head`` while it does not, None once there is nothing to check
    (checked, or a negative length, which decoding refuses as truncated).

    Raises:
        RegisterTooLarge: too many topics.
    """
    if len(head) < 4:
        return head
    (n,) = I32.unpack_from(head, 0)
    if n < 0:
        return None
    if len(head) < 8 + n:
        return head
    (count,) = I32.unpack_from(head, 4 + n)
    limits.check_topics(count)
    return None


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
