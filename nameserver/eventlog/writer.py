"""The name server's append-only event log, format v1 (docs/event-log.md): the writer.

The route table returns event dicts without ``v``, ``ns`` and ``seq``; :class:`EventLogWriter`
stamps them, applies the per-segment ``topics`` rule and writes one compact JSON line per event
into segments bounded by the UTC day and a size limit (docs/event-log.md, Files). The log's
modules are re-exported here (import from this one): the writer; the line format
(:mod:`~nameserver.eventlog.line_format`); segment names, listing and the readers
(:mod:`~nameserver.eventlog.segments`); crash recovery and compression
(:mod:`~nameserver.eventlog.recovery`); group commit (:mod:`~nameserver.eventlog.group_commit`).
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any

import orjson

from common.config import EventLogConfig
from nameserver.eventlog.group_commit import AsyncGroupCommit
from nameserver.eventlog.line_format import DAY_MS, FORMAT_VERSION, OPT_LINE, close_quietly, day_date, json_default
from nameserver.eventlog.recovery import (
    GZIP_LEVEL,
    find_last_seq,
    fsync_dir,
    gzip_segment,
    log_gzip_failures,
    recover_folder,
)
from nameserver.eventlog.reservation import SeqReservation, read_reservation
from nameserver.eventlog.segments import (
    EventLogError,
    LineProblem,
    Segment,
    SegmentLine,
    iter_segment_lines,
    list_segments,
    read_events,
    segment_name,
)

__all__ = [
    "AsyncGroupCommit",
    "DAY_MS",
    "EventLogError",
    "EventLogWriter",
    "FORMAT_VERSION",
    "GZIP_LEVEL",
    "LineProblem",
    "Segment",
    "SegmentLine",
    "WRITE_BUFFER_BYTES",
    "iter_segment_lines",
    "list_segments",
    "read_events",
    "segment_name",
]

# Buffer of the segment file: with durability "none" lines reach the OS in chunks this big.
WRITE_BUFFER_BYTES = 1 << 20

_DUMPS = orjson.dumps

log = logging.getLogger(__name__)


# ------------------------------------------------------------------------------------------ writer


class EventLogWriter:
    """Writes one name server's events (docs/event-log.md, v1).

    Every event of a segment has the segment's UTC date, so one day's events are exactly the files
    under that day's folder; gzip-compressed closed segments end in ``.jsonl.gz``.

    Durability (``EventLogConfig.durability``), stated as what :attr:`durable_seq` promises: every
    event with ``seq <= durable_seq`` survives a crash of the machine (its bytes, its segment's
    directory entry and any new date folder were fsynced), except with ``"none"``.

    * ``"fsync"``: ``append`` fsyncs before it returns, so ``durable_seq`` is the event's seq.
    * ``"group"``: ``append`` hands the line to the OS before it returns (it survives a crash of
      the process, not of the machine); ``durable_seq`` advances when :meth:`sync` or a segment
      close fsyncs. :class:`AsyncGroupCommit` batches the waiters of one window into one ``sync``
      on an executor thread.
    * ``"none"`` (the simulator): nothing is ever fsynced and lines are buffered in the process;
      ``sync`` and segment closes hand them to the OS and advance ``durable_seq``, which then
      means "survives a crash of the process" only. With ``reserve_seqs`` the seqs are reserved
      ahead in a small fsynced file (:mod:`~nameserver.eventlog.reservation`), so a run after a
      crash continues past every seq handed out and the loss shows as a seq gap.

    Closing a segment (day boundary, size limit, :meth:`close`) flushes, fsyncs, renames ``.open``
    away atomically and fsyncs the folder, in the appending thread; it happens once per segment.
    Optional gzip runs on a background thread and replaces the plain file only after the ``.gz``
    is durable. One writer per ``<events_dir>/<ns>`` at a time; the writer takes no lock file.

    Thread safety: ``append`` is meant for one thread (the event loop or the simulator);
    ``sync`` and ``durable_seq`` may be used from any thread, concurrently with ``append``.

    Args:
        events_dir: the root of the log (``--events``).
        ns_id: this name server's id, the folder under ``events_dir``.
        config: segment size, durability, gzip.
        reserve_seqs: with durability ``none``, reserve seqs ahead (see above).

    Example:
        >>> writer = EventLogWriter(events_dir, "ns-a", EventLogConfig(durability="none")).open()
        >>> writer.append({"ts": 1795219200000, "type": "ns_stop", "reason": "SIGTERM"})
        1
        >>> writer.close()
    """

    def __init__(
        self,
        events_dir: str | os.PathLike[str],
        ns_id: str,
        config: EventLogConfig | None = None,
        reserve_seqs: bool = False,
    ) -> None:
        if not ns_id or "/" in ns_id or ns_id.startswith("."):
            raise ValueError(f"ns id {ns_id!r} cannot be a folder name")
        self.config = config or EventLogConfig()
        self._ns = ns_id
        self._ns_dir = Path(events_dir) / ns_id
        self._fsync = self.config.durability != "none"
        self._fsync_each = self.config.durability == "fsync"
        self._flush_each = self._fsync
        self._max_bytes = self.config.segment_max_bytes
        self._reservation = SeqReservation(self._ns_dir, reserve_seqs and not self._fsync)
        self._lock = threading.Lock()
        self._state = "new"  # new -> open -> closed
        self._failed: BaseException | None = None
        self._seq = 0
        self._durable_seq = 0
        self._file: Any = None
        self._seg_path: Path | None = None
        self._seg_day: int | None = None  # None forces a roll (no open segment)
        self._seg_bytes = 0
        self._seg_digests: dict[Any, str | None] = {}
        self._pending_dirs: list[Path] = []  # directory entries to fsync before durable_seq moves
        self._gzip_pool: ThreadPoolExecutor | None = None
        self._gzip_jobs: list[Future[Any]] = []

    # -------------------------------------------------------------------------------- properties

    @property
    def ns(self) -> str:
        """The name-server id stamped on every event."""
        return self._ns

    @property
    def last_seq(self) -> int:
        """The seq of the last appended event (after ``open``: the last one found on disk)."""
        return self._seq

    @property
    def durable_seq(self) -> int:
        """Every event with ``seq <= durable_seq`` is durable (see the class docstring)."""
        return self._durable_seq

    @property
    def segment_path(self) -> Path | None:
        """The ``.open`` segment being written, or None between segments."""
        return self._seg_path

    # -------------------------------------------------------------------------------- lifecycle

    def open(self) -> EventLogWriter:
        """Recover the folder and find the last seq; the first ``append`` opens a new segment.

        A leftover ``.open`` segment (a crash) keeps its bytes, a cut-short last line included,
        and is renamed to its closed name; an empty one is removed. A compression cut short is
        finished. Nothing existing is rewritten or truncated.

        Returns:
            self, so ``EventLogWriter(...).open()`` reads well.
        """
        if self._state != "new":
            raise EventLogError(f"event log {self._ns_dir} already opened")
        created = not self._ns_dir.is_dir()
        self._ns_dir.mkdir(parents=True, exist_ok=True)
        if created and self._fsync:
            fsync_dir(self._ns_dir.parent)
        recover_folder(self._ns_dir, self._fsync)
        # an earlier run that was not fsynced may have handed out seqs its crash lost
        self._seq = self._durable_seq = max(
            find_last_seq(self._ns_dir.parent, self._ns), read_reservation(self._ns_dir)
        )
        if self.config.gzip_closed:
            self._gzip_pool = ThreadPoolExecutor(1, thread_name_prefix=f"eventlog-gzip-{self._ns}")
            # Closed segments left plain (a crash between close and compression) catch up now.
            for seg in list_segments(self._ns_dir.parent, self._ns):
                if seg.state == "closed":
                    self._gzip_jobs.append(self._gzip_pool.submit(gzip_segment, seg.path, self._fsync))
        self._state = "open"
        log.debug("event log %s opened, continuing after seq %d", self._ns_dir, self._seq)
        return self

    def close(self, reason: str | None = None) -> None:
        """Flush, fsync and close the open segment, then wait for pending compressions.

        The caller appends ``ns_stop`` first. Closing twice is harmless.

        Args:
            reason: why the log closes; only logged (the ``ns_stop`` event carries it in the log).
        """
        with self._lock:
            if self._state == "closed":
                return
            self._state = "closed"
            try:
                if self._file is not None and self._failed is None:
                    self._close_segment()
                if self._failed is None:
                    self._reservation.release(self._seq)
            except OSError as exc:
                raise self._fail(exc) from exc
            finally:
                if self._file is not None:  # failed writer: release the handle, keep the bytes
                    close_quietly(self._file)
                    self._file = None
                if self._gzip_pool is not None:
                    self._gzip_pool.shutdown(wait=True)
                    log_gzip_failures(self._gzip_jobs)
                    self._gzip_jobs = []
        log.info("event log %s closed at seq %d (%s)", self._ns_dir, self._seq, reason or "no reason given")

    def __enter__(self) -> EventLogWriter:
        return self.open() if self._state == "new" else self

    def __exit__(self, *exc_info: object) -> None:
        self.close("context exit")

    # ----------------------------------------------------------------------------------- append

    def append(self, event: Mapping[str, Any]) -> int:
        """Stamp ``v``, ``ns`` and the next ``seq`` on an event and write it as one line.

        Keys come out as ``v, ns, seq, ts, type``, then the event's own keys in its order. Values
        may be JSON types, tuples, objects with ``to_json_obj()`` (``DataVersion``,
        ``TopicConfig``) or other dataclasses (their fields, in order).

        Args:
            event: a route-table event with ``ts`` (int epoch ms) and ``type``, without
                ``v``, ``ns`` and ``seq``. It is not modified.

        Returns:
            The event's seq. With durability ``fsync`` it is durable on return; otherwise
            compare with :attr:`durable_seq` or await :meth:`AsyncGroupCommit.wait_durable`.

        Raises:
            ValueError: no int ``ts``, no ``type``, a reserved key, or a value JSON cannot hold;
                nothing is written and no seq is used.
            EventLogError: the writer is not open or an earlier write or fsync failed.
        """
        ts = event.get("ts")
        if type(ts) is not int or "type" not in event:
            raise ValueError(f"an event needs an int 'ts' and a 'type': {dict(event)!r}")
        with self._lock:
            seq = self._seq + 1
            line = {"v": FORMAT_VERSION, "ns": self._ns, "seq": seq, "ts": ts, "type": event["type"], **event}
            if len(line) != len(event) + 3:
                raise ValueError(f"the writer stamps v, ns and seq; the event must not carry them: {dict(event)!r}")
            day = ts // DAY_MS
            if day != self._seg_day:
                self._roll(day, seq)
            digest = line.get("topics_digest")
            if digest is not None:
                self._apply_topics_rule(line, digest)
            try:
                data = _DUMPS(line, json_default, OPT_LINE)
            except orjson.JSONEncodeError as exc:
                raise ValueError(f"event {event.get('type')!r} cannot be written as JSON: {exc}") from None
            try:
                self._reservation.cover(seq)
                self._file.write(data)
                if self._flush_each:
                    self._file.flush()  # group: the line reaches the OS before append returns
                    if self._fsync_each:
                        os.fsync(self._file.fileno())
                        self._durable_seq = seq
                self._seq = seq
                self._seg_bytes += len(data)
                if self._seg_bytes >= self._max_bytes:
                    self._close_segment()
            except OSError as exc:
                raise self._fail(exc) from exc
            return seq

    def _apply_topics_rule(self, line: dict[str, Any], digest: str) -> None:
        """Keep ``topics`` on an address's first digest-carrying event of the segment and on digest
        changes; drop it otherwise, so every segment stands alone at a fraction of the bytes."""
        addr = line.get("broker_addr")
        if self._seg_digests.get(addr) == digest:
            line.pop("topics", None)
        elif line.get("topics") is None:
            # Needed but not given: write what we have and make the next event carry the topics.
            line.pop("topics", None)
            self._seg_digests[addr] = None
        else:
            self._seg_digests[addr] = digest

    # ------------------------------------------------------------------------------ durability

    def sync(self) -> int:
        """Make every event appended so far durable and return the new :attr:`durable_seq`.

        Safe to call from another thread while ``append`` runs: the fsync works on a duplicate
        of the segment's descriptor outside the writer's lock, so appends are held up only for
        the flush, never for the fsync. With durability ``none`` it flushes without fsync.

        Raises:
            EventLogError: an fsync failed; the writer refuses further appends, as a failed
                fsync leaves the file's state unknown.
        """
        with self._lock:
            if self._failed is not None:
                raise EventLogError(f"event log {self._ns_dir} failed earlier: {self._failed}")
            seq = self._seq
            dirs, self._pending_dirs = self._pending_dirs, []
            fd = -1
            try:
                if self._file is not None and seq > self._durable_seq:
                    self._file.flush()
                    if self._fsync:
                        fd = os.dup(self._file.fileno())
            except OSError as exc:
                raise self._fail(exc) from exc
            if not self._fsync:
                self._durable_seq = max(self._durable_seq, seq)
                return self._durable_seq
        try:
            if fd >= 0:
                os.fsync(fd)
            for path in dirs:
                fsync_dir(path)
        except OSError as exc:
            with self._lock:
                raise self._fail(exc) from exc
        finally:
            if fd >= 0:
                os.close(fd)
        with self._lock:
            self._durable_seq = max(self._durable_seq, seq)
            return self._durable_seq

    def _fail(self, exc: OSError) -> EventLogError:
        """Remember the first I/O failure: a half-written line or a failed fsync poisons the file."""
        if self._failed is None:
            self._failed = exc
            log.error("event log %s failed at seq %d: %s", self._ns_dir, self._seq, exc)
        self._seg_day = None  # sends every later append through _roll, which refuses
        return EventLogError(f"event log {self._ns_dir} failed: {exc}")

    # -------------------------------------------------------------------------------- segments

    def _roll(self, day: int, first_seq: int) -> None:
        """Close the open segment (if any) and open ``events-<first_seq>.jsonl.open`` for ``day``."""
        if self._state != "open":
            raise EventLogError(f"event log {self._ns_dir} is {self._state}, not open")
        if self._failed is not None:
            raise EventLogError(f"event log {self._ns_dir} failed earlier: {self._failed}")
        try:
            if self._file is not None:
                self._close_segment()
            date_dir = self._ns_dir / day_date(day)
            try:
                date_dir.mkdir()
                self._pending_dirs.append(self._ns_dir)
            except FileExistsError:
                pass
            path = date_dir / segment_name(first_seq, "open")
            # "x": never truncate or write into a file that is already there
            self._file = open(path, "xb", buffering=WRITE_BUFFER_BYTES)
            self._pending_dirs.append(date_dir)
            if self._fsync_each:
                self._sync_pending_dirs()
        except OSError as exc:
            raise self._fail(exc) from exc
        self._seg_path = path
        self._seg_day = day
        self._seg_bytes = 0
        self._seg_digests = {}
        log.debug("event log segment %s opened", path)

    def _close_segment(self) -> None:
        """Flush, fsync, rename dropping ``.open``, fsync the folder; then queue gzip if asked."""
        f, path = self._file, self._seg_path
        assert f is not None and path is not None
        self._file = self._seg_path = self._seg_day = None
        try:
            f.flush()
            if self._fsync:
                os.fsync(f.fileno())
        finally:
            close_quietly(f)
        if self._seg_bytes == 0:
            # Only a failed first append leaves a segment empty; its name would be reused.
            path.unlink()
            return
        closed = path.with_name(path.name[: -len(".open")])
        if closed.exists():
            raise EventLogError(f"{closed} already exists; refusing to replace it")
        os.rename(path, closed)
        # The pending entries are this segment's folder and, for a new date, the ns folder;
        # fsyncing both here keeps durable_seq honest even if a sync() holds them right now.
        self._pending_dirs = []
        if self._fsync:
            fsync_dir(path.parent)
            fsync_dir(self._ns_dir)
        self._durable_seq = self._seq
        log.debug("event log segment %s closed at seq %d", closed, self._seq)
        if self._gzip_pool is not None:
            self._gzip_jobs.append(self._gzip_pool.submit(gzip_segment, closed, self._fsync))

    def _sync_pending_dirs(self) -> None:
        dirs, self._pending_dirs = self._pending_dirs, []
        for path in dirs:
            fsync_dir(path)
