"""Decoding a REGISTER_BROKER body: which form it is in (docs/remoting-protocol.md §8.1), after
the CRC check (§8.2)."""

from __future__ import annotations

from collections.abc import Mapping

from nameserver.codec.constants import Version
from nameserver.codec.headers import BadHeader
from nameserver.codec.register.body import MAX_INFLATED_BYTES, BadBody, RegisterBrokerBody, check_body_crc32
from nameserver.codec.register.compressed import decode_compressed, inflate
from nameserver.codec.register.json_form import decode_wrapper, filter_list, load_json
from nameserver.model import ZERO_DATA_VERSION, DataVersion


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
        data_version, topics = decode_wrapper(load_json(body, "TopicConfigSerializeWrapper"), now)
        return RegisterBrokerBody(data_version, topics, None)
    if compressed:
        return decode_compressed(inflate(body, max_inflated), now)
    obj = load_json(body, "RegisterBrokerBody")
    if type(obj) is not dict and not isinstance(obj, Mapping):
        raise BadBody("Failed to decode RegisterBrokerBody: not an object")
    wrapper = obj.get("topicConfigSerializeWrapper")
    if wrapper is None:  # Java's field initializer: an empty wrapper stamped now
        data_version, topics = DataVersion(now, 0), ()
    else:
        data_version, topics = decode_wrapper(wrapper, now)
    try:
        filter_servers = filter_list(obj["filterServerList"]) if "filterServerList" in obj else []
    except ValueError as exc:
        raise BadBody(f"Failed to decode RegisterBrokerBody: {exc}") from None
    return RegisterBrokerBody(data_version, topics, filter_servers)
