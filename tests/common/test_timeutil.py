"""Times on the command line: every instant inside the range parses exactly, every one outside it,
however written, is a ValueError saying "out of range"."""

import pytest

from common.timeutil import MAX_TIME_MS, MIN_TIME_MS, parse_time


@pytest.mark.parametrize(
    "text, ms",
    [
        ("2026-11-21T03:00:00Z", 1_795_230_000_000),
        ("2026-11-21T04:00:00+01:00", 1_795_230_000_000),
        ("0001-01-02T00:00:00Z", MIN_TIME_MS),
        ("0001-01-02T01:00:00+01:00", MIN_TIME_MS),  # the first instant, written east of UTC
        ("9999-12-30T23:59:59.999Z", MAX_TIME_MS),
        ("9999-12-30T22:59:59.999-01:00", MAX_TIME_MS),  # the last instant, written west of UTC
        ("1795230000000", 1_795_230_000_000),
    ],
)
def test_a_time_in_range_parses_exactly(text, ms):
    assert parse_time(text) == ms


@pytest.mark.parametrize(
    "text",
    [
        # an offset that moves a representable local time past datetime's own limits
        "9999-12-31T23:59:59-23:59",
        "9999-12-31T00:00:00-00:01",
        "0001-01-01T00:00:00+01:00",
        "0001-01-01T00:00:00+23:59",
        # inside datetime's limits, outside the range
        "0001-01-01T23:59:59.999Z",
        "9999-12-31T00:00:00Z",
        "9999-12-30T23:59:59.999-00:01",
        str(MAX_TIME_MS + 1),
        str(MIN_TIME_MS - 1),
        "9" * 20,
    ],
)
def test_a_time_outside_the_range_is_out_of_range(text):
    with pytest.raises(ValueError, match="out of range"):
        parse_time(text)
