"""The live findings that wait on perm runs: ``no_writable_queue`` and ``write_perm_wiped``.

Whether one holds depends on whether the perms it rests on were registered (:mod:`~.perms`), known
only once every server had a round to show the change. Until then a key's verdicts
(:class:`~.perms.Verdict`) wait here in order, and each is applied to the finding book once known:
the finding opened from the verdict's instant, its detail updated, or ended.
"""

from __future__ import annotations

from nameserver.collect.live.findings import FindingBook, FindingKey, LiveFinding
from nameserver.collect.live.perms import Verdict
from nameserver.collect.live.rules import SEVERITY


class HeldFindings:
    """The verdicts of each ``(kind, ns, subject)`` key not yet applied to ``book``, oldest first."""

    def __init__(self, book: FindingBook) -> None:
        self.book = book
        self._held: dict[FindingKey, list[Verdict]] = {}

    def __contains__(self, key: FindingKey) -> bool:
        return key in self._held

    def verdict(self, key: FindingKey, verdict: Verdict) -> None:
        """A ``no_writable_queue`` or ``write_perm_wiped`` key's state from ``verdict.at``: applied
        now when known and nothing of the key is held, else held behind what is."""
        held = self._held.get(key)
        if held is None and verdict.known():
            self._apply(key, verdict)
        elif held is None:
            self._held[key] = [verdict]
        else:
            held.append(verdict)

    def release(self) -> None:
        """Apply the held verdicts now known, in order (a key stays held behind one still unknown)."""
        for key in list(self._held):
            verdicts = self._held[key]
            while verdicts and verdicts[0].known():
                self._apply(key, verdicts.pop(0))
            if not verdicts:
                del self._held[key]

    def end_server(self, ns: str, now: int) -> None:
        """``ns``'s known period ended at ``now``: each of its held keys stops holding there."""
        for key, verdicts in self._held.items():
            if key[1] == ns:
                verdicts.append(Verdict(now, False, [], None, verdicts[-1].cause))

    def causes(self) -> set[tuple[str, str]]:
        """The causes of every held verdict (an incident one may join stays open until it is known)."""
        return {v.cause for verdicts in self._held.values() for v in verdicts}

    def _apply(self, key: FindingKey, verdict: Verdict) -> None:
        kind, ns, subject = key
        if not verdict.holds():
            self.book.end(key, verdict.at)
            return
        detail = verdict.read_detail()
        current = self.book.open.get(key)
        if current is not None:
            if kind == "no_writable_queue":  # its incident was named by the group it lost first
                detail = {**detail, "culprit": current.detail.get("culprit")}
            current.detail = detail
            return
        self.book.start(key, LiveFinding(kind, ns, subject, verdict.at, SEVERITY[kind], detail, *verdict.cause, (ns,)))
