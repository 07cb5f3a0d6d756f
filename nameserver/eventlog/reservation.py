"""Seq reservation for a log that is not fsynced (``durability = "none"``, docs/event-log.md).

Such a log loses the lines still buffered when the process dies, and their seqs were already
handed out (acknowledged answers). So that the next run does not hand the same seqs out again,
which would hide the loss from ``seq_gap``, the writer reserves seqs in blocks ahead of use in
``<events_dir>/<ns>/.seq-reserved``, a small file replaced atomically and fsynced. A run
continues after the larger of the last seq on disk and the reservation; a clean close writes
the last seq used, so only an unclean stop leaves a gap.
"""

from __future__ import annotations

import os
from pathlib import Path

from nameserver.eventlog.recovery import fsync_dir

RESERVATION_NAME = ".seq-reserved"
# Seqs reserved per fsync: the most a crash can skip, and one small fsync every this many events.
SEQ_BLOCK = 10_000


def read_reservation(ns_dir: Path) -> int:
    """The seq reserved by an earlier run of this server, 0 when none (or unreadable)."""
    try:
        text = (ns_dir / RESERVATION_NAME).read_text(encoding="ascii").strip()
    except (FileNotFoundError, UnicodeDecodeError):
        return 0
    return int(text) if text.isdigit() else 0


def write_reservation(ns_dir: Path, seq: int) -> int:
    """Make ``seq`` the durable reservation (temp file, fsync, rename, fsync the folder); returns it.

    Raises:
        OSError: the file cannot be written.
    """
    tmp = ns_dir / (RESERVATION_NAME + ".tmp")
    with open(tmp, "w", encoding="ascii") as f:
        f.write(f"{seq}\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, ns_dir / RESERVATION_NAME)
    fsync_dir(ns_dir)
    return seq


class SeqReservation:
    """Keeps the reservation ahead of the seqs a writer hands out.

    Args:
        ns_dir: the server's log folder.
        active: reserve at all (only a log that is not fsynced needs it).
    """

    def __init__(self, ns_dir: Path, active: bool) -> None:
        self._ns_dir = ns_dir
        self._active = active
        self._reserved = 0

    def cover(self, seq: int) -> None:
        """Before ``seq`` is handed out: reserve a new block when it lies past the reservation."""
        if self._active and seq > self._reserved:
            self._reserved = write_reservation(self._ns_dir, seq + SEQ_BLOCK)

    def release(self, last_seq: int) -> None:
        """After a clean close: the next run continues right after ``last_seq``."""
        if self._active and self._reserved:
            self._reserved = write_reservation(self._ns_dir, last_seq)
