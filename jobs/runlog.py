"""The log of an audit run: ``<lake>/_logs/<date>.log``, Python's and the driver JVM's, with the
console showing the project's warnings (or everything, ``--verbose``); for a lake on an object store
a local file while the run lasts, copied into the lake when it ends."""

from __future__ import annotations

import datetime as dt
import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager


def log_path(lake: str, day: dt.date) -> str:
    """``<lake>/_logs/<date>.log``: the run's log (Python's and the driver JVM's); for a lake on an
    object store a local file while the run lasts, copied into the lake when it ends."""
    from jobs.storage import files, locations

    return files.local_log_path(locations.normalize(lake), f"{day.isoformat()}.log")


class _ShownByDefault(logging.Filter):
    """Without ``--verbose`` the console shows this project's warnings only, without traces."""

    def filter(self, record: logging.LogRecord) -> bool:
        return (
            record.levelno >= logging.WARNING
            and record.exc_info is None
            and record.name.startswith(("nsaudit", "jobs"))
        )


@contextmanager
def logging_to(path: str, verbose: bool, lake: str | None = None) -> Iterator[None]:
    """Log everything from INFO up to ``path``, and to stderr all of it (``verbose``) or the
    project's warnings; at the end, a staged log of an object-store ``lake`` goes into it
    (:func:`jobs.storage.files.publish_log`)."""
    from jobs.storage.settings import RedactingFormatter

    os.makedirs(os.path.dirname(path), exist_ok=True)
    form = RedactingFormatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    to_file, to_console = logging.FileHandler(path, encoding="utf-8"), logging.StreamHandler(sys.stderr)
    for handler in (to_file, to_console):
        handler.setFormatter(form)
    if not verbose:
        to_console.addFilter(_ShownByDefault())
    root = logging.getLogger()
    level = root.level
    root.setLevel(logging.INFO)
    root.addHandler(to_file)
    root.addHandler(to_console)
    try:
        yield
    finally:
        root.removeHandler(to_file)
        root.removeHandler(to_console)
        root.setLevel(level)
        to_file.close()
        if lake is not None:
            _publish_log(lake, path)


def _publish_log(lake: str, path: str) -> None:
    from jobs.storage import files, locations

    try:
        files.publish_log(locations.normalize(lake), path)
    except OSError:
        pass  # the store may be what failed the run: the log stays on this host, where its error line points
