"""Times on the command line: ISO-8601 with a zone, or integer epoch milliseconds (docs/interfaces.md)."""

from __future__ import annotations

import datetime as dt

UTC = dt.timezone.utc
DAY_MS = 86_400_000


def parse_time(text: str) -> int:
    """``2026-11-21T03:00:00Z`` or ``1795219200000`` to epoch milliseconds.

    Raises:
        ValueError: not an integer and not ISO-8601 with an explicit zone.
    """
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        parsed = dt.datetime.fromisoformat(text.replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        raise ValueError(f"not a time: {text!r} (use ISO-8601 with a zone, e.g. 2026-11-21T03:00:00Z, or epoch ms)") from None
    if parsed.tzinfo is None:
        raise ValueError(f"time {text!r} has no zone; add Z or an offset such as +00:00")
    return int(parsed.timestamp() * 1000) if parsed.microsecond % 1000 == 0 else round(parsed.timestamp() * 1000)


def parse_date(text: str) -> dt.date:
    """``YYYY-MM-DD`` to a date, with a clear error."""
    try:
        return dt.date.fromisoformat(text)
    except ValueError:
        raise ValueError(f"not a date: {text!r} (use YYYY-MM-DD)") from None


def day_start_ms(day: dt.date) -> int:
    """Epoch ms of 00:00 UTC on ``day``."""
    return int(dt.datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp() * 1000)


def utc_date(ms: int) -> dt.date:
    """The UTC date of an epoch-ms instant."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=UTC).date()


def iso(ms: int) -> str:
    """Epoch ms as ISO-8601 UTC with milliseconds."""
    return dt.datetime.fromtimestamp(ms / 1000, tz=UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def yesterday_utc(now: dt.datetime | None = None) -> dt.date:
    """The previous UTC day (the nightly audit's default)."""
    now = now or dt.datetime.now(UTC)
    return (now.astimezone(UTC) - dt.timedelta(days=1)).date()
