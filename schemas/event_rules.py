"""Which keys each event type must carry (the "Types" table of docs/event-log.md), format v1.

Re-exported by :mod:`schemas.events`, where every key named here is defined (:data:`EVENT_KEYS`);
the JSON Schema generated there checks that the two agree.
"""

from __future__ import annotations

from dataclasses import dataclass

_REQUEST = ("request_code", "channel", "remote")
_PAYLOAD = ("data_version", "topics_digest", "topics", "filter_servers", "request_version")
# what a rejected event may carry besides its reason: the request's keys, what its header decoded,
# the frame's shape, the limit a connection met, and a log outage's counts
_REJECTED_DECODED = _REQUEST + (
    "detail",
    "access_key",
    "cluster",
    "broker_name",
    "broker_addr",
    "topic",
    "broker_id",
    "request_version",
    "frame_length",
    "serialize_type",
    "header_length",
    "max_connections",
    "write_buffer_bytes",
    "frame_timeout_ms",
    "refused_count",
    "unlogged_count",
    "outage_ms",
    "refreshes",
)


@dataclass(frozen=True)
class TypeRule:
    """Keys one event type must carry.

    Attributes:
        required: present and not null.
        present: present, may be null.
        optional: the other keys nsaudit's own writers may add (``nameserver.events`` builds exactly
            required + present + optional). Readers still accept any key of EVENT_KEYS on any type.
    """

    required: tuple[str, ...] = ()
    present: tuple[str, ...] = ()
    optional: tuple[str, ...] = ()


# From the "Types" table of docs/event-log.md. Keys not named are optional for that type (any key of
# EVENT_KEYS may appear on any type: a rejected request logs whatever was decoded); ``optional``
# names those nsaudit itself writes, and takes no part in the JSON Schema.
TYPE_RULES: dict[str, TypeRule] = {
    "ns_start": TypeRule(("broker_expiry_ms", "scan_interval_ms", "semantics", "version")),
    "ns_stop": TypeRule(present=("reason",), optional=("silent_closes",)),
    "register": TypeRule(
        _REQUEST
        + ("cluster", "broker_name", "broker_id", "broker_addr", "data_version", "topics_digest", "request_version"),
        ("ha_addr", "filter_servers"),
        ("topics",),
    ),
    # 904 carries no broker id and 322 no HA address: only the address is sure
    "heartbeat": TypeRule(_REQUEST + ("broker_addr",), ("cluster", "broker_name", "broker_id", "ha_addr"), _PAYLOAD),
    "unregister": TypeRule(_REQUEST + ("cluster", "broker_name", "broker_id", "broker_addr"), ("ha_addr",)),
    "expire": TypeRule(("broker_addr", "last_update_ts"), optional=("cluster", "broker_name", "broker_id")),
    "channel_close": TypeRule(
        present=("broker_addr",), optional=("channel", "remote", "cluster", "broker_name", "broker_id")
    ),
    "wipe_write_perm": TypeRule(_REQUEST + ("broker_name", "topic_count")),
    "add_write_perm": TypeRule(_REQUEST + ("broker_name", "topic_count")),
    "delete_topic": TypeRule(_REQUEST + ("topic",), ("cluster",)),
    "rejected": TypeRule(("reason",), optional=_REJECTED_DECODED),
    "observe_start": TypeRule(("namesrv_addr", "interval_ms")),
    "observe_stop": TypeRule(present=("reason",)),
    "observe_error": TypeRule(("namesrv_addr", "round", "reason"), ("detail",)),
    "observe_snapshot": TypeRule(("namesrv_addr", "round", "reason", "brokers_observed", "topics_observed")),
    "observed_broker": TypeRule(("round", "broker_name"), ("cluster", "broker_addrs")),
    "observed_route": TypeRule(("round", "topic"), ("queue_datas", "broker_datas", "filter_server_table")),
    "live_incident": TypeRule(
        ("incident_id", "incident_state", "root_cause", "subject", "severity", "servers", "kinds", "incident_ms")
    ),
}
