"""What a table's current version holds on disk: its data files, their bytes and partitions.

Read from the Delta log with ``deltalake`` whichever writer wrote the table, so the housekeeping
commands report the same figures through both engines.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.fs as pafs

from jobs.lake.tables import open_delta
from jobs.storage import locations, settings
from jobs.storage.stores import filesystem_of


@dataclass(frozen=True)
class TableFiles:
    """The data files of a table's current version.

    Attributes:
        files: data files.
        bytes: their total size.
        per_partition: data files per partition (a tuple of partition values, in partition-column order).
        days: the ``date`` of each partition, for tables partitioned by date.
    """

    files: int
    bytes: int
    per_partition: Counter[tuple[Any, ...]]
    days: frozenset[dt.date]

    def crowded_days(self) -> list[dt.date]:
        """Days with a partition of more than one file: what compaction has to work on."""
        return sorted({d for d in (_day_of(key) for key, n in self.per_partition.items() if n > 1) if d is not None})


def _day_of(key: tuple[Any, ...]) -> dt.date | None:
    return key[0] if key and isinstance(key[0], dt.date) else None


def table_files(path: str) -> TableFiles:
    """The data files of the table at ``path`` (its latest version).

    Raises:
        FileNotFoundError: no table there.
        LakeDamaged: its log cannot be read.
    """
    table = open_delta(path)
    partitions = list(table.metadata().partition_columns)
    actions = pa.table(table.get_add_actions(flatten=True)).to_pydict()  # arro3 -> pyarrow
    sizes = actions.get("size_bytes", [])
    keys = list(zip(*(actions[f"partition.{c}"] for c in partitions), strict=True)) if partitions else [()] * len(sizes)
    keys = [tuple(_typed(v) for v in key) for key in keys]
    per_partition = Counter(keys)
    days = frozenset(d for d in (_day_of(k) for k in per_partition) if d is not None)
    return TableFiles(len(sizes), int(sum(sizes)), per_partition, days)


def _typed(value: object) -> object:
    # deltalake gives date partition values as dates already, or as ISO strings in older layouts
    if isinstance(value, str) and len(value) == 10 and value[4] == "-" and value[7] == "-":
        try:
            return dt.date.fromisoformat(value)
        except ValueError:
            return value
    return value


def file_bytes(paths: list[str]) -> int:
    """Total size of the files that exist among ``paths`` (absolute, or ``s3a://``); missing ones count 0."""
    total = 0
    for path in paths:
        fs, inner = filesystem_of(path, settings.current().store if locations.is_remote(path) else None)
        info = fs.get_file_info(inner)
        if info.type == pafs.FileType.File:
            total += info.size
    return total
