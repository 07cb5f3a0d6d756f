"""Topic placement: which groups carry each topic, with how many queues."""

from __future__ import annotations

import random

# shares of the topic population (the rest is "regular")
_HOT_SHARE = 0.02
_READ_LT_WRITE_SHARE = 0.02
_SINGLE_SHARE = 0.03
_REGULAR_QUEUES = ((4, 8, 16), (50, 35, 15))
_ZIPF_EXPONENT = 0.8


def place_topics(
    rng: random.Random, n_topics: int, names: list[str], blocks: list[tuple[int, int]], faults: tuple[str, ...]
) -> list[tuple[str, str, int, int, tuple[str, ...]]]:
    """``(topic, kind, read, write, broker names)`` for every topic, in topic order.

    With the ``queue_skew`` layout fault, groups within a cluster are picked by Zipf-like weights
    ``1/(rank+1)**0.8`` over a seeded ranking and clusters at random by their number of groups.
    Without it placement is balanced, as an operator placing each new topic on the emptiest brokers
    would: the cluster with the fewest write queues per group and, there, the groups with the fewest
    (seeded ties).

    With ``queue_skew`` the draws are the ones this layout always made (the default layout
    does not change); without it :class:`_Balancer` picks the clusters and groups.
    """
    kinds = _topic_kinds(rng, n_topics, faults)
    popularity = _rank_groups(rng, blocks)
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
            groups = _hot_groups(rng, blocks, balancer)
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


def _topic_kinds(rng: random.Random, n_topics: int, faults: tuple[str, ...]) -> list[str]:
    """The kind of every topic, in topic order.

    Topics (``topic-0000``, ...) have ``topic_sys_flag`` 0, perm 6, read = write queues unless said
    otherwise:

    - ``hot`` (~2%, at least one once there are 10 topics): on 50-100% of the groups of one to all
      clusters, 8 or 16 queues.
    - ``single`` (~3%): exactly one group (``single_broker_topic``, an info finding).
    - ``regular`` (the rest): 2-4 groups of one cluster, queues 4/8/16 with weights 50/35/15.
    - ``read_lt_write`` (layout fault, ~2%, at least one once there are 10): placed like regular
      ones with fewer read than write queues (4/8 or 8/16).
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
    return kinds


def _rank_groups(rng: random.Random, blocks: list[tuple[int, int]]) -> list[tuple[list[int], list[float]]]:
    """A seeded ranking of the groups inside each cluster, with their Zipf-like weights: the
    popularity when skewed, the tie-break between equally loaded groups when balanced."""
    popularity = []
    for lo, hi in blocks:
        ranked = list(range(lo, hi))
        rng.shuffle(ranked)
        popularity.append((ranked, [1 / (r + 1) ** _ZIPF_EXPONENT for r in range(len(ranked))]))
    return popularity


def _hot_groups(rng: random.Random, blocks: list[tuple[int, int]], balancer: _Balancer | None) -> list[int]:
    """A hot topic's groups: 50-100% of the groups of one to all clusters."""
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
    return groups


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
        return min(
            range(len(self.blocks)), key=lambda c: (self.cluster_load[c] / (self.blocks[c][1] - self.blocks[c][0]), c)
        )

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
