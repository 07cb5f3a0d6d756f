"""Times on the command line: ISO-8601 with a zone, or integer epoch milliseconds (docs/interfaces.md)."""

from __future__ import annotations

import datetime as dt

UTC = dt.UTC
DAY_MS = 86_400_000

# The days a time or date may fall on: the audit and the queries step one day either side of the
# day asked for (the previous day's state, the next midnight), and Python's datetime ends at years
# 1 and 9999, so the first and the last representable day are out of range.
FIRST_DAY = dt.date(1, 1, 2)
LAST_DAY = dt.date(9999, 12, 30)
MIN_TIME_MS = -62_135_510_400_000  # FIRST_DAY 00:00:00.000 UTC
MAX_TIME_MS = 253_402_214_399_999  # LAST_DAY 23:59:59.999 UTC
_RANGE = "0001-01-02T00:00:00Z .. 9999-12-30T23:59:59.999Z"


def parse_time(text: str) -> int:
    """``2026-11-21T03:00:00Z`` or ``1795219200000`` to epoch milliseconds.

    Raises:
        ValueError: not an integer and not ISO-8601 with an explicit zone, or outside
            ``MIN_TIME_MS .. MAX_TIME_MS``.
    """
    text = text.strip()
    if text.lstrip("-").isdigit():
        ms = int(text)
    else:
        ms = _parse_iso(text)
    if not MIN_TIME_MS <= ms <= MAX_TIME_MS:
        shown = text if len(text) <= 40 else text[:37] + "..."
        raise ValueError(f"time {shown} is out of range ({_RANGE}, or epoch ms {MIN_TIME_MS} .. {MAX_TIME_MS})")
    return ms


def _parse_iso(text: str) -> int:
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(
            f"not a time: {text!r} (use ISO-8601 with a zone, e.g. 2026-11-21T03:00:00Z, or epoch ms)"
        ) from None
    if parsed.tzinfo is None:
        raise ValueError(f"time {text!r} has no zone; add Z or an offset such as +00:00")
    # Exact integer arithmetic: timestamp() goes through a float and, for an offset that moves
    # the instant before year 1 or after year 9999 (0001-01-01T00:00:00+01:00,
    # 9999-12-31T23:59:59-23:59), through an unrepresentable datetime. So the epoch is taken
    # away first and the offset from the timedelta, which spans far more than those years;
    # parse_time then refuses the instant as out of range.
    offset = parsed.utcoffset()
    assert offset is not None  # tzinfo is set, and a fixed offset's utcoffset is never None
    delta = parsed.replace(tzinfo=None) - dt.datetime(1970, 1, 1) - offset
    return (delta.days * 86_400 + delta.seconds) * 1000 + round(delta.microseconds / 1000)


def parse_date(text: str) -> dt.date:
    """``YYYY-MM-DD`` to a date, with a clear error.

    Raises:
        ValueError: not a calendar date, or outside ``FIRST_DAY .. LAST_DAY``.
    """
    try:
        day = dt.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not a date: {text!r} (use YYYY-MM-DD)") from None
    if not FIRST_DAY <= day <= LAST_DAY:
        raise ValueError(f"date {text} is out of range ({FIRST_DAY} .. {LAST_DAY})")
    return day


def day_start_ms(day: dt.date) -> int:
    """Epoch ms of 00:00 UTC on ``day``."""
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=UTC)


def utc_date(ms: int) -> dt.date:
    """The UTC date of an epoch-ms instant."""
    return (_EPOCH + dt.timedelta(milliseconds=ms)).date()


def iso(ms: int) -> str:
    """Epoch ms as ISO-8601 UTC with milliseconds (exact: no float on the way)."""
    return (_EPOCH + dt.timedelta(milliseconds=ms)).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def yesterday_utc(now: dt.datetime | None = None) -> dt.date:
    """The previous UTC day (the nightly audit's default)."""
    now = now or dt.datetime.now(UTC)
    return (now.astimezone(UTC) - dt.timedelta(days=1)).date()
