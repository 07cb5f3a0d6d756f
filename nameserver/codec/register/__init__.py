"""REGISTER_BROKER bodies (docs/remoting-protocol.md §8) and DataVersion bodies (codes 103, 322).

Decoding never reads a clock: a DataVersion without ``timestamp`` takes the ``now`` argument
(docs/nameserver-semantics.md §1.3). Errors raise :class:`BadBody` / :class:`CrcMismatch` /
:class:`BadHeader` / :class:`RegisterTooLarge` (over the server's :class:`RegisterLimits`), which
the request handler turns into SYSTEM_ERROR responses (§9.2); the encoders exist for our own tools
(fleet simulator, tests). Parts: ``body`` (types, errors,
CRC), ``json_form``, ``compressed``, ``body_decoder``, ``body_encoder``; all re-exported by
:mod:`nameserver.codec`.

Example:
    >>> body = encode_register_body(DataVersion(1700000000000, 3), [TopicConfig("T", 4, 4)])
    >>> decode_register_body(body, version=407, compressed=False, now=0).topics[0].read_queue_nums
    4
"""

from nameserver.codec.register.body import (
    MAX_INFLATED_BYTES,
    NO_LIMITS,
    BadBody,
    CrcMismatch,
    RegisterBrokerBody,
    RegisterLimits,
    RegisterTooLarge,
    body_crc32,
    check_body_crc32,
)
from nameserver.codec.register.body_decoder import decode_register_body
from nameserver.codec.register.body_encoder import encode_register_body, topic_config_json, topic_config_text
from nameserver.codec.register.compressed import (
    HEAD_INPUT_BYTES,
    check_topic_head,
    inflate,
    inflate_chunks,
    parse_topic_config_text,
)
from nameserver.codec.register.json_form import decode_data_version_body, parse_data_version

__all__ = [
    "HEAD_INPUT_BYTES",
    "MAX_INFLATED_BYTES",
    "NO_LIMITS",
    "BadBody",
    "CrcMismatch",
    "RegisterBrokerBody",
    "RegisterLimits",
    "RegisterTooLarge",
    "body_crc32",
    "check_body_crc32",
    "check_topic_head",
    "decode_data_version_body",
    "decode_register_body",
    "encode_register_body",
    "inflate",
    "inflate_chunks",
    "parse_data_version",
    "parse_topic_config_text",
    "topic_config_json",
    "topic_config_text",
]
