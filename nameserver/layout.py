"""A broker fleet's shape: clusters, broker groups, addresses and topic placement.

Shared by the simulator (``nsaudit simulate``) and the live fleet (``nsaudit fleet``), so both
register the same fleet for the same arguments. Pure and deterministic for a seed and a set of
layout faults: no clock, no I/O, only ``random.Random(seed)``.

The distribution, chosen to look like a production RocketMQ estate:

* **Processes and groups.** ``brokers`` counts broker processes. They fill broker groups of one
  master (id 0) and ``slaves`` slaves (ids 1..K) in order, so the last group may be short of
  slaves when ``brokers`` is not a multiple of ``slaves + 1``. Groups are named ``broker-000``,
  ``broker-001``, ... (wider when there are more than 1000 groups).
* **Clusters.** A few, growing with the fleet: 1 below 4 groups, 2 from 4, 3 from 16, 4 from 128,
  one more per factor of 8 after that, at most 6 (500 groups -> 4 clusters). Groups are dealt to clusters in
  contiguous blocks whose sizes are skewed (weights 1, 1/2, 1/3, ...; every cluster gets at least
  one group), so one cluster is the big shared one. Names ``cluster-0``, ``cluster-1``, ...
* **Addresses.** Member ``m`` of the ``g``-th group of cluster ``c`` listens on
  ``10.<c + 8*(g // 256)>.<g % 256>.<m + 1>:10911`` with its HA port on 10912: readable, unique,
  and a valid IPv4 address for up to 31 * 256 groups per cluster and 253 slaves.
* **Topics** (``topic-0000``, ...), ``topic_sys_flag`` 0, perm 6, read = write queues unless
  said otherwise:

  - ``hot`` (~2%, at least one once there are 10 topics): on 50-100% of the groups of one to all
    clusters, 8 or 16 queues.
  - ``single`` (~3%): exactly one group (``single_broker_topic``, an info finding).
  - ``regular`` (the rest): 2-4 groups of one cluster, queues 4/8/16 with weights 50/35/15.

**Layout faults** (:data:`LAYOUT_FAULTS`, part of the simulator's and the fleet's fault
vocabulary) are the misconfigurations an estate is born with rather than events of the day:

* ``read_lt_write``: ~2% of the topics (at least one once there are 10) are placed like regular
  ones with fewer read than write queues (4/8 or 8/16), the scale-out mistake behind the audit's
  ``read_write_mismatch``. Without it no topic has read != write queues.
* ``queue_skew``: groups within a cluster are picked by Zipf-like weights ``1/(rank+1)**0.8``
  over a seeded ranking and clusters at random by their number of groups, so a few groups carry
  many more queues than the others; and in every cluster of two or more groups the busiest
  group was scaled up: each of its topics has :data:`SCALE_UP` times the read and write queues
  there. That puts every such cluster over the audit's default thresholds (coefficient of
  variation 0.5, max/mean 2: the busiest group at 4x at least the others' load makes the ratio
  over 2 from four groups on, the variation at least 0.6 with two and 0.7 with three), where
  Zipf weights alone only skew clusters of a dozen groups or more. :func:`layout_anomalies`
  names the clusters.

  Without it placement is balanced, as an operator placing each new topic on the emptiest
  brokers would: every topic goes to the cluster with the fewest write queues per group and,
  there, to the groups with the fewest (seeded ties). Each group then stays within one topic's
  queues (16) of every other group of its cluster, so a cluster whose groups average 16 write
  queues or more (about two regular topics per group) is within the default thresholds.

Example:
    >>> layout = build_layout(brokers=1000, slaves=1, topics=2000, seed=1)
    >>> len(layout.groups), len(layout.clusters), layout.groups[0].master.addr
    (500, 4, '10.0.0.1:10911')
    >>> balanced = build_layout(brokers=1000, slaves=1, topics=2000, seed=1, faults=())
    >>> layout_anomalies(balanced)
    ()
"""

from __future__ import annotations

import dataclasses
import math
import random
from collections.abc import Collection, Iterator
from dataclasses import dataclass, field
from typing import Any

from common.config import AuditConfig
from nameserver.model import MASTER_ID, TopicConfig, topics_digest

BROKER_PORT = 10911
HA_PORT = 10912

TOPIC_KINDS = ("regular", "hot", "read_lt_write", "single")
LAYOUT_FAULTS = ("read_lt_write", "queue_skew")
SCALE_UP = 4  # queue_skew: the busiest group of a cluster carries this many times the queues

# shares of the topic population (the rest is "regular")
_HOT_SHARE = 0.02
_READ_LT_WRITE_SHARE = 0.02
_SINGLE_SHARE = 0.03
_REGULAR_QUEUES = ((4, 8, 16), (50, 35, 15))
_MAX_CLUSTERS = 6
_ZIPF_EXPONENT = 0.8
_MAX_SLAVES = 253  # last octet m + 1 stays <= 254


@dataclass(frozen=True, slots=True)
class BrokerMember:
    """One broker process: the master (id 0) or a slave of its group."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    ha_addr: str

    @property
    def is_master(self) -> bool:
        """True for id 0."""
        return self.broker_id == MASTER_ID


@dataclass(frozen=True, slots=True)
class BrokerGroup:
    """A broker group (one broker name): its members and the topic table its brokers register.

    Attributes:
        members: the master first, then slaves by ascending id.
        topics: the group's topic configs sorted by topic name, as every member sends them
            (slaves too, as RocketMQ does; the name server ignores a slave's topics).
        topics_digest: ``model.topics_digest(topics)``.
    """

    cluster: str
    broker_name: str
    members: tuple[BrokerMember, ...]
    topics: tuple[TopicConfig, ...]
    topics_digest: str

    @property
    def master(self) -> BrokerMember:
        """The member with id 0."""
        return self.members[0]


@dataclass(frozen=True, slots=True)
class TopicLayout:
    """Where one topic lives.

    Attributes:
        kind: one of :data:`TOPIC_KINDS`.
        read_queue_nums, write_queue_nums: as placed; a group scaled up by the ``queue_skew``
            layout fault carries :data:`SCALE_UP` times as many (``BrokerGroup.topics``).
        broker_names: the groups carrying it, ascending.
        clusters: the clusters of those groups, ascending.
    """

    topic: str
    kind: str
    read_queue_nums: int
    write_queue_nums: int
    broker_names: tuple[str, ...]
    clusters: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class FleetLayout:
    """The whole fleet; see the module docstring for the distribution.

    Attributes:
        faults: the layout faults it was built with, in :data:`LAYOUT_FAULTS` order.
        scaled_up: the groups whose queues the ``queue_skew`` fault multiplied, one per cluster.
    """

    seed: int
    clusters: tuple[str, ...]
    groups: tuple[BrokerGroup, ...]
    topics: tuple[TopicLayout, ...]
    faults: tuple[str, ...] = LAYOUT_FAULTS
    scaled_up: tuple[str, ...] = ()

    def members(self) -> Iterator[BrokerMember]:
        """Every broker process, group by group, master first."""
        for group in self.groups:
            yield from group.members

    @property
    def broker_count(self) -> int:
        """Number of broker processes."""
        return sum(len(g.members) for g in self.groups)


def build_layout(brokers: int, slaves: int, topics: int, seed: int,
                 faults: Collection[str] = LAYOUT_FAULTS) -> FleetLayout:
    """Build the fleet for ``brokers`` processes in groups of 1 master + ``slaves`` slaves.

    Args:
        brokers: broker processes (>= 0).
        slaves: slaves per group, K (0..253).
        topics: topics to place (>= 0); none are placed when there are no groups.
        seed: the same seed and faults give the same layout.
        faults: fault names; the :data:`LAYOUT_FAULTS` among them shape the layout, others are
            ignored (callers pass their whole fault list). Default: every layout fault.

    Raises:
        ValueError: a negative count or too many slaves.
    """
    if brokers < 0 or slaves < 0 or topics < 0:
        raise ValueError(f"counts must be >= 0 (brokers={brokers}, slaves={slaves}, topics={topics})")
    if slaves > _MAX_SLAVES:
        raise ValueError(f"at most {_MAX_SLAVES} slaves per group, not {slaves}")
    layout_faults = tuple(f for f in LAYOUT_FAULTS if f in faults)
    rng = random.Random(seed)
    group_size = slaves + 1
    n_groups = -(-brokers // group_size)
    clusters = tuple(f"cluster-{i}" for i in range(_cluster_count(n_groups))) if n_groups else ()
    blocks = _cluster_blocks(n_groups, len(clusters))
    width = max(3, len(str(n_groups - 1)))
    names = [f"broker-{g:0{width}d}" for g in range(n_groups)]
    cluster_of = {names[g]: clusters[c] for c, (lo, hi) in enumerate(blocks) for g in range(lo, hi)}

    placements = _place_topics(rng, topics, names, blocks, layout_faults) if n_groups else []
    per_group: dict[str, list[TopicConfig]] = {name: [] for name in names}
    topic_layouts = []
    for topic, kind, read, write, group_names in placements:
        for name in group_names:
            per_group[name].append(TopicConfig(topic, read, write))
        topic_clusters = tuple(sorted({cluster_of[n] for n in group_names}))
        topic_layouts.append(TopicLayout(topic, kind, read, write, group_names, topic_clusters))
    scaled_up = _scale_up_busiest(per_group, names, blocks) if "queue_skew" in layout_faults else ()

    groups = []
    remaining = brokers
    for c, (lo, hi) in enumerate(blocks):
        for g in range(lo, hi):
            local = g - lo
            prefix = f"10.{c + 8 * (local // 256)}.{local % 256}."
            size = min(group_size, remaining)
            remaining -= size
            members = tuple(
                BrokerMember(clusters[c], names[g], m, f"{prefix}{m + 1}:{BROKER_PORT}", f"{prefix}{m + 1}:{HA_PORT}")
                for m in range(size)
            )
            group_topics = tuple(sorted(per_group[names[g]], key=lambda t: t.topic))
            groups.append(BrokerGroup(clusters[c], names[g], members, group_topics, topics_digest(group_topics)))
    return FleetLayout(seed, clusters, tuple(groups), tuple(topic_layouts), layout_faults, scaled_up)


def _scale_up_busiest(per_group: dict[str, list[TopicConfig]], names: list[str],
                      blocks: list[tuple[int, int]]) -> tuple[str, ...]:
    """Multiply the queues of the busiest group (most write queues, first name on ties) of every
    cluster of two or more groups by :data:`SCALE_UP`, in place; returns those groups' names."""
    scaled = []
    for lo, hi in blocks:
        if hi - lo < 2:
            continue
        load = [sum(t.write_queue_nums for t in per_group[names[g]]) for g in range(lo, hi)]
        if max(load) == 0:
            continue  # no topic in the cluster: nothing to scale
        busiest = names[lo + load.index(max(load))]
        per_group[busiest] = [
            dataclasses.replace(t, read_queue_nums=t.read_queue_nums * SCALE_UP,
                                write_queue_nums=t.write_queue_nums * SCALE_UP)
            for t in per_group[busiest]]
        scaled.append(busiest)
    return tuple(scaled)


@dataclass(frozen=True, slots=True)
class Anomaly:
    """One layout fault present in a layout: what the audit should find, and where.

    Attributes:
        kind: ``read_lt_write`` (subject: a topic) or ``queue_skew`` (subject: a cluster).
        detail: JSON-ready facts: the topic's queue numbers and groups, or the cluster's write
            queues per group, its coefficient of variation and max/mean, and the thresholds.
    """

    kind: str
    subject: str
    detail: dict[str, Any] = field(default_factory=dict)


def cluster_write_queues(layout: FleetLayout) -> dict[str, dict[str, int]]:
    """Write queues per broker group of each cluster, every group counted (0 without topics),
    as the audit's ``queue_distribution`` counts them."""
    return {cluster: {g.broker_name: sum(t.write_queue_nums for t in g.topics)
                      for g in layout.groups if g.cluster == cluster}
            for cluster in layout.clusters}


def skew(write_queues: Collection[int]) -> tuple[float, float] | None:
    """``(cv, max_over_mean)`` of write queues per group: population standard deviation over the
    mean, and the busiest group over the mean; None without queues (the audit's measures)."""
    if not write_queues:
        return None
    mean = sum(write_queues) / len(write_queues)
    if mean <= 0:
        return None
    std = math.sqrt(sum((q - mean) ** 2 for q in write_queues) / len(write_queues))
    return std / mean, max(write_queues) / mean


def layout_anomalies(layout: FleetLayout, max_cv: float = AuditConfig.queue_skew_cv,
                     max_over_mean: float = AuditConfig.queue_skew_max_over_mean) -> tuple[Anomaly, ...]:
    """The layout faults present in ``layout``, as the audit should report them.

    Each ``read_lt_write`` topic (detail: ``queue_nums``, ``[read, write]`` per group), then,
    when the layout was built with ``queue_skew``, each cluster of two or more groups over
    either threshold (the audit's defaults unless given; detail: ``write_queues`` per group,
    ``cv``, ``max_over_mean``, the thresholds and the ``scaled_up`` group). A cluster that a
    balanced layout leaves over a threshold (too few topics for its groups) is no fault and is
    not listed.
    """
    queue_nums = {(t.topic, g.broker_name): [t.read_queue_nums, t.write_queue_nums]
                  for g in layout.groups for t in g.topics}
    found = [
        Anomaly("read_lt_write", t.topic, {"queue_nums": {b: queue_nums[t.topic, b] for b in t.broker_names}})
        for t in layout.topics if t.read_queue_nums < t.write_queue_nums
    ]
    if "queue_skew" in layout.faults:
        for cluster, by_group in cluster_write_queues(layout).items():
            measured = skew(list(by_group.values())) if len(by_group) >= 2 else None
            if measured is None or (measured[0] <= max_cv and measured[1] <= max_over_mean):
                continue
            scaled = [name for name in layout.scaled_up if name in by_group]
            found.append(Anomaly("queue_skew", cluster, {
                "write_queues": by_group, "cv": round(measured[0], 4), "max_over_mean": round(measured[1], 4),
                "cv_threshold": max_cv, "max_over_mean_threshold": max_over_mean,
                "scaled_up": scaled[0] if scaled else None}))
    return tuple(found)


def _cluster_count(n_groups: int) -> int:
    if n_groups < 4:
        return 1
    return min(_MAX_CLUSTERS, 1 + (n_groups.bit_length() + 1) // 3)


def _cluster_blocks(n_groups: int, n_clusters: int) -> list[tuple[int, int]]:
    """Contiguous [lo, hi) group ranges per cluster, sizes skewed 1 : 1/2 : 1/3 ..., none empty."""
    if n_clusters == 0:
        return []
    weights = [1 / (i + 1) for i in range(n_clusters)]
    spare = n_groups - n_clusters  # every cluster gets one group first
    sizes = [1 + int(spare * w / sum(weights)) for w in weights]
    sizes[0] += n_groups - sum(sizes)  # rounding leftovers go to the big cluster
    blocks, lo = [], 0
    for size in sizes:
        blocks.append((lo, lo + size))
        lo += size
    return blocks


def _place_topics(
    rng: random.Random,
    n_topics: int,
    names: list[str],
    blocks: list[tuple[int, int]],
    faults: tuple[str, ...],
) -> list[tuple[str, str, int, int, tuple[str, ...]]]:
    """``(topic, kind, read, write, broker names)`` for every topic, in topic order.

    With ``queue_skew`` the draws are the ones this layout always made (the default layout
    does not change); without it :class:`_Balancer` picks the clusters and groups.
    """
    n_hot = max(1 if n_topics >= 10 else 0, round(n_topics * _HOT_SHARE))
    n_rlw = 0
    if "read_lt_write" in faults:
        n_rlw = max(1 if n_topics >= 10 else 0, round(n_topics * _READ_LT_WRITE_SHARE))
    n_single = round(n_topics * _SINGLE_SHARE)
    kinds = ["hot"] * n_hot + ["read_lt_write"] * n_rlw + ["single"] * n_single
    kinds += ["regular"] * (n_topics - len(kinds))
    kinds = kinds[:n_topics]
    rng.shuffle(kinds)  # special topics are spread over the name range, not the first ids

    # a seeded ranking of the groups inside each cluster: Zipf-like popularity when skewed,
    # the tie-break between equally loaded groups when balanced
    popularity = []
    for lo, hi in blocks:
        ranked = list(range(lo, hi))
        rng.shuffle(ranked)
        popularity.append((ranked, [1 / (r + 1) ** _ZIPF_EXPONENT for r in range(len(ranked))]))
    cluster_weights = [hi - lo for lo, hi in blocks]
    balancer = None if "queue_skew" in faults else _Balancer(blocks, [ranked for ranked, _ in popularity])
    width = max(4, len(str(n_topics - 1)))

    placements = []
    for i, kind in enumerate(kinds):
        topic = f"topic-{i:0{width}d}"
        if balancer is None:
            c = rng.choices(range(len(blocks)), cluster_weights)[0]
        else:
            c = balancer.emptiest_cluster()
        ranked, weights = popularity[c]
        if kind == "hot":
            spread = rng.randint(1, len(blocks))
            chosen_clusters = sorted(rng.sample(range(len(blocks)), spread))
            groups = []
            for cc in chosen_clusters:
                lo, hi = blocks[cc]
                share = rng.uniform(0.5, 1.0)
                if balancer is None:
                    groups += rng.sample(range(lo, hi), max(1, round((hi - lo) * share)))
                else:
                    groups += balancer.emptiest_groups(cc, max(1, round((hi - lo) * share)))
            queues = rng.choice((8, 16))
            read = write = queues
        else:
            k = 1 if kind == "single" else rng.randint(2, 4)
            if balancer is None:
                groups = _weighted_distinct(rng, ranked, weights, k)
            else:
                groups = balancer.emptiest_groups(c, k)
            if kind == "read_lt_write":
                write = rng.choice((8, 16))
                read = write // 2
            else:
                read = write = rng.choices(*_REGULAR_QUEUES)[0]
        if balancer is not None:
            balancer.add(groups, write)
        placements.append((topic, kind, read, write, tuple(names[g] for g in sorted(groups))))
    return placements


class _Balancer:
    """Balanced placement: write queues per group, the emptiest cluster and groups first.

    Adding ``q <= 16`` queues to the ``k`` emptiest groups of a cluster keeps every group of it
    within 16 queues of every other: the spread can only grow to ``q``.
    """

    def __init__(self, blocks: list[tuple[int, int]], ranked: list[list[int]]) -> None:
        self.blocks = blocks
        self.load = [0] * (blocks[-1][1] if blocks else 0)
        self.cluster_load = [0] * len(blocks)
        self.cluster_of = {g: c for c, (lo, hi) in enumerate(blocks) for g in range(lo, hi)}
        self.tie = {g: pos for order in ranked for pos, g in enumerate(order)}

    def emptiest_cluster(self) -> int:
        """The cluster with the fewest write queues per group (lowest index on ties)."""
        return min(range(len(self.blocks)),
                   key=lambda c: (self.cluster_load[c] / (self.blocks[c][1] - self.blocks[c][0]), c))

    def emptiest_groups(self, c: int, k: int) -> list[int]:
        """The ``k`` groups of cluster ``c`` with the fewest write queues (all when fewer)."""
        lo, hi = self.blocks[c]
        return sorted(range(lo, hi), key=lambda g: (self.load[g], self.tie[g]))[:k]

    def add(self, groups: list[int], write_queues: int) -> None:
        """Count a placed topic's write queues on its groups."""
        for g in groups:
            self.load[g] += write_queues
            self.cluster_load[self.cluster_of[g]] += write_queues


def _weighted_distinct(rng: random.Random, population: list[int], weights: list[float], k: int) -> list[int]:
    """``k`` distinct items drawn by weight (all of them when there are fewer than ``k``)."""
    if k >= len(population):
        return list(population)
    chosen: list[int] = []
    seen: set[int] = set()
    while len(chosen) < k:
        item = rng.choices(population, weights)[0]
        if item not in seen:
            seen.add(item)
            chosen.append(item)
    return chosen
