"""The events the route tables return (built by :mod:`nameserver.events`, re-exported here for the
route tables' users) and the topic-list helpers they share with the replay."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from nameserver.events import Event, RequestContext, ns_start_event, ns_stop_event, rejected_event
from nameserver.model import TopicConfig

__all__ = [
    "Event",
    "RequestContext",
    "iter_topic_configs",
    "ns_start_event",
    "ns_stop_event",
    "rejected_event",
    "topic_key",
]


def topic_key(topic: TopicConfig) -> str:
    """The sort key of topic configs: the topic name."""
    return topic.topic


def iter_topic_configs(objs: Iterable[Mapping[str, Any] | TopicConfig]) -> tuple[TopicConfig, ...]:
    """Event-log topic objects (or ``TopicConfig`` values, from in-memory events) to a sorted tuple."""
    return tuple(
        sorted((o if isinstance(o, TopicConfig) else TopicConfig.from_json_obj(o) for o in objs), key=topic_key)
    )
