"""Decoding a REGISTER_BROKER body: which form it is in (docs/remoting-protocol.md §8.1), after
the CRC check (§8.2)."""

from __future__ import annotations

from collections.abc import Mapping

from nameserver.codec.constants import Version
from nameserver.codec.headers import BadHeader
from nameserver.codec.register.body import NO_LIMITS, BadBody, RegisterBrokerBody, RegisterLimits, check_body_crc32
from nameserver.codec.register.compressed import check_topic_head, decode_compressed, inflate
from nameserver.codec.register.json_form import decode_wrapper, filter_list, load_json
from nameserver.model import ZERO_DATA_VERSION, DataVersion, TopicConfig


def decode_register_body(
    body: bytes | None,
    *,
    version: int,
    compressed: bool,
    now: int,
    body_crc32: int = 0,
    limits: RegisterLimits = NO_LIMITS,
    inflated: bytes | Exception | None = None,
) -> RegisterBrokerBody:
    """Decode a REGISTER_BROKER body by the rules of §8.1, after the CRC check of §8.2.

    The caps of ``limits`` are checked as early as each form allows, so that an oversized body
    costs little: an uncompressed body's size before the CRC and the parse; a compressed body's
    topic count from the first bytes it inflates to (before the CRC when the count is within
    :data:`~nameserver.codec.register.compressed.HEAD_CONTENT_BYTES` of content, as in every real
    body), and its inflated size while inflating; an uncompressed body's topic count before its
    topics are read.

    Args:
        body: the frame body (``None`` or empty: no body).
        version: the request's ``version``; < 37 means a bare TopicConfigSerializeWrapper.
        compressed: the parsed ``compressed`` extField (ignored when ``version`` < 37).
        now: the server clock (ms), for a DataVersion without ``timestamp``.
        body_crc32: the parsed ``bodyCrc32`` extField; 0 skips the check.
        limits: the caps on topics and inflated bytes (none beyond the codec's own by default).
        inflated: a compressed body's content as :func:`inflate` gave it under the same
            ``limits`` (or the error it raised), computed beforehand (off the server's loop).

    Raises:
        BadHeader: ``version`` is negative (field ``version``).
        RegisterTooLarge: over a cap of ``limits``.
        CrcMismatch: the CRC check failed.
        BadBody: the body cannot be decoded.
    """
    if version < 0:  # RocketMQ fails with an index error on MQVersion.Version
        raise BadHeader("version", f"invalid request version {version}")
    old_format = version < Version.V3_0_11
    if body and (old_format or not compressed):
        limits.check_bytes(len(body), f"{len(body)} bytes")
    elif body and inflated is None:  # content computed beforehand passed this check before
        check_topic_head(body, limits)
    check_body_crc32(body, body_crc32)
    if not body:
        return RegisterBrokerBody(ZERO_DATA_VERSION, (), None if old_format else [])
    if old_format:
        data_version, topics = decode_wrapper(load_json(body, "TopicConfigSerializeWrapper"), now, limits)
        return RegisterBrokerBody(data_version, topics, None)
    if compressed:
        if isinstance(inflated, Exception):
            raise inflated
        return decode_compressed(inflate(body, limits) if inflated is None else inflated, now)
    return _decode_json_form(body, now, limits)


def _decode_json_form(body: bytes, now: int, limits: RegisterLimits) -> RegisterBrokerBody:
    """A version >= 37 uncompressed body: a JSON RegisterBrokerBody (wrapper and filter servers)."""
    obj = load_json(body, "RegisterBrokerBody")
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise BadBody("Failed to decode RegisterBrokerBody: not an object")
    wrapper = obj.get("topicConfigSerializeWrapper")
    topics: tuple[TopicConfig, ...]
    if wrapper is None:  # Java's field initializer: an empty wrapper stamped now
        data_version, topics = DataVersion(now, 0), ()
    else:
        data_version, topics = decode_wrapper(wrapper, now, limits)
    try:
        filter_servers = filter_list(obj["filterServerList"]) if "filterServerList" in obj else []
    except ValueError as exc:
        raise BadBody(f"Failed to decode RegisterBrokerBody: {exc}") from None
    return RegisterBrokerBody(data_version, topics, filter_servers)
