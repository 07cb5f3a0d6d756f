"""A broker fleet's shape: clusters, broker groups, addresses and topic placement.

Shared by the simulator (``nsaudit simulate``) and the live fleet (``nsaudit fleet``), so both
register the same fleet for the same arguments. Pure and deterministic for a seed: no clock, no
I/O, only ``random.Random(seed)``.

The distribution, chosen to look like a production RocketMQ estate and to give the audit
something to find:

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
  - ``read_lt_write`` (~2%): a regular placement with fewer read than write queues (4/8 or 8/16),
    the scale-out mistake behind the audit's ``read_write_mismatch``.
  - ``single`` (~3%): exactly one group (``single_broker_topic``).
  - ``regular`` (the rest): 2-4 groups of one cluster, queues 4/8/16 with weights 50/35/15.
    Clusters are picked by their number of groups, and groups within a cluster by Zipf-like
    weights ``1/(rank+1)**0.8`` over a seeded ranking, so a few groups carry many more queues than
    the others (``queue_skew``).

Example:
    >>> layout = build_layout(brokers=1000, slaves=1, topics=2000, seed=1)
    >>> len(layout.groups), len(layout.clusters), layout.groups[0].master.addr
    (500, 4, '10.0.0.1:10911')
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Iterator

from nameserver.model import MASTER_ID, TopicConfig, topics_digest

BROKER_PORT = 10911
HA_PORT = 10912

TOPIC_KINDS = ("regular", "hot", "read_lt_write", "single")

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
    """The whole fleet; see the module docstring for the distribution."""

    seed: int
    clusters: tuple[str, ...]
    groups: tuple[BrokerGroup, ...]
    topics: tuple[TopicLayout, ...]

    def members(self) -> Iterator[BrokerMember]:
        """Every broker process, group by group, master first."""
        for group in self.groups:
            yield from group.members

    @property
    def broker_count(self) -> int:
        """Number of broker processes."""
        return sum(len(g.members) for g in self.groups)


def build_layout(brokers: int, slaves: int, topics: int, seed: int) -> FleetLayout:
    """Build the fleet for ``brokers`` processes in groups of 1 master + ``slaves`` slaves.

    Args:
        brokers: broker processes (>= 0).
        slaves: slaves per group, K (0..253).
        topics: topics to place (>= 0); none are placed when there are no groups.
        seed: the same seed gives the same layout.

    Raises:
        ValueError: a negative count or too many slaves.
    """
    if brokers < 0 or slaves < 0 or topics < 0:
        raise ValueError(f"counts must be >= 0 (brokers={brokers}, slaves={slaves}, topics={topics})")
    if slaves > _MAX_SLAVES:
        raise ValueError(f"at most {_MAX_SLAVES} slaves per group, not {slaves}")
    rng = random.Random(seed)
    group_size = slaves + 1
    n_groups = -(-brokers // group_size)
    clusters = tuple(f"cluster-{i}" for i in range(_cluster_count(n_groups))) if n_groups else ()
    blocks = _cluster_blocks(n_groups, len(clusters))
    width = max(3, len(str(n_groups - 1)))
    names = [f"broker-{g:0{width}d}" for g in range(n_groups)]
    cluster_of = {names[g]: clusters[c] for c, (lo, hi) in enumerate(blocks) for g in range(lo, hi)}

    placements = _place_topics(rng, topics, names, clusters, blocks) if n_groups else []
    per_group: dict[str, list[TopicConfig]] = {name: [] for name in names}
    topic_layouts = []
    for topic, kind, read, write, group_names in placements:
        for name in group_names:
            per_group[name].append(TopicConfig(topic, read, write))
        topic_clusters = tuple(sorted({cluster_of[n] for n in group_names}))
        topic_layouts.append(TopicLayout(topic, kind, read, write, group_names, topic_clusters))

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
    return FleetLayout(seed, clusters, tuple(groups), tuple(topic_layouts))


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
    clusters: tuple[str, ...],
    blocks: list[tuple[int, int]],
) -> list[tuple[str, str, int, int, tuple[str, ...]]]:
    """``(topic, kind, read, write, broker names)`` for every topic, in topic order."""
    n_hot = max(1 if n_topics >= 10 else 0, round(n_topics * _HOT_SHARE))
    n_rlw = round(n_topics * _READ_LT_WRITE_SHARE)
    n_single = round(n_topics * _SINGLE_SHARE)
    kinds = ["hot"] * n_hot + ["read_lt_write"] * n_rlw + ["single"] * n_single
    kinds += ["regular"] * (n_topics - len(kinds))
    kinds = kinds[:n_topics]
    rng.shuffle(kinds)  # special topics are spread over the name range, not the first ids

    # Zipf-like group popularity inside each cluster, over a seeded ranking
    popularity = []
    for lo, hi in blocks:
        ranked = list(range(lo, hi))
        rng.shuffle(ranked)
        popularity.append((ranked, [1 / (r + 1) ** _ZIPF_EXPONENT for r in range(len(ranked))]))
    cluster_weights = [hi - lo for lo, hi in blocks]
    width = max(4, len(str(n_topics - 1)))

    placements = []
    for i, kind in enumerate(kinds):
        topic = f"topic-{i:0{width}d}"
        c = rng.choices(range(len(clusters)), cluster_weights)[0]
        ranked, weights = popularity[c]
        if kind == "hot":
            spread = rng.randint(1, len(clusters))
            chosen_clusters = sorted(rng.sample(range(len(clusters)), spread))
            groups = []
            for cc in chosen_clusters:
                lo, hi = blocks[cc]
                share = rng.uniform(0.5, 1.0)
                groups += rng.sample(range(lo, hi), max(1, round((hi - lo) * share)))
            queues = rng.choice((8, 16))
            read = write = queues
        elif kind == "single":
            groups = _weighted_distinct(rng, ranked, weights, 1)
            read = write = rng.choices(*_REGULAR_QUEUES)[0]
        else:
            groups = _weighted_distinct(rng, ranked, weights, rng.randint(2, 4))
            if kind == "read_lt_write":
                write = rng.choice((8, 16))
                read = write // 2
            else:
                read = write = rng.choices(*_REGULAR_QUEUES)[0]
        placements.append((topic, kind, read, write, tuple(names[g] for g in sorted(groups))))
    return placements


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
