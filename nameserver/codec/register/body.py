"""What a REGISTER_BROKER body says, the errors of decoding one, and the body CRC
(docs/remoting-protocol.md §8.2)."""

from __future__ import annotations

import struct
import zlib
from dataclasses import dataclass

from nameserver.codec.headers import RequestError
from nameserver.model import MULTI_TAG, SINGLE_TAG, DataVersion, TopicConfig


class BadBody(RequestError):
    """A body that cannot be decoded (§8.3, §9.2): answered SYSTEM_ERROR, event ``bad_body``."""

    reason = "bad_body"


class RegisterTooLarge(RequestError):
    """A registration over the server's caps (``[nameserver] max_register_topics``,
    ``max_register_body_bytes``): answered SYSTEM_ERROR, event ``register_too_large``."""

    reason = "register_too_large"


@dataclass(frozen=True, slots=True)
class RegisterLimits:
    """How large a REGISTER_BROKER body may be; checked before its topics are parsed.

    Attributes:
        max_topics: topic configs one registration may carry (as sent, duplicates included).
        max_body_bytes: the body's size after inflation (an uncompressed body: its size).
    """

    max_topics: int
    max_body_bytes: int

    def check_topics(self, count: int) -> None:
        """Raise :class:`RegisterTooLarge` when ``count`` topics are too many."""
        if count > self.max_topics:
            raise RegisterTooLarge(f"register body too large: {count} topics > max_register_topics {self.max_topics}")

    def check_bytes(self, size: int, what: str = "bytes") -> None:
        """Raise :class:`RegisterTooLarge` when a body of ``size`` bytes is too large."""
        if size > self.max_body_bytes:
            raise RegisterTooLarge(f"register body too large: {what} > max_register_body_bytes {self.max_body_bytes}")


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
# The server's own cap (RegisterLimits.max_body_bytes) may not exceed it.
MAX_INFLATED_BYTES = 256 * 1024 * 1024
# No limit beyond the codec's own: for our tools, which decode what they wrote.
NO_LIMITS = RegisterLimits(max_topics=2**31 - 1, max_body_bytes=MAX_INFLATED_BYTES)

I32 = struct.Struct(">i")  # the compressed form's length prefixes
FILTER_TYPES = (SINGLE_TAG, MULTI_TAG)


def body_crc32(body: bytes | None) -> int:
    """``bodyCrc32`` of a body (§8.2): CRC-32 masked to 31 bits; 0 for no body."""
    return zlib.crc32(body) & 0x7FFFFFFF if body else 0


def check_body_crc32(body: bytes | None, expected: int, actual: int | None = None) -> None:
    """Check the header's ``bodyCrc32`` (§8.2); 0 means no check. ``actual``: the body's
    :func:`body_crc32` if it was computed beforehand.

    Raises:
        CrcMismatch: ``expected`` is non-zero and differs (a negative value never matches).
    """
    if expected != 0:
        if actual is None:
            actual = body_crc32(body)
        if actual != expected:
            raise CrcMismatch(expected, actual)
