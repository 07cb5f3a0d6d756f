"""Crash recovery of one name server's log folder, and compression of closed segments.

What :meth:`nameserver.eventlog.writer.EventLogWriter.open` does before the first append
(docs/event-log.md): a leftover ``.open`` segment (a crash) keeps its bytes, a cut-short last line included,
and takes its closed name, an empty one is removed; a compression cut short is finished; then
the last seq on disk is found, so the new run continues after it. Nothing existing is rewritten
or truncated. Compression (:func:`gzip_segment`) replaces a plain segment only once its ``.gz``
is durable.
"""

from __future__ import annotations

import gzip
import logging
import os
import shutil
from collections.abc import Iterable
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import orjson

from nameserver.eventlog.segments import SEGMENT_RE, EventLogError, Segment, iter_segment_lines, list_segments

GZIP_LEVEL = 6

log = logging.getLogger("nameserver.eventlog.writer")  # one logger for the whole log


def fsync_dir(path: Path) -> None:
    """fsync a folder: its entries (a rename, a new file) become durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -------------------------------------------------------------------------------- recovery


def recover_folder(ns_dir: Path, durable: bool) -> None:
    """Finish what a crash interrupted in one name server's folder: leftover ``.open`` segments
    and cut-short gzips. With ``durable``, every change is fsynced (folders included)."""
    touched: set[Path] = set()
    for date_dir in sorted(p for p in ns_dir.iterdir() if p.is_dir()):
        names = set(os.listdir(date_dir))
        for name in sorted(names):
            path = date_dir / name
            if name.endswith(".jsonl.open") and SEGMENT_RE.match(name):
                touched.add(date_dir)
                _recover_open_segment(path, durable)
            elif name.endswith(".jsonl.gz.tmp") and name[: -len(".gz.tmp")] in names:
                path.unlink()  # the plain segment is intact; compression starts again below
                touched.add(date_dir)
            elif name.endswith(".jsonl.gz") and name[: -len(".gz")] in names:
                # The .gz was renamed into place only once durable: the plain copy is spare.
                (date_dir / name[: -len(".gz")]).unlink()
                touched.add(date_dir)
    if durable:
        for date_dir in sorted(touched):
            fsync_dir(date_dir)


def _recover_open_segment(path: Path, durable: bool) -> None:
    if path.stat().st_size == 0:
        path.unlink()  # holds no byte; keeping it would clash with the next segment's name
        log.warning("event log: removed empty leftover segment %s", path)
        return
    closed = path.with_name(path.name[: -len(".open")])
    if closed.exists():
        raise EventLogError(f"cannot recover {path}: {closed} already exists")
    if durable:
        fd = os.open(path, os.O_RDONLY)
        try:
            os.fsync(fd)  # what the crashed run handed to the OS becomes durable now
        finally:
            os.close(fd)
    os.rename(path, closed)
    log.warning("event log: recovered leftover segment %s as %s", path, closed.name)


def find_last_seq(events_dir: str | os.PathLike[str], ns: str) -> int:
    """The last complete seq on disk, or the seq used by a segment holding only a cut line."""
    floor = 0
    for seg in reversed(list_segments(events_dir, ns)):
        last = _last_complete_seq(seg)
        if last is not None:
            return max(last, floor)
        if seg.path.stat().st_size > 0:
            # Its first event was cut short: its seq is spent, and the name is taken.
            floor = max(floor, seg.first_seq)
    return floor


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


# ----------------------------------------------------------------------------- compression


def gzip_segment(path: Path, durable: bool) -> Path:
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
        fsync_dir(path.parent)  # the .gz is durable before the plain copy goes
    path.unlink()
    if durable:
        fsync_dir(path.parent)
    return target


def log_gzip_failures(jobs: Iterable[Future[Any]]) -> None:
    """Log every compression that failed; its plain segment stays, complete and readable."""
    for job in jobs:
        exc = job.exception()
        if exc is not None:
            log.error("event log: compressing a closed segment failed (plain file kept): %s", exc)


def drop_cut_tail(path: Path) -> None:
    """Truncate a segment this run was writing after its last complete line.

    Only for a write that failed while the server was running (a full disk): the cut line's
    event was never acknowledged and is written again, whole, in a new segment. A crash's
    leftovers are never truncated (:func:`recover_folder`).
    """
    with open(path, "r+b") as f:
        size = f.seek(0, os.SEEK_END)
        keep = size
        while keep > 0:
            start = max(0, keep - 64 * 1024)
            f.seek(start)
            block = f.read(keep - start)
            newline = block.rfind(b"\n")
            if newline >= 0:
                keep = start + newline + 1
                break
            keep = start
        if keep < size:
            f.truncate(keep)
            log.warning("event log: dropped %d bytes of a line cut short by a failed write in %s", size - keep, path)
