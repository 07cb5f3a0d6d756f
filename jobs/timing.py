"""How long a stage or a step of one took: measured one way, logged one way."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass


@dataclass
class Elapsed:
    """Seconds a :func:`timed` block took (set when the block ends without an error)."""

    seconds: float = 0.0


@contextmanager
def timed(log: logging.Logger | None = None, stage: str = "", step: str = "") -> Iterator[Elapsed]:
    """Time the block; with ``log``, log ``"<stage>: <step> took <seconds> s"`` at INFO after it.

    Example:
        >>> with timed(log, "ingest", "sequence") as elapsed:
        ...     sequence()
        >>> elapsed.seconds
        1.24
    """
    elapsed = Elapsed()
    start = time.perf_counter()
    yield elapsed
    elapsed.seconds = time.perf_counter() - start
    if log is not None:
        log.info("%s: %s took %.1f s", stage, step, elapsed.seconds)
