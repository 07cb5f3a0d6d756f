"""How an event becomes one line of the log: the format version, the JSON form of values orjson
does not write itself, and the UTC day (the segment folder) of a timestamp."""

from __future__ import annotations

import dataclasses
import datetime as dt
from typing import Any

import orjson

FORMAT_VERSION = 1
DAY_MS = 86_400_000

_EPOCH = dt.date(1970, 1, 1)
# orjson's own dataclass path is slower than calling ``to_json_obj`` (DataVersion, TopicConfig),
# so dataclasses go through json_default.
OPT_LINE = orjson.OPT_APPEND_NEWLINE | orjson.OPT_PASSTHROUGH_DATACLASS


def json_default(value: Any) -> Any:
    """JSON form of a value orjson does not write itself: ``to_json_obj()``, else a dataclass's fields."""
    to_json_obj = getattr(value, "to_json_obj", None)
    if to_json_obj is not None:
        return to_json_obj()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def day_date(day: int) -> str:
    """The ISO date of a UTC day number (days since 1970-01-01)."""
    return (_EPOCH + dt.timedelta(days=day)).isoformat()


def close_quietly(f: Any) -> None:
    """Close a file whose flush may fail again; the failure was already reported."""
    try:
        f.close()
    except OSError:
        pass
