"""The replay cache: the canonical signatures accepted within the freshness window, so that the
same signed request is refused a second time. Pure: ``now`` is an argument."""

from __future__ import annotations

import heapq


class ReplayCache:
    """Signatures seen, each kept until its timestamp leaves the freshness window.

    Bounded: past ``max_entries`` the entry with the oldest timestamp is dropped, and from then
    on every signature not newer than a dropped one is refused (``floor_ms``), since the cache can
    no longer tell whether it is a replay. A full cache narrows what it accepts; it never lets a
    replay through. Expired entries raise the floor the same way, which also keeps a replay out
    when the server's clock steps back.

    Args:
        window_ms: the freshness window: a timestamp older than ``now - window_ms`` is refused
            before it reaches the cache, so its entry is no longer needed.
        max_entries: the most signatures kept.

    Example:
        >>> cache = ReplayCache(window_ms=1000, max_entries=2)
        >>> cache.admit("sig-a", 5000, now=5000), cache.admit("sig-a", 5000, now=5001)
        (None, 'replayed')
    """

    __slots__ = ("window_ms", "max_entries", "floor_ms", "_by_time", "_seen")

    def __init__(self, window_ms: int, max_entries: int) -> None:
        if window_ms < 0 or max_entries < 1:
            raise ValueError("a replay cache needs window_ms >= 0 and max_entries >= 1")
        self.window_ms = window_ms
        self.max_entries = max_entries
        self.floor_ms: int | None = None  # signatures stamped at or before this are refused
        self._by_time: list[tuple[int, str]] = []  # heap of (timestamp_ms, signature)
        self._seen: set[str] = set()

    def __len__(self) -> int:
        return len(self._seen)

    def admit(self, signature: str, timestamp_ms: int, now: int) -> str | None:
        """Record a signature stamped ``timestamp_ms``; None when it is new, else why it is refused
        (``replayed``, or ``timestamp older than the replay cache``)."""
        self._drop_expired(now)
        if self.floor_ms is not None and timestamp_ms <= self.floor_ms:
            return "timestamp older than the replay cache"
        if signature in self._seen:
            return "replayed"
        self._seen.add(signature)
        heapq.heappush(self._by_time, (timestamp_ms, signature))
        while len(self._seen) > self.max_entries:
            self._drop_oldest()
        return None

    def _drop_expired(self, now: int) -> None:
        horizon = now - self.window_ms
        while self._by_time and self._by_time[0][0] < horizon:
            self._drop_oldest()

    def _drop_oldest(self) -> None:
        timestamp_ms, signature = heapq.heappop(self._by_time)
        self._seen.discard(signature)
        if self.floor_ms is None or timestamp_ms > self.floor_ms:
            self.floor_ms = timestamp_ms
