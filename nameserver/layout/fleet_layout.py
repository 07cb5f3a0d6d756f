"""The fleet layout's types: broker members and groups, topic placements, the whole fleet."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from nameserver.model import TopicConfig

BROKER_PORT = 10911
HA_PORT = 10912

TOPIC_KINDS = ("regular", "hot", "read_lt_write", "single")
LAYOUT_FAULTS = ("read_lt_write", "queue_skew")
SCALE_UP = 4  # queue_skew: the busiest group of a cluster carries this many times the queues


@dataclass(frozen=True, slots=True)
class BrokerMember:
    """One broker process: the master (id 0) or a slave of its group."""

    cluster: str
    broker_name: str
    broker_id: int
    addr: str
    ha_addr: str


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
    """The whole fleet; :mod:`nameserver.layout.builder` and :mod:`nameserver.layout.placement`
    describe the distribution.

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
      Zipf weights alone only skew clusters of a dozen groups or more.
      :func:`nameserver.layout.layout_anomalies` names the clusters.

      Without it placement is balanced, as an operator placing each new topic on the emptiest
      brokers would: every topic goes to the cluster with the fewest write queues per group and,
      there, to the groups with the fewest (seeded ties). Each group then stays within one topic's
      queues (16) of every other group of its cluster, so a cluster whose groups average 16 write
      queues or more (about two regular topics per group) is within the default thresholds.

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
