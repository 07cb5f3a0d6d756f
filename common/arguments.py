"""Command-line argument checks shared by ``nsaudit``, ``python -m nameserver`` and ``spark-submit
jobs/nightly_audit.py``.

Each ``*_arg`` is an argparse ``type``: it returns the text it was given once it is known to be
usable, or raises ``argparse.ArgumentTypeError`` with the reason, which :class:`OneLineParser`
prints as one line (docs/interfaces.md, "Commands": one line on stderr, exit 2, no traceback).
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable
from typing import NoReturn

from common.config import MAX_DURATION_MS
from common.timeutil import parse_date, parse_time

# local, local[N], local[*], local[N,F], local-cluster[N,C,M], yarn, and the URL masters
_MASTER = re.compile(r"local(\[(\d+|\*)(,\d+)?\])?|local-cluster\[\d+,\d+,\d+\]|yarn|(spark|k8s|mesos)://\S+")


class OneLineParser(argparse.ArgumentParser):
    """An ``ArgumentParser`` whose errors are one line, ``PROG: error: MESSAGE``, and exit 2.

    argparse's default prints the usage block first; ``--help`` still shows it.
    """

    def error(self, message: str) -> NoReturn:
        """Print ``PROG: error: MESSAGE (see --help)`` on stderr and exit 2."""
        self.exit(2, f"{self.prog}: error: {message} (see --help)\n")


def int_arg(low: int, high: int, what: str = "") -> Callable[[str], int]:
    """An argparse type: a whole number in ``low .. high``; ``what`` says what ``high`` is.

    Every integer flag takes one, so no value, however many digits it has, reaches the code
    behind it unbounded (the config's keys are bounded the same way: ``common.config.max_of``).
    """
    bound = f"{low}..{high}" + (f" ({what})" if what else "")

    def parse(text: str) -> int:
        shown = text.strip() if len(text.strip()) <= 40 else text.strip()[:37] + "..."
        try:
            value = int(text)
        except ValueError:
            if text.strip().lstrip("+-").isdigit():  # more digits than int() converts (4300)
                raise argparse.ArgumentTypeError(f"must be in {bound}, not {shown}") from None
            raise argparse.ArgumentTypeError(f"{shown!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be in {bound}, not {shown}")
        return value

    return parse


def duration_ms_arg(low: int) -> Callable[[str], int]:
    """An argparse type: milliseconds in ``low .. MAX_DURATION_MS`` (ten years), as config keys."""
    return int_arg(low, MAX_DURATION_MS, "ten years")


def date_arg(text: str) -> str:
    """``YYYY-MM-DD``, a real calendar day."""
    try:
        parse_date(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def time_arg(text: str) -> str:
    """ISO-8601 with a zone, or integer epoch milliseconds."""
    try:
        parse_time(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def master_arg(text: str) -> str:
    """A Spark master URL Spark can parse."""
    if not _MASTER.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"not a Spark master: {text!r} (local[*], local[N], spark://HOST:PORT, yarn, k8s://…)"
        )
    return text


def existing_dir_arg(text: str) -> str:
    """A directory that exists (input to read)."""
    if not os.path.isdir(text):
        raise argparse.ArgumentTypeError(f"directory not found: {text}")
    return text


def output_dir_arg(text: str) -> str:
    """A directory that exists or can be created: no file in its place, a writable ancestor."""
    path = os.path.abspath(text)
    if os.path.exists(path):
        if not os.path.isdir(path):
            raise argparse.ArgumentTypeError(f"{text} is not a directory")
        return text
    parent = os.path.dirname(path)
    while not os.path.exists(parent):
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent) or not os.access(parent, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"cannot create {text}: {parent} is not a writable directory")
    return text
