"""Live findings: the nightly audit's findings of observed servers as they open and close.

A :class:`LiveFinding` has the columns of a ``findings`` row that say what and when (``kind``,
``ns``, ``subject``, ``start_ms``, ``end_ms``, ``severity``, ``detail``) plus the cause key its
incident is grouped by. :class:`FindingBook` keeps the open ones by key and records what opened
and closed in the current update, in order.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

FindingKey = tuple[Any, ...]  # (kind, ns, subject) of a finding on one server; a divergence's Key
Detail = dict[str, Any]  # a finding's detail, as the nightly finding's JSON has it
# (stream, event): a live_incident event and the server whose stream logs it (None: the round's)
StreamEvent = tuple[str | None, dict[str, Any]]


@dataclass
class LiveFinding:
    """One finding, open while ``end_ms`` is None.

    Attributes:
        kind: a finding kind of :data:`~.rules.SEVERITY`.
        ns: the observed server (None for an ``ns_divergence``, which is about several).
        subject: what it is about (topic, broker name or address, server id).
        start_ms: when the condition began, as observed (the round's ``ts``).
        severity: ``warning`` or ``critical``.
        detail: what the nightly finding's detail says of it (as far as known live).
        family, cause_key: the incident it belongs to (docs/audit.md, "Incidents").
        servers: the servers it concerns (``ns``; for a divergence, those off the majority).
        end_ms: when it stopped holding.
    """

    kind: str
    ns: str | None
    subject: str
    start_ms: int
    severity: str
    detail: Detail = field(default_factory=dict)
    family: str = ""
    cause_key: str = ""
    servers: tuple[str, ...] = ()
    end_ms: int | None = None


class FindingBook:
    """The open findings by key, and the transitions of the current update.

    Attributes:
        open: key -> the open finding.
        opened, closed: findings opened and closed since :meth:`take`, in order.
        log: every finding opened, when a list is given (a replay keeps them; the collector not).
    """

    def __init__(self) -> None:
        self.open: dict[FindingKey, LiveFinding] = {}
        self.opened: list[LiveFinding] = []
        self.closed: list[LiveFinding] = []
        self.log: list[LiveFinding] | None = None

    def lacking(self, ns: str, kinds: tuple[str, ...]) -> set[FindingKey]:
        """The keys of the open findings of ``kinds`` of server ``ns`` alone (a divergence it alone is
        off the majority of, too), but for those counted as its own return's (family ``server``)."""
        return {k for k, f in self.open.items() if k[0] in kinds and f.servers == (ns,) and f.family != "server"}

    def start(self, key: FindingKey, finding: LiveFinding) -> LiveFinding:
        """Open ``finding`` under ``key`` unless one is open there; returns the open one."""
        current = self.open.get(key)
        if current is None:
            self.open[key] = current = finding
            self.opened.append(finding)
            if self.log is not None:
                self.log.append(finding)
        return current

    def end(self, key: FindingKey, now: int) -> LiveFinding | None:
        """Close the finding open under ``key`` at ``now`` (nothing when none is open)."""
        finding = self.open.pop(key, None)
        if finding is not None:
            finding.end_ms = now
            self.closed.append(finding)
        return finding

    def end_where(self, now: int, test: Callable[[FindingKey], bool]) -> None:
        """Close every open finding whose key passes ``test``."""
        for key in [k for k in self.open if test(k)]:
            self.end(key, now)

    def take(self) -> tuple[list[LiveFinding], list[LiveFinding]]:
        """The findings opened and closed since the last call (then forgotten here)."""
        opened, closed, self.opened, self.closed = self.opened, self.closed, [], []
        return opened, closed
