"""Value types of the route tables (docs/nameserver-semantics.md §1), RocketMQ's nouns in snake_case.

Plain frozen data: no clocks, no I/O. ``TopicConfig`` is what a broker sends per topic;
``QueueData`` is what the name server keeps of it per (topic, broker name).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from operator import attrgetter
from typing import Any

import orjson

MASTER_ID = 0

PERM_PRIORITY = 8
PERM_READ = 4
PERM_WRITE = 2
PERM_INHERIT = 1
DEFAULT_PERM = PERM_READ | PERM_WRITE

FLAG_UNIT = 1
FLAG_UNIT_SUB = 2

SINGLE_TAG = "SINGLE_TAG"
MULTI_TAG = "MULTI_TAG"


@dataclass(frozen=True, slots=True)
class DataVersion:
    """A broker's topic-config version; equal iff timestamp and counter are equal (§1.3)."""

    timestamp: int
    counter: int = 0

    def to_json_obj(self) -> dict[str, Any]:
        """The event-log and wire form ``{"timestamp": .., "counter": ..}``."""
        return {"timestamp": self.timestamp, "counter": self.counter}


ZERO_DATA_VERSION = DataVersion(0, 0)


@dataclass(frozen=True, slots=True, init=False)
class TopicConfig:
    """One topic as a broker registers it; defaults are RocketMQ's for absent fields (§1.3)."""

    topic: str
    read_queue_nums: int = 16
    write_queue_nums: int = 16
    perm: int = DEFAULT_PERM
    topic_sys_flag: int = 0
    order: bool = False
    topic_filter_type: str = SINGLE_TAG

    def __init__(
        self,
        topic: str,
        read_queue_nums: int = 16,
        write_queue_nums: int = 16,
        perm: int = DEFAULT_PERM,
        topic_sys_flag: int = 0,
        order: bool = False,
        topic_filter_type: str = SINGLE_TAG,
    ) -> None:
        # The dataclass's own __init__ for a frozen class sets each field through
        # object.__setattr__; the slots' descriptors are cheaper. A decoded REGISTER_BROKER body
        # holds one per topic (2,000 for a large broker).
        _set_topic(self, topic)
        _set_read_queue_nums(self, read_queue_nums)
        _set_write_queue_nums(self, write_queue_nums)
        _set_perm(self, perm)
        _set_topic_sys_flag(self, topic_sys_flag)
        _set_order(self, order)
        _set_topic_filter_type(self, topic_filter_type)

    def to_json_obj(self) -> dict[str, Any]:
        """The event-log topic object (docs/event-log.md, "A topic object")."""
        return {
            "topic": self.topic,
            "read_queue_nums": self.read_queue_nums,
            "write_queue_nums": self.write_queue_nums,
            "perm": self.perm,
            "topic_sys_flag": self.topic_sys_flag,
            "order": self.order,
            "topic_filter_type": self.topic_filter_type,
        }

    @classmethod
    def from_json_obj(cls, obj: Mapping[str, Any]) -> TopicConfig:
        """Inverse of :meth:`to_json_obj`."""
        return cls(
            obj["topic"],
            obj["read_queue_nums"],
            obj["write_queue_nums"],
            obj["perm"],
            obj.get("topic_sys_flag", 0),
            obj.get("order", False),
            obj.get("topic_filter_type", SINGLE_TAG),
        )


(
    _set_topic,
    _set_read_queue_nums,
    _set_write_queue_nums,
    _set_perm,
    _set_topic_sys_flag,
    _set_order,
    _set_topic_filter_type,
) = (TopicConfig.__dict__[f.name].__set__ for f in fields(TopicConfig))


@dataclass(frozen=True, slots=True)
class QueueData:
    """What the name server keeps per (topic, broker name)."""

    broker_name: str
    read_queue_nums: int
    write_queue_nums: int
    perm: int
    topic_sys_flag: int


def topics_to_json_list(topics: Iterable[TopicConfig]) -> list[dict[str, Any]]:
    """The canonical topic list: sorted by topic, event-log objects."""
    return [t.to_json_obj() for t in sorted(topics, key=_TOPIC_NAME)]


_TOPIC_NAME = attrgetter("topic")


def topics_digest(topics: Iterable[TopicConfig]) -> str:
    """Hex SHA-256 of the canonical topic list as compact JSON (docs/event-log.md, payload keys)."""
    return hashlib.sha256(orjson.dumps(topics_to_json_list(topics))).hexdigest()
