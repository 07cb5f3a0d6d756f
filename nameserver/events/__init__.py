"""One builder per event type of the v1 event log (docs/event-log.md), and the ``TypedDict`` each returns.

Every event the name server, the simulator and the collector write is made here, without ``v``,
``ns`` and ``seq`` (the writer stamps them). A builder writes its keys in one fixed order, which is
the order of the log's lines, and exactly the keys ``schemas/events.py`` allows for its type
(``TYPE_RULES``: required, present and optional); a test holds the two together.

The builders live in three parts: :mod:`.brokers` (what brokers' requests and the expiry scan
do), :mod:`.server` (a server's start, stop, refusals and admin requests) and :mod:`.observations`
(what ``nsaudit collect`` writes). Event values are plain JSON types or frozen dataclasses
(``DataVersion``, ``TopicConfig``), which the writer serializes in field order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from nameserver.events.brokers import (
    ChannelCloseEvent,
    ExpireEvent,
    HeartbeatEvent,
    RegisterEvent,
    UnregisterEvent,
    channel_close_event,
    expire_event,
    heartbeat_event,
    register_event,
    unregister_event,
)
from nameserver.events.context import Event, RequestContext
from nameserver.events.observations import (
    LiveIncidentEvent,
    ObservedBrokerEvent,
    ObservedRouteEvent,
    ObserveErrorEvent,
    ObserveSnapshotEvent,
    ObserveStartEvent,
    ObserveStopEvent,
    live_incident_event,
    observe_error_event,
    observe_snapshot_event,
    observe_start_event,
    observe_stop_event,
    observed_broker_event,
    observed_route_event,
)
from nameserver.events.server import (
    AddWritePermEvent,
    DeleteTopicEvent,
    NsStartEvent,
    NsStopEvent,
    RejectedEvent,
    WipeWritePermEvent,
    add_write_perm_event,
    delete_topic_event,
    ns_start_event,
    ns_stop_event,
    rejected_event,
    wipe_write_perm_event,
)

# event type -> (the TypedDict its builder returns, the builder), in schemas.event_types order
BUILDERS: dict[str, tuple[type, Callable[..., Any]]] = {
    "ns_start": (NsStartEvent, ns_start_event),
    "ns_stop": (NsStopEvent, ns_stop_event),
    "register": (RegisterEvent, register_event),
    "heartbeat": (HeartbeatEvent, heartbeat_event),
    "unregister": (UnregisterEvent, unregister_event),
    "expire": (ExpireEvent, expire_event),
    "channel_close": (ChannelCloseEvent, channel_close_event),
    "wipe_write_perm": (WipeWritePermEvent, wipe_write_perm_event),
    "add_write_perm": (AddWritePermEvent, add_write_perm_event),
    "delete_topic": (DeleteTopicEvent, delete_topic_event),
    "rejected": (RejectedEvent, rejected_event),
    "observe_start": (ObserveStartEvent, observe_start_event),
    "observe_stop": (ObserveStopEvent, observe_stop_event),
    "observe_error": (ObserveErrorEvent, observe_error_event),
    "observe_snapshot": (ObserveSnapshotEvent, observe_snapshot_event),
    "observed_broker": (ObservedBrokerEvent, observed_broker_event),
    "observed_route": (ObservedRouteEvent, observed_route_event),
    "live_incident": (LiveIncidentEvent, live_incident_event),
}

__all__ = [
    "AddWritePermEvent",
    "BUILDERS",
    "ChannelCloseEvent",
    "DeleteTopicEvent",
    "Event",
    "ExpireEvent",
    "HeartbeatEvent",
    "LiveIncidentEvent",
    "NsStartEvent",
    "NsStopEvent",
    "ObserveErrorEvent",
    "ObserveSnapshotEvent",
    "ObserveStartEvent",
    "ObserveStopEvent",
    "ObservedBrokerEvent",
    "ObservedRouteEvent",
    "RegisterEvent",
    "RejectedEvent",
    "RequestContext",
    "UnregisterEvent",
    "WipeWritePermEvent",
    "add_write_perm_event",
    "channel_close_event",
    "delete_topic_event",
    "expire_event",
    "heartbeat_event",
    "live_incident_event",
    "ns_start_event",
    "ns_stop_event",
    "observe_error_event",
    "observe_snapshot_event",
    "observe_start_event",
    "observe_stop_event",
    "observed_broker_event",
    "observed_route_event",
    "register_event",
    "rejected_event",
    "unregister_event",
    "wipe_write_perm_event",
]
