"""Decoded REGISTER_BROKER bodies, recalled by content (docs/remoting-protocol.md §8;
docs/nameserver-semantics.md §4).

Pure: no clock (``now`` is an argument), no I/O. Used by the request processor.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from nameserver.codec import (
    NO_LIMITS,
    RegisterBrokerBody,
    RegisterLimits,
    Version,
    check_body_crc32,
    check_topic_head,
    decode_register_body,
)
from nameserver.model import topics_digest

_V3_0_11 = int(Version.V3_0_11)  # a plain int: an enum member is a class attribute lookup


@dataclass(frozen=True, slots=True)
class PreparedBody:
    """What was computed off the loop for a compressed body (``RegisterInflation``), for the
    decode of the same request.

    Attributes:
        crc32: the body's ``body_crc32``.
        content: its inflated content under the cache's limits, or the error inflating it raised.
    """

    crc32: int
    content: bytes | Exception


class RegisterBodyCache:
    """Decoded REGISTER_BROKER bodies by content, so a periodic re-registration is not re-parsed.

    Every broker re-sends its whole, usually unchanged, topic table every 30 s
    (docs/nameserver-semantics.md §4), and decoding it dominates a registration's cost. Entries are
    keyed by the body bytes themselves plus the format switches that change its meaning (old format,
    compressed), and hold the decoded body and its ``topics_digest``. The key is the bytes, not a
    digest of them: Python's own hash of a bytes object is much cheaper than a BLAKE2b, and a hit
    compares the bytes, so no collision can recall another body. A body of a length no held body
    has is not hashed at all: hashing a large body that is then refused would cost the loop more
    than refusing it. The CRC and version checks are never cached. A body whose DataVersion took
    the server clock (no ``timestamp`` sent) is never cached, since decoding it again later would
    give another value. Bounded by the number of topics held and by the bytes of the bodies held (a
    body padded with whitespace is large for its topics).

    The default bound (50,000 topic configs: about 7 MiB decoded plus about 8 MiB of body bytes)
    holds every body of a fleet of 1,000 brokers with 50 topics each; a fleet with much larger
    tables decodes most bodies afresh rather than hold a second copy of every table in memory.

    Args:
        max_topics: topic configs held in total; a larger body is not cached at all.
        max_bytes: body bytes held in total; a larger body is not cached at all.
        limits: the caps a registration's body must stay within ([nameserver]
            ``max_register_topics``, ``max_register_body_bytes``).
    """

    def __init__(
        self, max_topics: int = 50_000, max_bytes: int = 16 * 1024 * 1024, limits: RegisterLimits = NO_LIMITS
    ) -> None:
        self.limits = limits
        # a compressed body's CRC and content computed beforehand, off the loop, for the next
        # decode (RegisterInflation); set and cleared around one request
        self.prepared: PreparedBody | None = None
        self.max_topics = max_topics
        self.max_bytes = max_bytes
        self._bytes = 0
        self._entries: OrderedDict[tuple[bool, bool, bytes], tuple[RegisterBrokerBody, str]] = OrderedDict()
        self._lengths: dict[int, int] = {}  # bodies held by length
        self._topics = 0
        self.hits = 0
        self.misses = 0

    def __len__(self) -> int:
        """Bodies held."""
        return len(self._entries)

    @property
    def topic_count(self) -> int:
        """Topic configs held, over all bodies."""
        return self._topics

    @property
    def byte_count(self) -> int:
        """Body bytes held, over all bodies."""
        return self._bytes

    def holds(self, body: bytes, *, version: int, compressed: bool) -> bool:
        """Whether ``body`` is held decoded (a hit needs no inflation)."""
        old_format = version < _V3_0_11
        return len(body) in self._lengths and (old_format, compressed and not old_format, body) in self._entries

    def decode(
        self, body: bytes | None, *, version: int, compressed: bool, body_crc32: int, now: int
    ) -> tuple[RegisterBrokerBody, str]:
        """Decode (or recall) a body after the checks of docs/remoting-protocol.md §8.1-§8.2.

        Returns:
            The body and the digest of its (sorted) topics.

        Raises:
            BadHeader, RegisterTooLarge, CrcMismatch, BadBody: as
                :func:`nameserver.codec.decode_register_body`.
        """
        if not body or version < 0:
            decoded = decode_register_body(
                body, version=version, compressed=compressed, now=now, body_crc32=body_crc32, limits=self.limits
            )
            return decoded, topics_digest(decoded.topics)
        old_format = version < _V3_0_11
        # the caps that are cheap to check come before the CRC, so that a body over them costs
        # the loop microseconds whatever its size (docs/remoting-protocol.md §8.1a)
        if old_format or not compressed:
            self.limits.check_bytes(len(body), f"{len(body)} bytes")
        prepared = self.prepared
        raw = body if type(body) is bytes else bytes(body)
        key = (old_format, compressed and not old_format, raw)
        entry = self._entries.get(key) if len(raw) in self._lengths else None
        if entry is None and prepared is None and key[1]:  # a held or prepared body passed it
            check_topic_head(body, self.limits)
        # every request, cached or not (§8.2)
        check_body_crc32(body, body_crc32, None if prepared is None else prepared.crc32)
        if entry is not None:
            self._entries.move_to_end(key)
            self.hits += 1
            return entry
        self.misses += 1
        decoded = decode_register_body(
            body,
            version=version,
            compressed=compressed,
            now=now,
            limits=self.limits,
            inflated=None if prepared is None else prepared.content,
        )
        entry = (decoded, topics_digest(decoded.topics))  # the codec returns topics sorted by name
        size = len(decoded.topics) + 1
        if decoded.data_version.timestamp != now and size <= self.max_topics and len(raw) <= self.max_bytes:
            self._entries[key] = entry
            self._topics += size
            self._bytes += len(raw)
            self._lengths[len(raw)] = self._lengths.get(len(raw), 0) + 1
            while self._topics > self.max_topics or self._bytes > self.max_bytes:
                (_, _, old_raw), (old, _) = self._entries.popitem(last=False)
                self._topics -= len(old.topics) + 1
                self._bytes -= len(old_raw)
                if self._lengths[len(old_raw)] == 1:
                    del self._lengths[len(old_raw)]
                else:
                    self._lengths[len(old_raw)] -= 1
        return entry
