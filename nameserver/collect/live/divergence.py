"""Disagreements between the observed servers, judged as the nightly divergence stage judges them
(docs/audit.md, "Divergence"): four kinds, each per key; the servers in a known period are compared;
a disagreement is an *episode* and an ``ns_divergence`` finding once it has lasted longer than the
grace, from when it began.

Views per kind (a server with no view of a key is not compared):

- ``route_missing`` (topic): ``present`` with any QueueData of it, else ``absent``;
- ``broker_missing`` (broker address): ``live`` while the cluster info lists it, else ``absent``;
- ``queue_data_mismatch`` (topic, broker name): ``read/write/perm/sysflag``, or ``absent`` on a
  server that has the topic and a BrokerData of that name;
- ``broker_addrs_mismatch`` (broker name): the BrokerData's addresses, on servers that have it.

An episode's views, majority and servers off it are those of its longest *stretch* (same views,
same servers up); ties go to the earliest.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from nameserver.collect.live.findings import Detail, FindingBook, LiveFinding
from nameserver.collect.live.servers import KnownServer, addrs_text

ROUTE_MISSING = "route_missing"
BROKER_MISSING = "broker_missing"
QUEUE_DATA_MISMATCH = "queue_data_mismatch"
BROKER_ADDRS_MISMATCH = "broker_addrs_mismatch"
ABSENT = "absent"
FINDING_KIND = "ns_divergence"

Key = tuple[str, Any]  # (kind, topic | broker address | broker name | (topic, broker name))


def views_of(key: Key, servers: list[tuple[str, KnownServer]]) -> dict[str, str]:
    """Each compared server's view of ``key``; ``servers``: (id, server) pairs sorted by id."""
    kind, what = key
    if kind == ROUTE_MISSING:
        return {ns: "present" if what in server.qd else ABSENT for ns, server in servers}
    if kind == BROKER_MISSING:
        return {ns: "live" if what in server.addrs else ABSENT for ns, server in servers}
    views: dict[str, str] = {}
    if kind == QUEUE_DATA_MISMATCH:
        topic, name = what
        for ns, server in servers:
            cells = server.qd.get(topic)
            value = cells.get(name) if cells else None
            if value is not None:
                views[ns] = value[4]
            elif cells and name in server.brokers:
                views[ns] = ABSENT
        return views
    for ns, server in servers:
        if what in server.brokers:
            views[ns] = addrs_text(server.brokers[what]["broker_addrs"])
    return views


def majority(views: Mapping[str, str]) -> str:
    """The view most servers hold; a tie goes to a held value over ``absent``, then the greatest."""
    counts = Counter(views.values())
    return max(counts, key=lambda v: (counts[v], v != ABSENT, v))


def subject_of(key: Key) -> str:
    """The finding's subject: the topic, the broker address or the broker name."""
    kind, what = key
    return what[0] if kind == QUEUE_DATA_MISMATCH else str(what)


@dataclass
class Episode:
    """One key's disagreement in progress.

    Attributes:
        start_ms: when it began.
        stretch: (start, views, servers up) of the current stretch.
        longest: (length, -start, views) of the longest stretch that ended.
        critical: a route was missing on most up servers at some time.
        finding: its ``ns_divergence`` finding once it outlasted the grace.
    """

    start_ms: int
    stretch: tuple[int, tuple[Any, ...], tuple[Any, ...]]
    longest: tuple[Any, ...] | None = None
    critical: bool = False
    finding: LiveFinding | None = None
    names: dict[str, Any] = field(default_factory=dict)

    def best_views(self, now: int) -> dict[str, str]:
        """The views of the longest stretch so far (the current one counted up to ``now``)."""
        start, views, _ = self.stretch
        current = (now - start, -start, views)
        best = current if self.longest is None or current > self.longest else self.longest
        return dict(best[2])


class Divergence:
    """The episodes of every key.

    Args:
        grace_ms: disagreements lasting at most this long are no episode.
        book: where ``ns_divergence`` findings open and close.
        cause: (key, views, majority) -> (family, cause key) of a finding's incident.
    """

    def __init__(self, grace_ms: int, book: FindingBook, cause: Callable[[Key, LiveFinding], tuple[str, str]]) -> None:
        self.grace_ms = grace_ms
        self.book = book
        self.cause = cause
        self.episodes: dict[Key, Episode] = {}

    def evaluate(self, keys: Iterable[Key], servers: Mapping[str, KnownServer], now: int) -> None:
        """Look at each key at ``now``: a disagreement begins, goes on or ends."""
        ordered = sorted(servers.items())
        up = tuple(ns for ns, _ in ordered)
        if len(ordered) < 2 and not self.episodes:
            return  # nothing to compare, nothing in progress
        for key in keys:
            views = views_of(key, ordered)
            episode = self.episodes.get(key)
            if len(set(views.values())) > 1:
                frozen = tuple(views.items())
                critical = key[0] == ROUTE_MISSING and 2 * sum(v == ABSENT for v in views.values()) > len(up)
                if episode is None:
                    self.episodes[key] = Episode(now, (now, frozen, up), critical=critical)
                    continue
                episode.critical |= critical
                if (frozen, up) != episode.stretch[1:]:
                    start, old, _ = episode.stretch
                    ended = (now - start, -start, old)
                    episode.longest = ended if episode.longest is None or ended > episode.longest else episode.longest
                    episode.stretch = (now, frozen, up)
                if episode.finding is not None:
                    self._describe(key, episode, now)
            elif episode is not None:
                del self.episodes[key]
                if episode.finding is None and now - episode.start_ms > self.grace_ms:
                    self._open(key, episode, now)
                if episode.finding is not None:
                    self._describe(key, episode, now)
                    self.book.end(("ns_divergence", key), now)

    def evaluate_changed(
        self,
        servers: Mapping[str, KnownServer],
        topics: set[str],
        brokers: set[str],
        addrs: set[str],
        old_cells: dict[str, set[str]],
        now: int,
    ) -> None:
        """:meth:`evaluate` the keys a change of ``topics``, broker names ``brokers`` and broker
        addresses ``addrs`` may have touched (``old_cells``: each topic's broker names before it),
        and the disagreements in progress on them."""
        keys: set[Key] = {(BROKER_MISSING, a) for a in addrs} | {(BROKER_ADDRS_MISMATCH, b) for b in brokers}
        known = list(servers.values())
        first, others = (known[0], known[1:]) if known else (None, [])
        same: dict[str, bool] = {}

        def differs(topic: str) -> bool:
            # every server with the same QueueData of the topic (or none): no key of it disagrees
            if not others:  # one server (or none) agrees with itself
                return False
            agrees = same.get(topic)
            if agrees is None:
                cells = first.qd.get(topic) if first is not None else None
                agrees = same[topic] = True
                for server in others:  # a loop, not all(): called for every topic when a server joins
                    if server.qd.get(topic) != cells:
                        agrees = same[topic] = False
                        break
            return not agrees

        # a topic of ``topics`` has its keys already, every broker name of it included: when they are
        # every topic (a server joined the comparison), the broker names add none
        whole = all(server.qd.keys() <= topics for server in known)
        # and when every server holds the same QueueData of every topic, no topic's key disagrees
        # (one comparison of the tables, not one per topic)
        agree = whole and all(server.qd == first.qd for server in others) if first is not None else True
        for topic in () if agree else topics:
            if not differs(topic):
                continue
            keys.add((ROUTE_MISSING, topic))
            names = set(old_cells.get(topic, ()))
            for server in known:
                names |= server.qd.get(topic, {}).keys()
            keys |= {(QUEUE_DATA_MISMATCH, (topic, n)) for n in names}
        for name in () if whole else brokers:
            for server in known:
                keys |= {
                    (QUEUE_DATA_MISMATCH, (t, name))
                    for t in server.topics_of.get(name, ())
                    if t not in topics and differs(t)
                }
        for key in self.episodes:  # a disagreement in progress is looked at whatever the rest says
            if key[0] == ROUTE_MISSING and key[1] in topics:
                keys.add(key)
            elif key[0] == QUEUE_DATA_MISMATCH and (key[1][0] in topics or key[1][1] in brokers):
                keys.add(key)
        self.evaluate(keys, servers, now)

    def tick(self, now: int) -> None:
        """Open the episodes that have now outlasted the grace."""
        for key, episode in self.episodes.items():
            if episode.finding is None and now - episode.start_ms > self.grace_ms:
                self._open(key, episode, now)

    def end_all(self, now: int) -> None:
        """Every server left the comparison at ``now`` (midnight): every episode ends."""
        self.evaluate(list(self.episodes), {}, now)

    def pending_causes(self, now: int) -> set[tuple[str, str]]:
        """The cause keys of the disagreements not (yet) past the grace."""
        causes = set()
        for key, episode in self.episodes.items():
            if episode.finding is None:
                views = episode.best_views(now)
                top = majority(views)
                off = tuple(ns for ns, v in views.items() if v != top) or tuple(views)
                probe = LiveFinding(FINDING_KIND, None, subject_of(key), episode.start_ms, "warning", servers=off)
                causes.add(self.cause(key, probe))
        return causes

    def keys(self) -> list[Key]:
        """The keys with a disagreement in progress."""
        return list(self.episodes)

    def _open(self, key: Key, episode: Episode, now: int) -> None:
        finding = LiveFinding(
            FINDING_KIND, None, subject_of(key), episode.start_ms, "critical" if episode.critical else "warning"
        )
        episode.finding = self.book.start(("ns_divergence", key), finding)
        self._describe(key, episode, now)

    def _describe(self, key: Key, episode: Episode, now: int) -> None:
        finding = episode.finding
        assert finding is not None, "described before it opened"
        views = episode.best_views(now)
        top = majority(views)
        off = tuple(ns for ns, v in views.items() if v != top) or tuple(views)
        kind, what = key
        detail: Detail = {"kind": kind, "ns_views": views, "majority": top}
        if kind == QUEUE_DATA_MISMATCH:
            detail["key"] = {"topic": what[0], "broker_name": what[1]}
        elif kind == BROKER_MISSING:
            detail["key"] = {"broker_addr": what}
        elif kind == ROUTE_MISSING:
            detail["key"] = {"topic": what}
        else:
            detail["key"] = {"broker_name": what}
        finding.detail = detail
        finding.servers = off
        finding.severity = "critical" if episode.critical else "warning"
        finding.family, finding.cause_key = self.cause(key, finding)
