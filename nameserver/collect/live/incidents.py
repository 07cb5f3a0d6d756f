"""Live incidents: live findings grouped by cause as the nightly incidents stage groups them
(docs/audit.md, "Incidents"), opened and closed as it happens.

Findings of one cause key (a family and a key: a broker name, a topic, a server) belong to one
incident while one is open, or when one starts within :data:`~.rules.INCIDENT_GAP_MS` of the
incident's last end: the incident then opens again under its id and start, as the nightly audit
would have made them one. Its root cause is named from the kinds it holds with the nightly rules
(the observed servers' subset); ``held`` keeps an incident open across midnight until each of
its servers has answered a round of the new day (the nightly audit cuts every finding there,
live alerts must not flap).
"""

from __future__ import annotations

import hashlib
from collections.abc import Collection
from dataclasses import dataclass, field
from typing import Any

from nameserver.collect.live.findings import LiveFinding, StreamEvent
from nameserver.collect.live.rules import INCIDENT_GAP_MS, worst
from nameserver.events import live_incident_event

OPEN, CLOSE = "open", "close"


@dataclass
class LiveIncident:
    """One incident.

    Attributes:
        incident_id: ``live-`` and 12 hex digits of its family, key and first start.
        family, cause_key: what it is grouped by.
        start_ms: the earliest start of its findings; last_end_ms: the latest end so far.
        findings: its open findings (by identity); seen: every finding it held.
        stream: the server whose stream its events go to (its first server when it opened).
        is_open: its open event was written and no close since.
        held: servers that must answer a round of the new day before it may close.
    """

    incident_id: str
    family: str
    cause_key: str
    start_ms: int
    last_end_ms: int
    findings: dict[int, LiveFinding] = field(default_factory=dict)
    seen: list[LiveFinding] = field(default_factory=list)
    stream: str | None = None
    is_open: bool = False
    held: set[str] = field(default_factory=set)
    held_until: int = 0
    fresh: bool = False

    @property
    def kinds(self) -> list[str]:
        return sorted({f.kind for f in self.seen})

    @property
    def servers(self) -> list[str]:
        return sorted({ns for f in self.seen for ns in f.servers})

    @property
    def severity(self) -> str:
        return worst(f.severity for f in self.seen)

    @property
    def subject(self) -> str:
        head, _, tail = self.cause_key.partition(":")
        return tail if self.family == "layout" and tail else self.cause_key

    @property
    def root_cause(self) -> str:
        """The nightly ``_root_cause`` over the kinds an observed server can show."""
        kinds = set(self.kinds)
        divergences = {f.detail.get("kind") for f in self.seen if f.kind == "ns_divergence"}
        if self.family == "broker":
            gone = [f for f in self.seen if f.kind == "observed_broker_gone"]
            if "write_perm_wiped" in kinds:
                return "write_perm_wiped"
            if gone and "broker_missing" in divergences:
                return "broker_cut_off"
            if gone and any(f.detail.get("broker_id") == 0 for f in gone):
                return "master_lost"
            if gone:
                return "broker_dead"
            if kinds & {"no_master", "no_writable_queue"}:
                return "master_lost"
            return "broker_cut_off" if "broker_missing" in divergences else "broker_divergence"
        if self.family == "topic":
            if "route_missing" in divergences:
                return "topic_divergence"
            if "no_writable_queue" in kinds:
                return "no_writable_queue"
            return "topic_perm_changed" if "topic_perm_changed" in kinds else "topic_divergence"
        if self.family == "server":
            emptied = any(f.detail.get("tables_emptied") for f in self.seen if f.kind == "observed_server_down")
            return "server_restart" if emptied else "server_unreachable"
        if self.family == "layout":
            return self.cause_key.split(":", 1)[0]
        return self.family

    def event(self, state: str, now: int) -> dict[str, Any]:
        """The ``live_incident`` event of this transition (docs/event-log.md, Live incidents)."""
        return live_incident_event(
            now,
            self.incident_id,
            state,
            self.root_cause,
            self.subject,
            self.severity,
            self.servers,
            self.kinds,
            max(now - self.start_ms, 0),
        )


def incident_id(family: str, cause_key: str, start_ms: int) -> str:
    """``live-`` and 12 hex digits of the SHA-256 of the family, key and first start."""
    return "live-" + hashlib.sha256(f"{family}|{cause_key}|{start_ms}".encode()).hexdigest()[:12]


class Incidents:
    """The live incidents, by cause key.

    Args:
        gap_ms: findings of one cause further apart than this are separate incidents.
    """

    def __init__(self, gap_ms: int = INCIDENT_GAP_MS) -> None:
        self.gap_ms = gap_ms
        self.by_key: dict[tuple[str, str], LiveIncident] = {}
        self._touched: dict[str, LiveIncident] = {}

    def opened(self, finding: LiveFinding) -> None:
        """A finding opened: into its cause's incident (a new one when none is within the gap)."""
        key = (finding.family, finding.cause_key)
        incident = self.by_key.get(key)
        if incident is None or (
            not incident.findings and not incident.is_open and finding.start_ms > incident.last_end_ms + self.gap_ms
        ):
            incident = LiveIncident(incident_id(*key, finding.start_ms), *key, finding.start_ms, finding.start_ms)
            self.by_key[key] = incident
        incident.findings[id(finding)] = finding
        incident.seen.append(finding)
        incident.fresh = True
        incident.start_ms = min(incident.start_ms, finding.start_ms)
        self._touched[incident.incident_id] = incident

    def closed(self, finding: LiveFinding) -> None:
        """A finding closed."""
        for incident in self.by_key.values():
            if incident.findings.pop(id(finding), None) is not None:
                incident.last_end_ms = max(incident.last_end_ms, finding.end_ms or finding.start_ms)
                self._touched[incident.incident_id] = incident

    def hold(self, servers: set[str], until_ms: int) -> None:
        """Midnight: every open incident stays open until its servers answered again and
        ``until_ms`` (a grace after midnight: a divergence must outlast it anew)."""
        for incident in self.by_key.values():
            if incident.is_open:
                incident.held |= set(incident.servers) & servers
                incident.held_until = max(incident.held_until, until_ms)
                self._touched[incident.incident_id] = incident

    def answered(self, ns: str) -> None:
        """``ns`` answered a round: it no longer holds an incident open."""
        for incident in self.by_key.values():
            if ns in incident.held:
                incident.held.discard(ns)
                self._touched[incident.incident_id] = incident

    def finish(self, now: int, pending: Collection[tuple[str, str]] = frozenset()) -> list[StreamEvent]:
        """The ``(stream, event)`` pairs of the incidents that opened or closed in this update.

        Args:
            pending: cause keys of disagreements not yet past the grace: an open incident of such a
                key stays open (the nightly audit will join the episode to it if it lasts).
        """
        out: list[StreamEvent] = []
        for incident in self.by_key.values():
            if incident.is_open and not incident.findings:  # held ones may close by time
                self._touched.setdefault(incident.incident_id, incident)
        for incident in self._touched.values():
            if (incident.findings or incident.fresh) and not incident.is_open:
                # a finding that opened and closed in this update still opened the incident
                incident.is_open = True
                incident.stream = incident.stream or (incident.servers[0] if incident.servers else None)
                out.append((incident.stream, incident.event(OPEN, now)))
            incident.fresh = False
            if (
                not incident.findings
                and incident.is_open
                and not incident.held
                and now >= incident.held_until
                and (incident.family, incident.cause_key) not in pending
            ):
                incident.is_open = False
                out.append((incident.stream, incident.event(CLOSE, now)))
        self._touched = {}
        # forget the incidents no finding can join any more
        for key in [
            k for k, i in self.by_key.items() if not i.findings and not i.is_open and now > i.last_end_ms + self.gap_ms
        ]:
            del self.by_key[key]
        return out

    def open_incidents(self) -> list[LiveIncident]:
        """The incidents open now, worst first."""
        found = [i for i in self.by_key.values() if i.is_open]
        return sorted(
            found, key=lambda i: (-["info", "warning", "critical"].index(i.severity), i.start_ms, i.incident_id)
        )
