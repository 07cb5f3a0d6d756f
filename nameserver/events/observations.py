"""What ``nsaudit collect`` writes of an observed server: ``observe_start``, ``observe_stop``,
``observe_error``, ``observe_snapshot``, ``observed_broker``, ``observed_route`` and
``live_incident`` (docs/event-log.md, Observations and Live incidents)."""

from typing import Any, TypedDict

from nameserver.events.context import builder


class ObserveStartEvent(TypedDict):
    """A collector run began observing a server; nothing is known of it yet."""

    ts: int
    type: str
    namesrv_addr: str
    interval_ms: int


class ObserveStopEvent(TypedDict):
    """The collector stopped observing the server cleanly."""

    ts: int
    type: str
    reason: str | None


class ObserveErrorEvent(TypedDict):
    """The server stopped answering: nothing is known of it until the next snapshot."""

    ts: int
    type: str
    namesrv_addr: str
    round: int
    reason: str
    detail: str | None


class ObserveSnapshotEvent(TypedDict):
    """The full observed state follows: this many ``observed_broker`` and ``observed_route`` events."""

    ts: int
    type: str
    namesrv_addr: str
    round: int
    reason: str
    brokers_observed: int
    topics_observed: int


class ObservedBrokerEvent(TypedDict):
    """One broker name of the cluster info; ``cluster`` and ``broker_addrs`` None: it left."""

    ts: int
    type: str
    round: int
    broker_name: str
    cluster: str | None
    broker_addrs: list[dict[str, Any]] | None


class ObservedRouteEvent(TypedDict):
    """One topic's route; all three tables None: TOPIC_NOT_EXIST or no longer listed."""

    ts: int
    type: str
    round: int
    topic: str
    queue_datas: list[dict[str, Any]] | None
    broker_datas: list[dict[str, Any]] | None
    filter_server_table: list[dict[str, Any]] | None


class LiveIncidentEvent(TypedDict):
    """A live incident opened or closed."""

    ts: int
    type: str
    incident_id: str
    incident_state: str
    root_cause: str
    subject: str
    severity: str
    servers: list[str]
    kinds: list[str]
    incident_ms: int


@builder
def observe_start_event(now: int, namesrv_addr: str, interval_ms: int) -> ObserveStartEvent:
    """A collector run begins observing ``namesrv_addr`` every ``interval_ms``."""
    return {"ts": now, "type": "observe_start", "namesrv_addr": namesrv_addr, "interval_ms": interval_ms}


@builder
def observe_stop_event(now: int, reason: str | None) -> ObserveStopEvent:
    """The collector stops observing the server."""
    return {"ts": now, "type": "observe_stop", "reason": reason}


@builder
def observe_error_event(
    now: int, namesrv_addr: str, round_no: int, reason: str, detail: str | None
) -> ObserveErrorEvent:
    """Round ``round_no`` did not get every answer, for ``reason``."""
    return {
        "ts": now,
        "type": "observe_error",
        "namesrv_addr": namesrv_addr,
        "round": round_no,
        "reason": reason,
        "detail": detail,
    }


@builder
def observe_snapshot_event(
    now: int, namesrv_addr: str, round_no: int, reason: str, brokers_observed: int, topics_observed: int
) -> ObserveSnapshotEvent:
    """A full snapshot of round ``round_no`` follows (``reason``: start, day or recovered)."""
    return {
        "ts": now,
        "type": "observe_snapshot",
        "namesrv_addr": namesrv_addr,
        "round": round_no,
        "reason": reason,
        "brokers_observed": brokers_observed,
        "topics_observed": topics_observed,
    }


@builder
def observed_broker_event(
    now: int, round_no: int, broker_name: str, cluster: str | None, broker_addrs: list[dict[str, Any]] | None
) -> ObservedBrokerEvent:
    """One broker name as the cluster info lists it (both None: it left the cluster info)."""
    return {
        "ts": now,
        "type": "observed_broker",
        "round": round_no,
        "broker_name": broker_name,
        "cluster": cluster,
        "broker_addrs": broker_addrs,
    }


@builder
def observed_route_event(
    now: int,
    round_no: int,
    topic: str,
    queue_datas: list[dict[str, Any]] | None,
    broker_datas: list[dict[str, Any]] | None,
    filter_server_table: list[dict[str, Any]] | None,
) -> ObservedRouteEvent:
    """One topic's route as answered (all None: TOPIC_NOT_EXIST, or no longer listed)."""
    return {
        "ts": now,
        "type": "observed_route",
        "round": round_no,
        "topic": topic,
        "queue_datas": queue_datas,
        "broker_datas": broker_datas,
        "filter_server_table": filter_server_table,
    }


@builder
def live_incident_event(
    now: int,
    incident_id: str,
    incident_state: str,
    root_cause: str,
    subject: str,
    severity: str,
    servers: list[str],
    kinds: list[str],
    incident_ms: int,
) -> LiveIncidentEvent:
    """A live incident opened (``incident_state`` open) or closed (close), ``incident_ms`` after it began."""
    return {
        "ts": now,
        "type": "live_incident",
        "incident_id": incident_id,
        "incident_state": incident_state,
        "root_cause": root_cause,
        "subject": subject,
        "severity": severity,
        "servers": servers,
        "kinds": kinds,
        "incident_ms": incident_ms,
    }
