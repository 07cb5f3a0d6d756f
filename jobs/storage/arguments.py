"""``--events`` and ``--lake`` as argparse types: a local folder, a ``file://`` URI or
``s3a://bucket/prefix`` (docs/interfaces.md, "Commands": a bad one is one line and exit 2).

Only the form is checked here; whether a bucket exists and the credentials may use it is known
once the config is loaded (:func:`jobs.storage.problems.check_reachable`).
"""

from __future__ import annotations

import argparse
import os

from common.arguments import existing_dir_arg, output_dir_arg
from common.errors import UserError
from jobs.storage import locations


def _checked(text: str) -> str:
    try:
        return locations.check(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def events_arg(text: str) -> str:
    """An events folder that exists, or an object-store prefix."""
    normalised = _checked(text)
    if not locations.is_remote(normalised):
        existing_dir_arg(normalised)
    return text


def lake_arg(text: str) -> str:
    """A lake folder that exists or can be made, or an object-store prefix."""
    normalised = _checked(text)
    if not locations.is_remote(normalised):
        output_dir_arg(normalised)
    return text


def location_arg(text: str) -> str:
    """A folder or an object-store prefix, checked for its form only."""
    _checked(text)
    return text


def existing_lake_arg(text: str) -> str:
    """A lake to read: a folder that exists, or an object-store prefix."""
    normalised = _checked(text)
    if not locations.is_remote(normalised):
        existing_dir_arg(normalised)
    return text


def make_lake(lake: str) -> None:
    """Make a local lake's folder (an object store needs none).

    Raises:
        UserError: the folder cannot be made.
    """
    path = locations.normalize(lake)
    if locations.is_remote(path):
        return
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise UserError(f"--lake: cannot create {lake}: {exc.strerror}") from None
