"""Building a fleet layout: groups, clusters, addresses, then the topics placed on them
(:func:`build_layout`; the topics' placement is :mod:`nameserver.layout.placement`).
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Collection

from nameserver.layout.fleet_layout import (
    BROKER_PORT,
    HA_PORT,
    LAYOUT_FAULTS,
    SCALE_UP,
    BrokerGroup,
    BrokerMember,
    FleetLayout,
    TopicLayout,
)
from nameserver.layout.placement import place_topics
from nameserver.model import TopicConfig, topics_digest

_MAX_CLUSTERS = 6
MAX_SLAVES = 253  # last octet m + 1 stays <= 254
# Ten times the reference fleet (1000 brokers, 2000 topics). 10,000 groups put at most ~4,100 in
# the largest cluster, within the 31 * 256 its addresses hold.
MAX_BROKERS = 10_000
MAX_TOPICS = 100_000


def build_layout(
    brokers: int, slaves: int, topics: int, seed: int, faults: Collection[str] = LAYOUT_FAULTS
) -> FleetLayout:
    """Build the fleet for ``brokers`` processes in groups of 1 master + ``slaves`` slaves.

    * **Processes and groups.** ``brokers`` counts broker processes. They fill broker groups of one
      master (id 0) and ``slaves`` slaves (ids 1..K) in order, so the last group may be short of
      slaves when ``brokers`` is not a multiple of ``slaves + 1``. Groups are named ``broker-000``,
      ``broker-001``, ... (wider when there are more than 1000 groups).
    * **Clusters.** A few, growing with the fleet: 1 below 4 groups, 2 from 4, 3 from 16, 4 from 128,
      one more per factor of 8 after that, at most 6 (500 groups -> 4 clusters). Groups are dealt to
      clusters in contiguous blocks whose sizes are skewed (weights 1, 1/2, 1/3, ...; every cluster
      gets at least one group), so one cluster is the big shared one. Names ``cluster-0``, ...
    * **Addresses.** Member ``m`` of the ``g``-th group of cluster ``c`` listens on
      ``10.<c + 8*(g // 256)>.<g % 256>.<m + 1>:10911`` with its HA port on 10912: readable, unique,
      and a valid IPv4 address for up to 31 * 256 groups per cluster and 253 slaves.

    Args:
        brokers: broker processes (0..MAX_BROKERS).
        slaves: slaves per group, K (0..MAX_SLAVES).
        topics: topics to place (0..MAX_TOPICS); none are placed when there are no groups.
        seed: the same seed and faults give the same layout.
        faults: fault names; the :data:`LAYOUT_FAULTS` among them shape the layout, others are
            ignored (callers pass their whole fault list). Default: every layout fault.

    Raises:
        ValueError: a negative count, or too many brokers, slaves or topics.

    Example:
        >>> layout = build_layout(brokers=1000, slaves=1, topics=2000, seed=1)
        >>> len(layout.groups), len(layout.clusters), layout.groups[0].master.addr
        (500, 4, '10.0.0.1:10911')
        >>> balanced = build_layout(brokers=1000, slaves=1, topics=2000, seed=1, faults=())
        >>> layout_anomalies(balanced)
        ()
    """
    if brokers < 0 or slaves < 0 or topics < 0:
        raise ValueError(f"counts must be >= 0 (brokers={brokers}, slaves={slaves}, topics={topics})")
    if slaves > MAX_SLAVES:
        raise ValueError(f"at most {MAX_SLAVES} slaves per group, not {slaves}")
    if brokers > MAX_BROKERS or topics > MAX_TOPICS:
        raise ValueError(f"at most {MAX_BROKERS} brokers and {MAX_TOPICS} topics, not {brokers} and {topics}")
    layout_faults = tuple(f for f in LAYOUT_FAULTS if f in faults)
    rng = random.Random(seed)
    group_size = slaves + 1
    n_groups = -(-brokers // group_size)
    clusters = tuple(f"cluster-{i}" for i in range(_cluster_count(n_groups))) if n_groups else ()
    blocks = _cluster_blocks(n_groups, len(clusters))
    width = max(3, len(str(n_groups - 1)))
    names = [f"broker-{g:0{width}d}" for g in range(n_groups)]
    cluster_of = {names[g]: clusters[c] for c, (lo, hi) in enumerate(blocks) for g in range(lo, hi)}

    placements = place_topics(rng, topics, names, blocks, layout_faults) if n_groups else []
    per_group, topic_layouts = _assign_topics(placements, names, cluster_of)
    scaled_up = _scale_up_busiest(per_group, names, blocks) if "queue_skew" in layout_faults else ()
    groups = _groups(brokers, group_size, clusters, blocks, names, per_group)
    return FleetLayout(seed, clusters, groups, topic_layouts, layout_faults, scaled_up)


def _assign_topics(
    placements: list[tuple[str, str, int, int, tuple[str, ...]]], names: list[str], cluster_of: dict[str, str]
) -> tuple[dict[str, list[TopicConfig]], tuple[TopicLayout, ...]]:
    """Each group's topic configs (in placement order) and each topic's layout."""
    per_group: dict[str, list[TopicConfig]] = {name: [] for name in names}
    topic_layouts = []
    for topic, kind, read, write, group_names in placements:
        for name in group_names:
            per_group[name].append(TopicConfig(topic, read, write))
        topic_clusters = tuple(sorted({cluster_of[n] for n in group_names}))
        topic_layouts.append(TopicLayout(topic, kind, read, write, group_names, topic_clusters))
    return per_group, tuple(topic_layouts)


def _groups(
    brokers: int,
    group_size: int,
    clusters: tuple[str, ...],
    blocks: list[tuple[int, int]],
    names: list[str],
    per_group: dict[str, list[TopicConfig]],
) -> tuple[BrokerGroup, ...]:
    """The groups, cluster by cluster, with their members' addresses (see :func:`build_layout`)."""
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
    return tuple(groups)


def _scale_up_busiest(
    per_group: dict[str, list[TopicConfig]], names: list[str], blocks: list[tuple[int, int]]
) -> tuple[str, ...]:
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
            dataclasses.replace(
                t, read_queue_nums=t.read_queue_nums * SCALE_UP, write_queue_nums=t.write_queue_nums * SCALE_UP
            )
            for t in per_group[busiest]
        ]
        scaled.append(busiest)
    return tuple(scaled)


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
