"""The controller's event log: the writer, the answers that wait for it, and full-disk outages.

A name server is AP: when the log cannot be written for lack of space (``ENOSPC``, ``EDQUOT``),
the server does not stop. The log becomes *unavailable*: route lookups go on being answered,
requests that would change the route tables are refused and leave no change
(docs/nameserver-semantics.md §2.13), and the server retries. A request whose own event could not
be written is undone by the controller; the remaining events of a change without a requester (an
expiry scan, a closed connection) that was already applied and partly logged are kept and written
first when the log resumes, so the log still holds every table change in order (A7). Then one
``rejected`` event with reason ``log_unavailable`` records the gap, and with it the liveness of the
brokers whose refreshes were refused meanwhile, so that the outage itself expires none of them.
Any other write failure stays fatal.
"""

from __future__ import annotations

import dataclasses
import errno
import logging
import os
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from common.config import EventLogConfig
from nameserver.eventlog.recovery import drop_cut_tail
from nameserver.eventlog.writer import AsyncGroupCommit, EventLogError, EventLogWriter
from nameserver.routes.manager import Event, rejected_event
from nameserver.server.durable import DurableAnswers

log = logging.getLogger(__name__)

SPACE_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT})
# A retry waits until the filesystem has at least this much free: a write that would fail at
# once is not worth the leftover segment it makes.
RESUME_FREE_BYTES = 256 * 1024


def is_space_error(exc: BaseException | None) -> bool:
    """``exc`` or an exception it was raised from is a lack of space."""
    seen = 0
    while exc is not None and seen < 8:
        if isinstance(exc, OSError) and exc.errno in SPACE_ERRNOS:
            return True
        exc, seen = exc.__cause__ or exc.__context__, seen + 1
    return False


class LivenessLedger(Protocol):
    """The liveness refreshes an outage credits (``RouteInfoManager``)."""

    def refresh_credits(self, refused: Mapping[str, int]) -> list[Event]: ...

    def apply_refreshes(self, refreshes: Iterable[Mapping[str, Any]]) -> None: ...


@dataclass
class Outage:
    """An unavailable log.

    Attributes:
        since_ts: the clock reading when the write failed (epoch ms).
        detail: the OS error.
        pending: events of changes without a requester (scan, connection close) already applied
            and partly logged, written first on resume, in order.
        refused: requests refused (or oneway requests dropped) because they would change the tables.
        unlogged: events that change no table (``rejected`` refusals) not written.
        cut_path: the segment whose last line the failed write may have cut short.
        refreshes: broker address -> the last refused request that would have refreshed its live
            entry (epoch ms); credited when the log resumes.
    """

    since_ts: int
    detail: str
    pending: list[Event] = field(default_factory=list)
    refused: int = 0
    unlogged: int = 0
    cut_path: Path | None = None
    refreshes: dict[str, int] = field(default_factory=dict)


def log_unavailable_event(now: int, outage: Outage, refreshes: Sequence[Event] = ()) -> Event:
    """The event that records an outage once the log resumes (docs/event-log.md); ``refreshes``
    (:meth:`LivenessLedger.refresh_credits`) only when there are any."""
    return rejected_event(
        now,
        "log_unavailable",
        detail=outage.detail,
        refused_count=outage.refused,
        unlogged_count=outage.unlogged,
        outage_ms=now - outage.since_ts,
        refreshes=refreshes,
    )


class Journal:
    """The event log as the controller uses it.

    Args:
        events_dir: root of the event log.
        ns_id: the server id.
        config: segments and durability.
        clock: the controller's epoch-ms clock.
        on_fatal: called with a write failure that is not a lack of space (the server stops).
        liveness: the tables whose refused refreshes an outage credits; None credits nothing.
    """

    def __init__(
        self,
        events_dir: Path,
        ns_id: str,
        config: EventLogConfig,
        clock: Callable[[], int],
        on_fatal: Callable[[BaseException], None],
        liveness: LivenessLedger | None = None,
    ) -> None:
        self._liveness = liveness
        self._events_dir = events_dir
        self._ns_id = ns_id
        self._config = config
        self._clock = clock
        self._on_fatal = on_fatal
        self.writer: EventLogWriter | None = None
        self.answers: DurableAnswers | None = None
        self.outage: Outage | None = None
        # for the metrics: rejected events by reason, outages begun, route changes refused in past outages
        self.rejected: Counter[tuple[Any, ...]] = Counter()
        self.outages = 0
        self.refused_before = 0

    def open(self) -> None:
        """Open the writer (recovering the folder) and its answer queue."""
        self.writer, self.answers = self._open_writer()

    def _open_writer(self) -> tuple[EventLogWriter, DurableAnswers]:
        config, window = self._config, self._config.group_commit_ms
        if config.durability == "fsync":
            # Per-answer fsync, but off the loop: an immediate (0 ms window) commit per request
            # burst instead of a blocking fsync inside append.
            config, window = dataclasses.replace(config, durability="group"), 0
        writer = EventLogWriter(self._events_dir, self._ns_id, config, reserve_seqs=True).open()
        commit = AsyncGroupCommit(writer, window) if config.durability != "none" else None
        return writer, DurableAnswers(writer, commit, self._commit_failed)

    @property
    def available(self) -> bool:
        """The log can be written (no outage)."""
        return self.outage is None

    def append_all(self, events: Sequence[Event]) -> bool:
        """Append the events of one change back to back; answers computed later wait for them.

        Returns:
            True when all were written; False when the log is or just became unavailable (the
            events not written are kept and written first on resume).

        Raises:
            EventLogError: the log failed for another reason (``on_fatal`` was called).
        """
        for event in events:
            if event["type"] == "rejected":
                self.rejected[event["reason"]] += 1
        writer, answers = self.writer, self.answers
        assert writer is not None and answers is not None, "append before open()"
        for i, event in enumerate(events):
            outage = self.outage
            if outage is None:
                try:
                    writer.append(event)
                    answers.note_change()
                    continue
                except EventLogError as exc:
                    if not is_space_error(exc):
                        self._on_fatal(exc)
                        raise
                    outage = self._begin_outage(exc)
            outage.pending.extend(events[i:])
            return False
        return True

    def append_request(self, events: Sequence[Event]) -> bool:
        """Append the events of one request's change.

        Returns:
            False when the log was or became unavailable before the first event was written:
            nothing of it is kept, and the caller undoes the change and refuses the request.
            True once the first is written: the change stands, and any later event that meets a
            full disk is kept and written first on resume.

        Raises:
            EventLogError: the log failed for another reason (``on_fatal`` was called).
        """
        if not events:
            return True
        if self.outage is not None:
            return False
        writer, answers = self.writer, self.answers
        assert writer is not None and answers is not None, "append before open()"
        try:
            writer.append(events[0])
        except EventLogError as exc:
            if not is_space_error(exc):
                self._on_fatal(exc)
                raise
            self._begin_outage(exc)
            return False
        answers.note_change()
        self.append_all(events[1:])
        return True

    def note_refused_refresh(self, broker_addr: str, now: int) -> None:
        """A refused request would have refreshed ``broker_addr``'s live entry at ``now``."""
        if self.outage is not None:
            self.outage.refreshes[broker_addr] = now

    def append_quietly(self, event: Event) -> None:
        """Append an event that changes no table (no answer waits for it); during an outage it is
        only counted.

        Raises:
            EventLogError: the log failed for another reason (``on_fatal`` was called).
        """
        if event["type"] == "rejected":
            self.rejected[event["reason"]] += 1
        if self.outage is not None:
            self.outage.unlogged += 1
            return
        assert self.writer is not None, "append before open()"
        try:
            self.writer.append(event)
        except EventLogError as exc:
            if not is_space_error(exc):
                self._on_fatal(exc)
                raise
            self._begin_outage(exc).unlogged += 1

    def _commit_failed(self, exc: BaseException) -> None:
        if self.outage is not None:
            return  # the failed writer's last commit, after the append that began the outage
        if not is_space_error(exc):
            self._on_fatal(exc)
            return
        self._begin_outage(exc)

    def _begin_outage(self, exc: BaseException) -> Outage:
        writer, answers = self.writer, self.answers
        assert writer is not None and answers is not None, "an outage before open()"
        cause = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
        outage = self.outage = Outage(self._clock(), str(cause), cut_path=writer.segment_path)
        self.outages += 1
        try:  # release the file; what it holds stays
            writer.close("log unavailable")
        except EventLogError:
            pass
        answers.release()
        log.error(
            "name server %s: event log unavailable (%s); answering lookups, refusing route changes "
            "until it can be written again",
            self._ns_id,
            cause,
        )
        return outage

    def try_resume(self) -> bool:
        """Write the pending events and the outage's ``rejected`` event in a fresh writer.

        Returns:
            True when the log is available again (also when it never stopped).
        """
        outage = self.outage
        if outage is None:
            return True
        try:
            stat = os.statvfs(self._events_dir)
            if stat.f_bavail * stat.f_frsize < RESUME_FREE_BYTES:
                return False
            if outage.cut_path is not None and outage.cut_path.exists():
                drop_cut_tail(outage.cut_path)
            writer, answers = self._open_writer()
        except OSError:
            return False
        try:
            while outage.pending:
                writer.append(outage.pending[0])
                del outage.pending[0]
            refreshes = self._liveness.refresh_credits(outage.refreshes) if self._liveness is not None else []
            writer.append(log_unavailable_event(self._clock(), outage, refreshes))
        except EventLogError:
            outage.cut_path = writer.segment_path
            try:
                writer.close("log still unavailable")
            except EventLogError:
                pass
            return False
        if refreshes and self._liveness is not None:  # applied with their event, in one critical section (A7)
            self._liveness.apply_refreshes(refreshes)
        self.writer, self.answers, self.outage = writer, answers, None
        self.refused_before += outage.refused
        log.warning("name server %s: event log writable again; route changes accepted", self._ns_id)
        return True
