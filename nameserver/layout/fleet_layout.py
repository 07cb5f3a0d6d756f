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
    """The whole fleet; :mod:`nameserver.layout` describes the distribution.

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
