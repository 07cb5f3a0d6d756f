"""Small file operations on a local folder or an object store, for what the lake holds beside its
tables: reports (``<lake>/reports/<date>/``) and logs (``<lake>/_logs/``).

A log is written while a command runs, by Python's logging and by the driver JVM's log4j, so it
needs a local file: :func:`local_log_path` gives one (the lake's own ``_logs/`` folder for a local
lake; a staging file for a remote one) and :func:`publish_log` copies a staged log to the lake.
"""

from __future__ import annotations

import hashlib
import os
import tempfile
from collections.abc import Iterator

import pyarrow.fs as pafs

from jobs.storage import locations, settings
from jobs.storage.stores import filesystem_of


def _fs(path: str) -> tuple[pafs.FileSystem, str]:
    path = locations.normalize(path)
    return filesystem_of(path, settings.current().store if locations.is_remote(path) else None)


def exists(path: str) -> bool:
    """Whether a file is at ``path``."""
    fs, inner = _fs(path)
    is_file: bool = fs.get_file_info(inner).type == pafs.FileType.File
    return is_file


def read_text(path: str) -> str:
    """A UTF-8 file's text."""
    fs, inner = _fs(path)
    with fs.open_input_stream(inner, compression=None) as stream:
        data: bytes = stream.read()
    return data.decode("utf-8")


def write_text(path: str, text: str) -> None:
    """Replace a file's text: readers see the old or the new text, never part of it (a local file
    is written beside and renamed; an object PUT is atomic)."""
    fs, inner = _fs(path)
    if isinstance(fs, pafs.LocalFileSystem):
        os.makedirs(os.path.dirname(inner), exist_ok=True)
        tmp = inner + ".tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.write(text)
        os.replace(tmp, inner)
        return
    with fs.open_output_stream(inner) as stream:
        stream.write(text.encode("utf-8"))


def upload_file(local_path: str, path: str) -> None:
    """Copy a local file to ``path`` (a local path or an object URI)."""
    fs, inner = _fs(path)
    pafs.copy_files(local_path, inner, source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)


def list_files(folder: str) -> Iterator[tuple[str, int]]:
    """``(path relative to folder, size)`` of every file under ``folder``; nothing when it is absent."""
    fs, inner = _fs(folder)
    selector = pafs.FileSelector(inner, recursive=True, allow_not_found=True)
    for info in fs.get_file_info(selector):
        if info.type == pafs.FileType.File:
            yield info.path[len(inner) :].lstrip("/"), info.size


def list_entries(folder: str) -> list[str]:
    """The names of the files and folders (prefixes, on a store) right under ``folder``, an empty
    folder's included; none when it is absent."""
    fs, inner = _fs(folder)
    selector = pafs.FileSelector(inner, recursive=False, allow_not_found=True)
    return sorted(info.base_name for info in fs.get_file_info(selector))


def delete(path: str) -> None:
    """Delete a file, or every file under a folder; nothing when it is absent."""
    fs, inner = _fs(path)
    info = fs.get_file_info(inner)
    if info.type == pafs.FileType.File:
        fs.delete_file(inner)
    elif info.type == pafs.FileType.Directory:
        fs.delete_dir(inner)


def local_log_path(lake: str, name: str) -> str:
    """Where a command writes its log ``name`` while it runs: ``<lake>/_logs/<name>`` for a local
    lake, else a staging file of this host (:func:`publish_log` copies it into the lake)."""
    if not locations.is_remote(lake):
        return os.path.join(lake, "_logs", name)
    # one folder per lake, so that two lakes' logs of a day never share a file
    digest = hashlib.sha256(lake.encode("utf-8")).hexdigest()[:12]
    return os.path.join(tempfile.gettempdir(), "nsaudit-logs", digest, name)


def publish_log(lake: str, local_path: str) -> str | None:
    """Copy a staged log into ``<lake>/_logs/`` (a remote lake's); its path there, or None when
    there is nothing to copy. A failure is left to the caller (the store may be what failed)."""
    if not locations.is_remote(lake) or not os.path.exists(local_path):
        return None
    target = locations.join(lake, "_logs", os.path.basename(local_path))
    upload_file(local_path, target)
    return target
