"""What an observed server lacks just after it came back from an outage is that outage's impact,
as the nightly audit's restart grouping has it (docs/audit.md, "Incidents": the ``server``
family): a restarted server is empty until each broker registers again, and may show a group's
QueueData before its master's BrokerData. Its findings of that then join the server's incident,
unless it already lacked the same when it went, for another cause (a partition that goes on).
"""

from __future__ import annotations

from collections.abc import Hashable
from collections.abc import Set as AbstractSet

# the findings of one server a return may bring: a route or broker it alone lacks (a divergence),
# a group's QueueData shown before its master's BrokerData
RESTART_LOSSES = ("ns_divergence", "no_writable_queue", "no_master")


class Returns:
    """When each observed server came back, and what it lacked when it went.

    Args:
        gap_ms: how long after its return a finding may begin to be the return's.
    """

    def __init__(self, gap_ms: int) -> None:
        self.gap_ms = gap_ms
        self._went: dict[str, AbstractSet[Hashable]] = {}  # servers down now -> what they lacked then
        self._back: dict[str, tuple[int, AbstractSet[Hashable]]] = {}

    def went(self, ns: str, lacked: AbstractSet[Hashable]) -> None:
        """``ns`` is down; ``lacked``: the keys of its findings open then, but for its returns'."""
        self._went[ns] = lacked

    def came_back(self, ns: str, now: int) -> None:
        """``ns`` answered again at ``now``."""
        self._back[ns] = (now, self._went.pop(ns, frozenset()))

    def forget_down(self) -> None:
        """Midnight: no finding of the new day goes on from one before."""
        self._went.clear()

    def cause(self, ns: str, key: Hashable, start: int, cause: tuple[str, str]) -> tuple[str, str]:
        """The incident of a finding of ``ns`` alone (``key``) that begins at ``start``: the
        server's when ``ns`` came back at most ``gap_ms`` before and did not lack it when it went;
        otherwise ``cause``."""
        back, lacked = self._back.get(ns, (None, frozenset()))
        if back is not None and back <= start <= back + self.gap_ms and key not in lacked:
            return "server", ns
        return cause
