"""Who set a QueueData's permission, judged live as the nightly audit judges it
(:mod:`jobs.analytics.distribution.perm_changes`): the broker's registration or an admin request.

An observed server logs no request. A *run* is one (server, topic, broker name)'s QueueData with one
``perm``, from the round that showed it to the round that showed another perm, no QueueData, or the
end of the server's known period. A run that follows another without a gap (a change) is
``registered`` when every other server holding the same (topic, group) near it made the same change
within the tolerance (twice the poll interval plus :data:`~.rules.ROUND_SLACK_MS`), else ``admin``;
a run that follows none (a server's first round, a QueueData back after it was gone) is
``registered`` when every other server holding the cell within a poll interval of its start has
the same perm, else ``unknown``. Either needs the other servers' answers up to the tolerance after
the run began: until then the run is *pending* (``source`` None), and :meth:`PermSources.decide`
settles it once a later round (or midnight) shows that time has passed.

A server's first round shows every QueueData at once (40,000 for 10,000 topics). Until something
asks for them, the runs of a topic that has only such first runs, all writable, are kept as one
 block per server (its QueueData and start) instead of one object each: no finding waits on
a writable first run, and its source matters only to a later change of it (kept as plain
maps, so a snapshot's blocks add nothing the garbage collector has to visit). The
first update of the topic that is not another such block, or a question about one of its runs, makes the topic's runs of
every server (:meth:`PermSources._unblock`) and judges those whose tolerance has passed: a run's
source depends only on the runs that started within its tolerance, so judging it later gives what
judging it when due gave.

A run registered without write perm is the broker's configuration: no ``write_perm_wiped``, and no
``no_writable_queue`` for a topic all of whose QueueData are such (:mod:`~.judge`). A registered
change after a registered run is a ``topic_perm_changed``.

Example:
    >>> sources = PermSources(poll_ms=1_000)
    >>> for ns in ("ns-a", "ns-b"):
    ...     sources.update(ns, "T", {"b": (4, 4, 6, 0, "")}, 0)
    >>> sources.update("ns-a", "T", {"b": (4, 4, 4, 0, "")}, 10_000)
    >>> sources.update("ns-b", "T", {"b": (4, 4, 4, 0, "")}, 11_500)
    >>> [(r.ns, r.prev_perm, r.perm, r.source, r.prev_source) for r in sources.decide(20_000)]
    [('ns-a', 6, 4, 'registered', 'registered'), ('ns-b', 6, 4, 'registered', 'registered')]
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass

from nameserver.collect.live.findings import Detail, FindingKey, LiveFinding
from nameserver.collect.live.rules import DEFAULT_POLL_MS, ROUND_SLACK_MS, SEVERITY
from nameserver.collect.live.servers import Cells
from nameserver.model import PERM_WRITE

REGISTERED, ADMIN, UNKNOWN = "registered", "admin", "unknown"


@dataclass(slots=True)
class Blocks:
    """One server's first runs not yet made into :class:`PermRun`: by topic, its QueueData and the
    run's start. Two maps of plain values, so that a snapshot's blocks add no object the garbage
    collector has to visit (a tuple holding the QueueData would be one per topic)."""

    cells: dict[str, Cells]
    starts: dict[str, int]


# a cell's list of runs is pruned of the long-ended ones once it holds this many (cells change
# rarely: a server's first round adds one run to each of them)
PRUNE_AT = 8


@dataclass(eq=False, slots=True)
class PermRun:
    """One run of a (server, topic, broker name)'s perm.

    Attributes:
        prev_perm: the perm of the run it follows without a gap (None: it follows none).
        prev: that run, until this one is decided (its source says whether a change is the broker's).
        end_ms: when it stopped (None: it goes on).
        source: ``registered``, ``admin`` or ``unknown``; None while pending.
        prev_source: the source of the run it follows, once this one is decided.
        change: for a change, what a ``topic_perm_changed`` would say of it: its own write queues,
            and the topic's other QueueData on that server when it came (their count and writable
            write queues).
    """

    ns: str
    topic: str
    name: str
    perm: int
    start_ms: int
    prev_perm: int | None = None
    prev: PermRun | None = None
    end_ms: int | None = None
    source: str | None = None
    prev_source: str | None = None
    change: tuple[int, int, int] | None = None

    @property
    def writable(self) -> bool:
        return bool(self.perm & PERM_WRITE)


class PermSources:
    """The perm runs of every observed server, and their sources once decided.

    Args:
        poll_ms: the poll interval of a server not in ``polls``.
        alone: one server is observed: no other can confirm or deny a run, so each is decided at
            once (a change ``unknown``, one that follows none ``registered``), as the audit
            decides it with no other server holding the cell.

    Attributes:
        polls: server -> its poll interval (``observe_start``'s ``interval_ms``).
    """

    def __init__(self, poll_ms: int = DEFAULT_POLL_MS, alone: bool = False) -> None:
        self.poll_ms = poll_ms
        self.alone = alone
        self.polls: dict[str, int] = {}
        self._current: dict[tuple[str, str], dict[str, PermRun]] = {}  # (ns, topic) -> name -> run
        self._cells: dict[tuple[str, str], list[PermRun]] = {}  # (topic, name) -> recent runs of every server
        # the runs not yet decided, by when they are due (a round's runs share one due time)
        self._due: list[int] = []  # a heap of the keys of _pending
        self._pending: dict[int, list[PermRun]] = {}  # due -> runs, in the order they came
        # a server's first runs not yet made into PermRuns (module docstring): ns -> topic -> block,
        # and the blocks of servers whose known period ended, with its end
        self._blocks: dict[str, Blocks] = {}
        self._ended: list[tuple[str, int, Blocks]] = []
        self._blocked: set[str] = set()  # the topics with a block in either
        self._made: set[str] = set()  # topics with runs in _cells: blocks no longer start there

    def tolerance(self, run: PermRun) -> int:
        """How far from ``run``'s start the other servers' runs are compared with it."""
        poll = self.polls.get(run.ns, self.poll_ms)
        return 2 * poll + ROUND_SLACK_MS if run.prev_perm is not None else poll

    def run(self, ns: str, topic: str, name: str, now: int) -> PermRun:
        """The current run of a QueueData ``ns`` holds (:meth:`update` made one for every cell)."""
        if topic in self._blocked:
            self._unblock(topic, now)
        return self._current[(ns, topic)][name]

    def update(self, ns: str, topic: str, cells: Cells, now: int) -> None:
        """``ns``'s QueueData of ``topic`` at ``now`` (broker name -> ``(read, write, perm, ...)``)."""
        blocks = self._blocks.get(ns)
        if topic not in self._made and cells and (blocks is None or topic not in blocks.cells):
            for cell in cells.values():
                if not cell[2] & PERM_WRITE:
                    break
            else:  # every QueueData writable
                if blocks is None:
                    blocks = self._blocks[ns] = Blocks({}, {})
                blocks.cells[topic], blocks.starts[topic] = cells, now
                self._blocked.add(topic)
                return
        if topic in self._blocked and (cells or (blocks is not None and topic in blocks.cells)):  # to add or end
            self._unblock(topic, now)
        runs = self._current.get((ns, topic), {})
        kept: dict[str, PermRun] = {}
        for name, run in runs.items():
            value = cells.get(name)
            if value is not None and value[2] == run.perm:
                kept[name] = run
            else:
                run.end_ms = now
        for name, value in cells.items():
            if name in kept:
                continue
            before = runs.get(name)
            run = kept[name] = PermRun(ns, topic, name, value[2], now)
            if before is not None:
                run.prev_perm, run.prev = before.perm, before
                others = [v for n, v in cells.items() if n != name]
                other_queues = sum(max(v[1], 0) for v in others if v[2] & PERM_WRITE)
                run.change = (value[1], len(others), other_queues)
            self._add(run, now)
        if kept:
            self._current[(ns, topic)] = kept
        else:
            self._current.pop((ns, topic), None)

    def first_round(self, ns: str, qd: dict[str, Cells], unwritable: set[str], now: int) -> None:
        """:meth:`update` of every topic of ``qd``, ``ns``'s first round of a known period, its
        blocks made in one pass (``unwritable``: the topics with a QueueData without write perm).

        Only at the start of a known period: before any round of ``ns``, or after :meth:`end` of
        its last one or :meth:`clear` (the judge forgets a server's table with its period), when
        ``ns`` holds no run and no block.
        """
        made = self._made
        blocked = {topic: cells for topic, cells in qd.items() if topic not in unwritable and topic not in made}
        if blocked:
            self._blocks[ns] = Blocks(blocked, dict.fromkeys(blocked, now))
            self._blocked.update(blocked)
        for topic, cells in qd.items():
            if topic not in blocked:
                self.update(ns, topic, cells, now)

    def end(self, ns: str, now: int) -> None:
        """``ns``'s known period ended at ``now``: its runs end there, followed by none."""
        for key in [k for k in self._current if k[0] == ns]:
            for run in self._current.pop(key).values():
                run.end_ms = now
        blocks = self._blocks.pop(ns, None)
        if blocks:
            self._ended.append((ns, now, blocks))

    def pending(self) -> bool:
        return bool(self._due)

    def decide(self, now: int, force: bool = False) -> list[PermRun]:
        """Settle the runs whose tolerance has passed before ``now`` (every pending one when
        ``force``: the day ends, nothing after it counts); returns them, earliest due first."""
        decided = []
        while self._due and (force or self._due[0] < now):
            for run in self._pending.pop(heapq.heappop(self._due)):
                run.source = self._judge(run)
                decided.append(run)
        for run in decided:
            if run.prev is not None:  # decided before it (an earlier start, no longer a tolerance)
                run.prev_source, run.prev = run.prev.source, None  # older runs need not be kept
        return decided

    def clear(self) -> None:
        """Midnight: every run ended and was decided; the new day compares only its own."""
        self._current.clear()
        self._cells.clear()
        self._due.clear()
        self._pending.clear()
        self._blocks.clear()
        self._ended.clear()
        self._blocked.clear()
        self._made.clear()

    def _unblock(self, topic: str, now: int) -> None:
        """Make the runs of ``topic``'s blocks; judge at once those whose tolerance has passed (the
        topic has no other runs: every server's are made together)."""
        self._blocked.discard(topic)
        made = []
        held: list[tuple[str, int | None, Blocks]] = [(ns, None, b) for ns, b in self._blocks.items()]
        for ns, end_ms, blocks in held + self._ended:
            cells = blocks.cells.pop(topic, None)
            if cells is None:
                continue
            start_ms, current = blocks.starts.pop(topic), {}
            for name, value in cells.items():
                run = current[name] = PermRun(ns, topic, name, value[2], start_ms, end_ms=end_ms)
                made.append(run)
                self._place(run, now)
            if end_ms is None:
                self._current[(ns, topic)] = current
        for run in made:
            if self._due_ms(run) < now:
                run.source = self._judge(run)
            else:
                self._queue(run)

    def _add(self, run: PermRun, now: int) -> None:
        self._place(run, now)
        self._queue(run)

    def _due_ms(self, run: PermRun) -> int:
        """When ``run``'s tolerance has passed; alone, at once (decided by the round that saw it)."""
        return run.start_ms - 1 if self.alone else run.start_ms + self.tolerance(run)

    def _place(self, run: PermRun, now: int) -> None:
        """Add ``run`` to its cell's runs."""
        self._made.add(run.topic)
        key = (run.topic, run.name)
        cell = self._cells.get(key)
        if cell is None:
            self._cells[key] = [run]
        else:
            if len(cell) >= PRUNE_AT:
                # a run that ended this long ago is near no run still pending or to come
                longest = max(self.polls.values(), default=self.poll_ms)
                horizon = now - 2 * (2 * longest + ROUND_SLACK_MS) - self.poll_ms
                cell[:] = [r for r in cell if r.end_ms is None or r.end_ms >= horizon or r.source is None]
            cell.append(run)

    def _queue(self, run: PermRun) -> None:
        """Wait for ``run``'s tolerance to pass."""
        due = self._due_ms(run)
        batch = self._pending.get(due)
        if batch is None:
            batch = self._pending[due] = []
            heapq.heappush(self._due, due)
        batch.append(run)

    def _judge(self, run: PermRun) -> str:
        """The nightly ``_judge_by_other_servers`` of one run."""
        tol = self.tolerance(run)
        f = run.start_ms
        others = [o for o in self._cells.get((run.topic, run.name), ()) if o.ns != run.ns and o.start_ms <= f + tol]
        if run.prev_perm is not None:
            near = [o for o in others if o.end_ms is None or o.end_ms > f - tol]
            holders = {o.ns for o in near}
            same = {
                o.ns for o in near if o.prev_perm == run.prev_perm and o.perm == run.perm and abs(o.start_ms - f) <= tol
            }
            if not holders:  # the only server holding the cell: no one to confirm the change
                return UNKNOWN
            return REGISTERED if same == holders else ADMIN
        near = [o for o in others if o.end_ms is None or o.end_ms > f]
        return REGISTERED if all(o.perm == run.perm for o in near) else UNKNOWN


class Verdict:
    """A held finding's state from ``at``: it holds when ``certain``, or when any of ``pending`` (runs
    not yet decided) turns out not registered; ``detail()`` then (read once they are decided)."""

    __slots__ = ("at", "certain", "pending", "detail", "cause")

    def __init__(
        self,
        at: int,
        certain: bool,
        pending: list[PermRun],
        detail: Callable[[], Detail] | None,
        cause: tuple[str, str],
    ) -> None:
        self.at, self.certain, self.pending, self.detail, self.cause = at, certain, pending, detail, cause

    def known(self) -> bool:
        return self.certain or all(r.source is not None for r in self.pending)

    def holds(self) -> bool:
        return self.certain or any(r.source != REGISTERED for r in self.pending)

    def read_detail(self) -> Detail:
        """``detail()``: a verdict that holds has one."""
        assert self.detail is not None, "a holding verdict without a detail"
        return self.detail()


def perm_changed_finding(run: PermRun) -> tuple[FindingKey, LiveFinding]:
    """``topic_perm_changed`` of a registered change of a registered perm, at the round that showed
    it (its key and finding, opened and closed at once); a warning when the topic then had no
    writable queue on that server."""
    assert run.change is not None, "not a change"
    own, others, other_queues = run.change
    writable_queues = (max(own, 0) if run.writable else 0) + other_queues
    key = ("topic_perm_changed", run.ns, run.topic, run.name, run.start_ms)
    detail = {
        "broker_name": run.name,
        "perm_before": run.prev_perm,
        "perm": run.perm,
        "other_groups": others,
        "topic_writable": writable_queues > 0,
        "write_queues": own if writable_queues == 0 else 0,
    }
    severity = "warning" if writable_queues == 0 else SEVERITY["topic_perm_changed"]
    return key, LiveFinding(
        "topic_perm_changed", run.ns, run.topic, run.start_ms, severity, detail, "topic", run.topic, (run.ns,)
    )
