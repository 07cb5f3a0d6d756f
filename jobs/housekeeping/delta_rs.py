"""Housekeeping through delta-rs (``deltalake``): no JVM, on the host that runs the command.

Each function is one Delta operation on one table, so one commit (or none when there is nothing
to do); :mod:`jobs.housekeeping.native` does the same through delta-spark.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

from jobs.lake.tables import open_table
from jobs.storage import locations


def optimize(path: str, days: Sequence[dt.date], zorder_by: Sequence[str]) -> None:
    """Rewrite the partitions of ``days`` into as few files as the size limit allows, Z-ordered by
    ``zorder_by`` when it names columns (else bin-packed in their order)."""
    table = open_table(path)
    where = [("date", "in", [d.isoformat() for d in days])]
    if zorder_by:
        table.optimize.z_order(list(zorder_by), partition_filters=where)
    else:
        table.optimize.compact(partition_filters=where)


def vacuum(path: str, retain_hours: int, dry_run: bool) -> list[str]:
    """Delete (or with ``dry_run`` only list) the files no version of the last ``retain_hours``
    needs, and files no commit references (a failed write's); absolute paths (or ``s3a://`` URIs)."""
    table = open_table(path)
    # full: also the files the log never named (orphans of failed writes), as delta-spark's VACUUM
    # does; the retention check is the caller's (it refuses short retentions unless forced)
    removed = table.vacuum(retention_hours=retain_hours, dry_run=dry_run, enforce_retention_duration=False, full=True)
    return [locations.join(path, name) if "://" not in name else locations.normalize(name) for name in removed]


def delete_before(path: str, day: dt.date) -> None:
    """Delete every row of partitions dated before ``day``: one commit that removes their files."""
    open_table(path).delete(f"\"date\" < CAST('{day.isoformat()}' AS DATE)")
