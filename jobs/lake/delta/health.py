"""Whether a lake table can be read, and what to say when it cannot.

A table folder whose ``_delta_log`` holds files is a table, even when ``deltalake`` cannot parse
them (``DeltaTable.is_deltatable`` says yes for a log with a commit that is not JSON, no for a log
emptied by hand). Such a table, or one whose version names data files that are gone, is damage:
:class:`common.errors.LakeDamaged`, one line naming the table and the problem, never a Python or
Rust backtrace (``deltalake``'s messages carry the Rust one when ``RUST_BACKTRACE`` is set).
"""

from __future__ import annotations

import os

import pyarrow.fs as pafs
from deltalake import DeltaTable

from common.errors import LakeDamaged
from jobs.storage import locations, settings
from jobs.storage.stores import filesystem_of


class MissingDataFiles(LakeDamaged):
    """A version's data file is gone from disk (``nsaudit lake vacuum`` removed it, or a hand did).

    Attributes:
        table: the table's name (its folder).
        version: the version read (None: the latest).
        file: the missing file, relative to the table.
    """

    def __init__(self, path: str, version: int | None, file: str) -> None:
        self.table, self.version, self.file = os.path.basename(path.rstrip("/")), version, file
        which = "its latest version" if version is None else f"version {version}"
        super().__init__(f"table {self.table}: {which} names data file {file}, which is gone from disk ({path})")


def problem_line(exc: BaseException) -> str:
    """The first line of an error's message (``deltalake`` appends a Rust backtrace to it)."""
    text = str(exc).strip()
    return (text.splitlines()[0].strip() if text else type(exc).__name__)[:300]


def storage_options(root: str) -> dict[str, str] | None:
    """``deltalake``'s storage options for a table root: the process's object-store settings for an
    ``s3a://`` one, None for a local one."""
    return settings.current().delta_options() if locations.is_remote(root) else None


def has_log(path: str) -> bool:
    """The folder (or prefix) holds a ``_delta_log`` with at least one file: a table, readable or not."""
    remote = locations.is_remote(path)
    fs, inner = filesystem_of(path, settings.current().store if remote else None)
    selector = pafs.FileSelector(f"{inner.rstrip('/')}/_delta_log", allow_not_found=True)
    try:
        return any(info.type == pafs.FileType.File for info in fs.get_file_info(selector))
    except (FileNotFoundError, NotADirectoryError):
        return False


def damaged(path: str, exc: BaseException) -> LakeDamaged:
    """The :class:`LakeDamaged` for a table whose log ``deltalake`` could not read."""
    name = os.path.basename(path.rstrip("/"))
    return LakeDamaged(
        f"table {name}: its _delta_log cannot be read ({problem_line(exc)}); the lake is damaged ({path})"
    )


def open_delta(path: str, version: int | None = None) -> DeltaTable:
    """Open a table's snapshot (the latest, or ``version``), its whole log parsed.

    Raises:
        FileNotFoundError: no table at ``path`` (no ``_delta_log``, or an empty one).
        LakeDamaged: a log that cannot be read (a commit that is not JSON, a missing commit).
        ValueError: ``version`` is not in the log (a caller's bad argument, not damage).
    """
    if not has_log(path):
        raise FileNotFoundError(f"{path}: no Delta table here")
    try:
        return DeltaTable(path, version=version, storage_options=storage_options(path))
    except Exception as exc:  # noqa: BLE001 - deltalake raises its own types (DeltaError, DeltaProtocolError, ...)
        if version is not None and _has_no_version(path, version):
            raise ValueError(f"{path}: no version {version}") from None
        raise damaged(path, exc) from None


def _has_no_version(path: str, version: int) -> bool:
    """The latest version opens and ``version`` is beyond it (the failure was the caller's)."""
    try:
        return version > DeltaTable(path, storage_options=storage_options(path)).version() or version < 0
    except Exception:  # noqa: BLE001 - the log itself is broken: the first error stands
        return False


def check_readable(path: str) -> None:
    """Parse the latest version's log and its commit history (what housekeeping reads).

    Raises:
        LakeDamaged: any of it cannot be read.
    """
    table = open_delta(path)
    try:
        table.history()
        table.get_add_actions(flatten=True)
    except Exception as exc:  # noqa: BLE001 - deltalake's own error types
        raise damaged(path, exc) from None
