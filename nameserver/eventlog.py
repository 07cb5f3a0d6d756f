"""The name server's append-only event log, format v1 (event-log spec): writer and readers.

The route table returns event dicts without ``v``, ``ns`` and ``seq``; :class:`EventLogWriter`
stamps them, applies the per-segment ``topics`` rule and writes one compact JSON line per event
into segments bounded by the UTC day and a size limit::

    <events_dir>/<ns>/<YYYY-MM-DD>/events-<first_seq:020d>.jsonl.open   being written (one at most)
    <events_dir>/<ns>/<YYYY-MM-DD>/events-<first_seq:020d>.jsonl        closed, immutable
    <events_dir>/<ns>/<YYYY-MM-DD>/events-<first_seq:020d>.jsonl.gz     closed and compressed

Every event of a segment has the segment's UTC date, so one day's events are exactly the files
under that day's folder.

Durability (``EventLogConfig.durability``), stated as what :attr:`EventLogWriter.durable_seq`
promises: every event with ``seq <= durable_seq`` survives a crash of the machine (its bytes,
its segment's directory entry and any new date folder were fsynced), except with ``"none"``.

* ``"fsync"``: ``append`` fsyncs before it returns, so ``durable_seq`` is the event's seq.
* ``"group"``: ``append`` hands the line to the OS before it returns (it survives a crash of the
  process, not of the machine); ``durable_seq`` advances when :meth:`EventLogWriter.sync` or a
  segment close fsyncs. :class:`AsyncGroupCommit` batches the waiters of one window into one
  ``sync`` on an executor thread.
* ``"none"`` (the simulator): nothing is ever fsynced and lines are buffered in the process;
  ``sync`` and segment closes hand them to the OS and advance ``durable_seq``, which then means
  "survives a crash of the process" only.

Closing a segment (day boundary, size limit, :meth:`EventLogWriter.close`) flushes, fsyncs,
renames ``.open`` away atomically and fsyncs the folder, in the appending thread; it happens once
per segment. Optional gzip runs on a background thread and replaces the plain file only after the
``.gz`` is durable. One writer per ``<events_dir>/<ns>`` at a time; the writer takes no lock file.

Example:
    >>> writer = EventLogWriter(events_dir, "ns-a", EventLogConfig(durability="none")).open()
    >>> writer.append({"ts": 1795219200000, "type": "ns_stop", "reason": "SIGTERM"})
    1
    >>> writer.close()
"""

from __future__ import annotations

import asyncio
import dataclasses
import datetime as dt
import gzip
import logging
import os
import re
import shutil
import threading
import zlib
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping

import orjson

from nameserver.config import EventLogConfig

FORMAT_VERSION = 1
DAY_MS = 86_400_000
GZIP_LEVEL = 6
# Buffer of the segment file: with durability "none" lines reach the OS in chunks this big.
WRITE_BUFFER_BYTES = 1 << 20

_SEGMENT_RE = re.compile(r"^events-(\d{20})\.jsonl(\.gz|\.open)?$")
_STATE_BY_SUFFIX = {None: "closed", ".gz": "gzip", ".open": "open"}
_EPOCH = dt.date(1970, 1, 1)
_DUMPS = orjson.dumps
# orjson's own dataclass path costs about twice what calling ``to_json_obj`` does (measured on
# DataVersion and TopicConfig), so dataclasses go through _json_default.
_OPT_LINE = orjson.OPT_APPEND_NEWLINE | orjson.OPT_PASSTHROUGH_DATACLASS

log = logging.getLogger(__name__)


class EventLogError(OSError):
    """The log cannot be written as the spec requires; after one, the writer refuses appends."""


# ---------------------------------------------------------------------------------------- segments


@dataclass(frozen=True, slots=True)
class Segment:
    """One segment file.

    Attributes:
        path: the file.
        first_seq: the seq in its name (its first event's seq).
        date: its folder name, the UTC date of its events (``YYYY-MM-DD``).
        state: ``open``, ``closed`` (plain ``.jsonl``) or ``gzip``.
    """

    path: Path
    first_seq: int
    date: str
    state: str


def segment_name(first_seq: int, state: str = "open") -> str:
    """The file name of a segment: ``events-<first_seq as 20 digits>.jsonl[.open|.gz]``."""
    suffix = {"open": ".open", "closed": "", "gzip": ".gz"}[state]
    return f"events-{first_seq:020d}.jsonl{suffix}"


def list_segments(events_dir: str | os.PathLike, ns: str) -> list[Segment]:
    """Every segment of one name server, ordered by first seq.

    When a plain segment and its ``.gz`` both exist (a compression that was cut short just before
    removing the plain file), only the plain one is listed: they hold the same bytes.
    """
    ns_dir = Path(events_dir) / ns
    found: dict[tuple[int, str], Segment] = {}
    if not ns_dir.is_dir():
        return []
    for date_dir in ns_dir.iterdir():
        if not date_dir.is_dir():
            continue
        for entry in os.scandir(date_dir):
            match = _SEGMENT_RE.match(entry.name)
            if match is None:
                continue
            seg = Segment(Path(entry.path), int(match[1]), date_dir.name, _STATE_BY_SUFFIX[match[2]])
            found[(seg.first_seq, seg.state)] = seg
    for first_seq, state in list(found):
        if state == "gzip" and (first_seq, "closed") in found:
            del found[(first_seq, state)]
    order = {"closed": 0, "gzip": 1, "open": 2}
    return sorted(found.values(), key=lambda s: (s.first_seq, order[s.state]))


def _json_default(value: Any) -> Any:
    """JSON form of a value orjson does not write itself: ``to_json_obj()``, else a dataclass's fields."""
    to_json_obj = getattr(value, "to_json_obj", None)
    if to_json_obj is not None:
        return to_json_obj()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def _day_date(day: int) -> str:
    return (_EPOCH + dt.timedelta(days=day)).isoformat()


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _seq_of(raw: bytes) -> int | None:
    """The ``seq`` of one complete line, or None when the line is not a usable event."""
    try:
        obj = orjson.loads(raw)
    except orjson.JSONDecodeError:
        return None
    seq = obj.get("seq") if isinstance(obj, dict) else None
    return seq if type(seq) is int else None


def _last_complete_seq(seg: Segment) -> int | None:
    """The seq of the last complete, parseable line of a segment (None: there is none)."""
    if seg.state == "gzip":
        last = None
        for line in iter_segment_lines(seg.path):
            seq = _seq_of(line.raw) if line.complete else None
            if seq is not None:
                last = seq
        return last
    # Plain files are read backwards in growing blocks: the last line is usually all we need.
    with open(seg.path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        block = 64 * 1024
        while True:
            start = max(0, size - block)
            f.seek(start)
            data = f.read(size - start)
            lines = data[: data.rfind(b"\n") + 1].split(b"\n")[:-1]
            if start > 0:
                lines = lines[1:]  # may begin mid-line
            for raw in reversed(lines):
                seq = _seq_of(raw)
                if seq is not None:
                    return seq
            if start == 0:
                return None
            block *= 4


# ------------------------------------------------------------------------------------------ writer


class EventLogWriter:
    """Writes one name server's events (event-log spec v1); see the module docstring.

    Thread safety: ``append`` is meant for one thread (the event loop or the simulator);
    ``sync`` and ``durable_seq`` may be used from any thread, concurrently with ``append``.

    Args:
        events_dir: the root of the log (``--events``).
        ns_id: this name server's id, the folder under ``events_dir``.
        config: segment size, durability, gzip.
    """

    def __init__(self, events_dir: str | os.PathLike, ns_id: str, config: EventLogConfig | None = None) -> None:
        if not ns_id or "/" in ns_id or ns_id.startswith("."):
            raise ValueError(f"ns id {ns_id!r} cannot be a folder name")
        self.config = config or EventLogConfig()
        self._ns = ns_id
        self._ns_dir = Path(events_dir) / ns_id
        self._fsync = self.config.durability != "none"
        self._fsync_each = self.config.durability == "fsync"
        self._flush_each = self._fsync
        self._max_bytes = self.config.segment_max_bytes
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
        self._gzip_jobs: list[Future] = []

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
        """Every event with ``seq <= durable_seq`` is durable (see the module docstring)."""
        return self._durable_seq

    @property
    def segment_path(self) -> Path | None:
        """The ``.open`` segment being written, or None between segments."""
        return self._seg_path

    # -------------------------------------------------------------------------------- lifecycle

    def open(self) -> "EventLogWriter":
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
            _fsync_dir(self._ns_dir.parent)
        self._recover()
        self._seq = self._durable_seq = self._find_last_seq()
        if self.config.gzip_closed:
            self._gzip_pool = ThreadPoolExecutor(1, thread_name_prefix=f"eventlog-gzip-{self._ns}")
            # Closed segments left plain (a crash between close and compression) catch up now.
            for seg in list_segments(self._ns_dir.parent, self._ns):
                if seg.state == "closed":
                    self._gzip_jobs.append(self._gzip_pool.submit(_gzip_segment, seg.path, self._fsync))
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
            except OSError as exc:
                raise self._fail(exc) from exc
            finally:
                if self._file is not None:  # failed writer: release the handle, keep the bytes
                    _close_quietly(self._file)
                    self._file = None
                if self._gzip_pool is not None:
                    self._gzip_pool.shutdown(wait=True)
                    self._log_gzip_failures()
        log.info("event log %s closed at seq %d (%s)", self._ns_dir, self._seq, reason or "no reason given")

    def __enter__(self) -> "EventLogWriter":
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
                data = _DUMPS(line, _json_default, _OPT_LINE)
            except orjson.JSONEncodeError as exc:
                raise ValueError(f"event {event.get('type')!r} cannot be written as JSON: {exc}") from None
            try:
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

    def _apply_topics_rule(self, line: dict, digest: str) -> None:
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
                _fsync_dir(path)
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
            date_dir = self._ns_dir / _day_date(day)
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
            _close_quietly(f)
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
            _fsync_dir(path.parent)
            _fsync_dir(self._ns_dir)
        self._durable_seq = self._seq
        log.debug("event log segment %s closed at seq %d", closed, self._seq)
        if self._gzip_pool is not None:
            self._gzip_jobs.append(self._gzip_pool.submit(_gzip_segment, closed, self._fsync))

    def _sync_pending_dirs(self) -> None:
        dirs, self._pending_dirs = self._pending_dirs, []
        for path in dirs:
            _fsync_dir(path)

    # -------------------------------------------------------------------------------- recovery

    def _recover(self) -> None:
        """Finish what a crash interrupted: leftover ``.open`` segments and cut-short gzips."""
        touched: set[Path] = set()
        for date_dir in sorted(p for p in self._ns_dir.iterdir() if p.is_dir()):
            names = set(os.listdir(date_dir))
            for name in sorted(names):
                path = date_dir / name
                if name.endswith(".jsonl.open") and _SEGMENT_RE.match(name):
                    touched.add(date_dir)
                    self._recover_open_segment(path)
                elif name.endswith(".jsonl.gz.tmp") and name[: -len(".gz.tmp")] in names:
                    path.unlink()  # the plain segment is intact; compression starts again below
                    touched.add(date_dir)
                elif name.endswith(".jsonl.gz") and name[: -len(".gz")] in names:
                    # The .gz was renamed into place only once durable: the plain copy is spare.
                    (date_dir / name[: -len(".gz")]).unlink()
                    touched.add(date_dir)
        if self._fsync:
            for date_dir in sorted(touched):
                _fsync_dir(date_dir)

    def _recover_open_segment(self, path: Path) -> None:
        if path.stat().st_size == 0:
            path.unlink()  # holds no byte; keeping it would clash with the next segment's name
            log.warning("event log: removed empty leftover segment %s", path)
            return
        closed = path.with_name(path.name[: -len(".open")])
        if closed.exists():
            raise EventLogError(f"cannot recover {path}: {closed} already exists")
        if self._fsync:
            fd = os.open(path, os.O_RDONLY)
            try:
                os.fsync(fd)  # what the crashed run handed to the OS becomes durable now
            finally:
                os.close(fd)
        os.rename(path, closed)
        log.warning("event log: recovered leftover segment %s as %s", path, closed.name)

    def _find_last_seq(self) -> int:
        """The last complete seq on disk, or the seq used by a segment holding only a cut line."""
        floor = 0
        for seg in reversed(list_segments(self._ns_dir.parent, self._ns)):
            last = _last_complete_seq(seg)
            if last is not None:
                return max(last, floor)
            if seg.path.stat().st_size > 0:
                # Its first event was cut short: its seq is spent, and the name is taken.
                floor = max(floor, seg.first_seq)
        return floor

    def _log_gzip_failures(self) -> None:
        for job in self._gzip_jobs:
            exc = job.exception()
            if exc is not None:
                log.error("event log: compressing a closed segment failed (plain file kept): %s", exc)
        self._gzip_jobs = []


def _close_quietly(f: Any) -> None:
    """Close a file whose flush may fail again; the failure was already reported."""
    try:
        f.close()
    except OSError:
        pass


def _gzip_segment(path: Path, durable: bool) -> Path:
    """Compress a closed segment to ``.jsonl.gz`` via a temp name; remove the plain file last."""
    target = path.with_name(path.name + ".gz")
    tmp = path.with_name(path.name + ".gz.tmp")
    with open(path, "rb") as src, open(tmp, "xb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, compresslevel=GZIP_LEVEL, mtime=0) as out:
            shutil.copyfileobj(src, out, 1 << 20)
        raw.flush()
        if durable:
            os.fsync(raw.fileno())
    if target.exists():
        tmp.unlink()
        raise EventLogError(f"{target} already exists; leaving {path} uncompressed")
    os.rename(tmp, target)
    if durable:
        _fsync_dir(path.parent)  # the .gz is durable before the plain copy goes
    path.unlink()
    if durable:
        _fsync_dir(path.parent)
    return target


# ------------------------------------------------------------------------------ async commits


class AsyncGroupCommit:
    """Group commit for asyncio servers: many waiters, one fsync per window, off the loop.

    The first waiter of an idle committer opens a window of ``window_ms``; when it ends, one
    :meth:`EventLogWriter.sync` runs on ``executor`` and releases every waiter whose seq it
    covered. Waiters arriving during that fsync are served by the next one, which starts as soon
    as the previous ends (the fsync's own duration is their window); so are waiters that come
    back in the loop turn right after it for events appended during it, as the server's answer
    queue does (it waits for one seq at a time).

    Args:
        writer: an open writer, appended to from the event loop's thread.
        window_ms: how long the first waiter waits for company; default the config's
            ``group_commit_ms``.
        executor: where fsync runs; default the loop's default executor.

    Example:
        >>> commit = AsyncGroupCommit(writer)
        >>> seq = writer.append(event)
        >>> await commit.wait_durable(seq)   # now answer the broker
    """

    def __init__(self, writer: EventLogWriter, window_ms: float | None = None, executor: Executor | None = None) -> None:
        self._writer = writer
        self._window_s = (writer.config.group_commit_ms if window_ms is None else window_ms) / 1000
        self._executor = executor
        self._waiters: list[tuple[int, asyncio.Future]] = []
        self._task: asyncio.Task | None = None

    async def wait_durable(self, seq: int) -> None:
        """Return once :attr:`EventLogWriter.durable_seq` >= ``seq``.

        Raises:
            EventLogError: the fsync failed; every waiter of that run gets the error.
        """
        if seq <= self._writer.durable_seq:
            return
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        self._waiters.append((seq, future))
        if self._task is None:
            self._task = loop.create_task(self._run(loop))
        await future

    async def drain(self) -> None:
        """Wait until no commit run is in progress (call before closing the writer)."""
        while self._task is not None:
            await asyncio.shield(self._task)

    async def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            await asyncio.sleep(self._window_s)
            while self._waiters:
                try:
                    durable = await loop.run_in_executor(self._executor, self._writer.sync)
                except Exception as exc:
                    waiters, self._waiters = self._waiters, []
                    for _, future in waiters:
                        if not future.done():
                            future.set_exception(exc)
                    return
                still = []
                for seq, future in self._waiters:
                    if future.done():  # its waiter was cancelled
                        continue
                    if seq <= durable:
                        future.set_result(None)
                    else:
                        still.append((seq, future))
                self._waiters = still
                if not still and self._writer.last_seq > durable:
                    # Events were appended during that fsync, and their waiters are often the ones
                    # just released, coming back (the server's answer queue waits for one seq at
                    # a time): one loop turn lets them register, and the fsync just done was
                    # their window. Without it each such round would open a fresh window.
                    await asyncio.sleep(0)
        finally:
            self._task = None


# ------------------------------------------------------------------------------------- readers


@dataclass(frozen=True, slots=True)
class SegmentLine:
    """One line of a segment: 1-based number, bytes without the ``\\n``, and whether it had one."""

    line: int
    raw: bytes
    complete: bool


@dataclass(frozen=True, slots=True)
class LineProblem:
    """A line a reader could not turn into an event (the shape of a ``quarantine`` row)."""

    file: Path
    line: int
    raw: bytes
    reason: str


def iter_segment_lines(path: str | os.PathLike) -> Iterator[SegmentLine]:
    """Every line of a plain or gzip segment; a last line without ``\\n`` has ``complete=False``.

    A gzip stream that ends early (it never should: a ``.gz`` is renamed into place once
    complete) is read as far as it decompresses; its unfinished tail is the cut-short line.

    Raises:
        EventLogError: the ``.gz`` is not gzip at all.
    """
    path = Path(path)
    number = 0
    pending = b""
    with (gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb")) as f:
        while True:
            try:
                chunk = f.read1(1 << 16)
            except EOFError:
                break  # truncated gzip: keep what came out
            except (gzip.BadGzipFile, zlib.error) as exc:
                raise EventLogError(f"{path}: not a readable gzip segment: {exc}") from None
            if not chunk:
                break
            lines = (pending + chunk).split(b"\n")
            pending = lines.pop()
            for raw in lines:
                number += 1
                yield SegmentLine(number, raw, True)
    if pending:
        yield SegmentLine(number + 1, pending, False)


def read_events(
    events_dir: str | os.PathLike,
    ns: str | None = None,
    problems: list[LineProblem] | None = None,
) -> Iterator[dict]:
    """Parsed events of one name server (or of each, by ns id), segment by segment, line by line.

    That is seq order for a log this writer produced; the reader does not sort, so a consumer can
    check that seqs increase. Lines that are cut short, not JSON or not an object are not yielded
    but reported: appended to ``problems`` when given, logged as warnings otherwise.

    Example:
        >>> problems = []
        >>> seqs = [e["seq"] for e in read_events("events", "ns-a", problems)]
        >>> [(p.line, p.reason) for p in problems]
        [(812, 'cut short: no newline at the end of the segment')]
    """
    root = Path(events_dir)
    if ns is not None:
        names = [ns]
    else:
        names = sorted(p.name for p in root.iterdir() if p.is_dir() and not p.name.startswith("."))
    for name in names:
        for seg in list_segments(root, name):
            for line in iter_segment_lines(seg.path):
                if not line.complete:
                    _report(problems, LineProblem(seg.path, line.line, line.raw, "cut short: no newline at the end of the segment"))
                    continue
                try:
                    obj = orjson.loads(line.raw)
                except orjson.JSONDecodeError as exc:
                    _report(problems, LineProblem(seg.path, line.line, line.raw, f"not JSON: {exc}"))
                    continue
                if not isinstance(obj, dict):
                    _report(problems, LineProblem(seg.path, line.line, line.raw, "not a JSON object"))
                    continue
                yield obj


def _report(problems: list[LineProblem] | None, problem: LineProblem) -> None:
    if problems is not None:
        problems.append(problem)
    else:
        log.warning("%s:%d: %s", problem.file, problem.line, problem.reason)
