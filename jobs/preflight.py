"""What an audit checks before its first write, so that bad input leaves the lake as it was.

An audit's first write marks its day ``running`` in ``audit_runs``; a missing bucket, refused
credentials, an unreachable endpoint or a day without segments found after that would leave the
day marked unfinished for nothing. They are found here, before, by listing only.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from jobs.ingest.segments import find_day_segments
from jobs.storage import locations
from jobs.storage.problems import check_reachable


def check_inputs(events: str, lake: str, days: Sequence[dt.date]) -> None:
    """Both locations reachable and every day of ``days`` with a segment to ingest.

    Raises:
        StorageError: a bucket missing, access denied, or the store unreachable (one line).
        IngestInputError: no events folder, or a day without segments.
    """
    events_root, lake_root = locations.normalize(events), locations.normalize(lake)
    check_reachable(events_root)
    check_reachable(lake_root)
    for day in days:
        find_day_segments(events, day)
