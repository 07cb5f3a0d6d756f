"""Event-log segment files (docs/event-log.md): their names, listing them, reading them back.

One name server's log is ``<events_dir>/<ns>/<YYYY-MM-DD>/events-<first_seq:020d>.jsonl``, with
``.open`` while it is written and ``.gz`` once compressed (see :mod:`nameserver.eventlog.writer`). The
readers need no writer: the replay, the tools and the tests read logs with them. Re-exported by
:mod:`nameserver.eventlog.writer`; import from there.

Example:
    >>> [seg.path.name for seg in list_segments("events", "ns-a")]
    ['events-00000000000000000001.jsonl.gz', 'events-00000000000000004711.jsonl.open']
"""

from __future__ import annotations

import gzip
import logging
import os
import re
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

# A segment's file name: first seq as 20 digits, then the state suffix (none: closed).
SEGMENT_RE = re.compile(r"^events-(\d{20})\.jsonl(\.gz|\.open)?$")
_STATE_BY_SUFFIX = {None: "closed", ".gz": "gzip", ".open": "open"}

log = logging.getLogger("nameserver.eventlog.writer")  # one logger for the whole log


class EventLogError(OSError):
    """The log cannot be written as docs/event-log.md requires; after one, the writer refuses appends.

    Readers raise it too, for a segment that cannot be read at all (a ``.gz`` that is not gzip).
    """


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


def list_segments(events_dir: str | os.PathLike[str], ns: str) -> list[Segment]:
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
            match = SEGMENT_RE.match(entry.name)
            if match is None:
                continue
            seg = Segment(Path(entry.path), int(match[1]), date_dir.name, _STATE_BY_SUFFIX[match[2]])
            found[(seg.first_seq, seg.state)] = seg
    for first_seq, state in list(found):
        if state == "gzip" and (first_seq, "closed") in found:
            del found[(first_seq, state)]
    order = {"closed": 0, "gzip": 1, "open": 2}
    return sorted(found.values(), key=lambda s: (s.first_seq, order[s.state]))


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


def iter_segment_lines(path: str | os.PathLike[str]) -> Iterator[SegmentLine]:
    """Every line of a plain or gzip segment; a last line without ``\\n`` has ``complete=False``.

    A gzip stream that ends early (it never should: a ``.gz`` is renamed into place once
    complete) is read as far as it decompresses; its unfinished tail is the cut-short line.

    Raises:
        EventLogError: the ``.gz`` is not gzip at all.
    """
    path = Path(path)
    number = 0
    pending = b""
    with gzip.open(path, "rb") if path.name.endswith(".gz") else open(path, "rb") as f:
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
    events_dir: str | os.PathLike[str], ns: str | None = None, problems: list[LineProblem] | None = None
) -> Iterator[dict[str, Any]]:
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
                    _report(
                        problems,
                        LineProblem(seg.path, line.line, line.raw, "cut short: no newline at the end of the segment"),
                    )
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
