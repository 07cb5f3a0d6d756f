"""The lake reads behind :mod:`jobs.query.lookup`: one server's rows of one day partition, or some
columns of a whole small table, as Arrow tables (JVM-free, through :mod:`jobs.lake.tables`), at a
version of the lake; and the rows of a history table valid at an instant.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, overload

from common.errors import LakeDamaged, UserError
from jobs.storage.problems import describe


@overload
def micros(value: dt.datetime) -> int: ...
@overload
def micros(value: None) -> None: ...
def micros(value: dt.datetime | None) -> int | None:
    """Microseconds since the epoch (the history tables' timestamps as Delta stores them)."""
    if value is None:
        return None
    return (value - _EPOCH) // dt.timedelta(microseconds=1)


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def valid_rows(table: Any, at_ms: int | None) -> list[dict[str, Any]]:
    """Rows valid at ``at_ms`` (``from <= at < to``, ``to`` null = open), or open at the end."""
    import pyarrow as pa
    import pyarrow.compute as pc

    valid_to = table["valid_to_ts"]
    rows: list[dict[str, Any]]
    if at_ms is None:
        rows = table.filter(pc.is_null(valid_to)).to_pylist()
        return rows
    at = pa.scalar(at_ms * 1000, type=table.schema.field("valid_from_ts").type)
    mask = pc.and_(
        pc.less_equal(table["valid_from_ts"], at), pc.or_kleene(pc.is_null(valid_to), pc.greater(valid_to, at))
    )
    rows = table.filter(mask).to_pylist()
    return rows


# A table that did not exist yet at the version asked for (``--version``).
ABSENT = -1


def read_day(path: str, columns: list[str], day: dt.date, ns: str, version: int | None = None) -> Any:
    """One server's rows of one day partition as an Arrow table (JVM-free; see ``jobs.lake.delta.arrow``),
    at ``version`` (None: the latest); ``None`` when the table does not exist (a rebuild has not
    written it yet, or not by that version)."""
    import pyarrow as pa

    from jobs.lake.tables import load_table, read_table_arrow

    if version == ABSENT:
        return None
    try:
        have = {field.name for field in load_table(path, version=version).schema().fields}
        absent = [c for c in columns if c in _ADDED_LATER and c not in have]
        table = read_table_arrow(
            path,
            columns=[c for c in columns if c not in absent],
            filters=[("date", "=", day), ("ns", "=", ns)],
            version=version,
        )
    except FileNotFoundError:
        return None
    except LakeDamaged:
        raise
    except Exception as exc:  # noqa: BLE001 - a store's refusal, a column the log has but the files lack
        raise UserError(f"cannot read {describe(exc, path)}") from None
    for name in absent:  # a lake (or a version of it) written before the column existed: null, as its rows mean
        table = table.append_column(name, pa.nulls(table.num_rows))
    return table.select(columns)


# Nullable columns a lake written by an older nsaudit lacks until its next audit adds them: read as null.
_ADDED_LATER = frozenset({"observed", "resolution_ms"})


def read_all(path: str, columns: list[str], version: int | None = None) -> Any:
    """Some columns of a whole (small) table at ``version``; ``None`` when the table does not exist."""
    from jobs.lake.tables import read_table_arrow

    if version == ABSENT:
        return None
    try:
        return read_table_arrow(path, columns=columns, version=version)
    except FileNotFoundError:
        return None
    except LakeDamaged:
        raise
    except Exception as exc:  # noqa: BLE001 - a store's refusal, a column the log has but the files lack
        raise UserError(f"cannot read {describe(exc, path)}") from None
