"""Compare two lakes table by table, row for row.

A restructure or an optimisation of the audit must leave every table as it was. This reads each
Delta table of both lakes with ``deltalake`` (no Spark), hashes every row (a map's entries in any
order, a list's in order), and compares the multisets of row hashes and the schemas; ``summary.json`` of every report is
compared too. Columns that record the run itself (``audit_runs``' finish time and durations) are
left out.

Usage:
    .venv/bin/python bench/lake_diff.py LAKE_A LAKE_B
    .venv/bin/python bench/lake_diff.py --across-writers LAKE_DELTA_RS LAKE_NATIVE
    .venv/bin/python bench/lake_diff.py --config conf/nsaudit.toml s3a://bucket/lake /var/lib/nsaudit/lake

A lake is a folder or ``s3a://bucket/prefix``, reached with ``[storage]`` of ``--config`` (or the
AWS environment variables).

``--across-writers`` compares a lake written through delta-rs with one written through delta-spark:
delta-spark cannot enforce NOT NULL on a field nested in a struct or list, so nested fields'
nullability is left out of the schema comparison (top-level columns' is still compared).

Prints one line per table (``same``, or what differs) and exits 1 when anything differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

RUN_COLUMNS = {"audit_runs": ("finished_ts", "seconds", "stages")}


def _tables(lake: str) -> set[str]:
    from jobs.storage import files

    return {relative.split("/", 1)[0] for relative, _ in files.list_files(str(lake)) if "/_delta_log/" in relative}


def _join(lake, *parts: str) -> str:
    from jobs.storage import locations

    return locations.join(str(lake), *parts)


def _column_hashes(column: pa.Array) -> np.ndarray:
    """One uint64 per row of ``column``; nested values are hashed from their flattened entries
    (a map's entries in any order, a list's in order), without a Python object per row."""
    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    kind = column.type
    if pa.types.is_map(kind):
        entries = _mix(_column_hashes(column.keys) * np.uint64(31) + _column_hashes(column.items))
        hashes = _segment_sums(entries, column.offsets)
    elif pa.types.is_list(kind) or pa.types.is_large_list(kind):
        values = _column_hashes(column.flatten())
        position = np.arange(len(values), dtype=np.uint64) - np.repeat(
            column.offsets.to_numpy()[:-1].astype(np.uint64), np.diff(column.offsets.to_numpy())
        )
        hashes = _segment_sums(_mix(values + _mix(position)), column.offsets)
    elif pa.types.is_struct(kind):
        hashes = np.zeros(len(column), dtype=np.uint64)
        for i in range(kind.num_fields):
            hashes = _mix(hashes * np.uint64(1_000_003) + _column_hashes(column.field(i)))
    else:
        if column.null_count and (pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_boolean(kind)):
            # pandas would turn an integer or boolean column with nulls into floats or objects, whose
            # hashes differ from the same values' without nulls (a struct's field under a null
            # struct is null in one writer's files, a placeholder in another's); nulls are
            # replaced by the null hash below anyway
            column = pc.fill_null(column, pa.scalar(False if pa.types.is_boolean(kind) else 0, kind))
        hashes = pd.util.hash_pandas_object(pd.Series(column.to_pandas()), index=False).to_numpy()
    if column.null_count:
        hashes = np.where(column.is_null().to_numpy(zero_copy_only=False), np.uint64(0x9E3779B97F4A7C15), hashes)
    return hashes


def _mix(values: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: entries summed after it cannot trade parts (a key's value for another's)."""
    with np.errstate(over="ignore"):
        z = values + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _segment_sums(values: np.ndarray, offsets: pa.Array) -> np.ndarray:
    bounds = offsets.to_numpy()
    totals = np.concatenate([np.zeros(1, dtype=np.uint64), np.cumsum(values, dtype=np.uint64)])
    return totals[bounds[1:]] - totals[bounds[:-1]]


def _row_hashes(lake: str | Path, name: str) -> tuple[pa.Schema, pd.Series]:
    from jobs.lake.tables import read_table_arrow  # pyarrow's own filesystem (jobs/lake/delta/arrow.py)

    table = read_table_arrow(_join(lake, name))
    table = table.drop_columns([c for c in RUN_COLUMNS.get(name, ()) if c in table.column_names])
    frame = pd.DataFrame({f.name: _column_hashes(c) for f, c in zip(table.schema, table.columns, strict=True)})
    hashes = pd.util.hash_pandas_object(frame, index=False) if len(frame.columns) else pd.Series(dtype="uint64")
    return table.schema, hashes.sort_values(ignore_index=True)


def _nested_nullable(data_type: pa.DataType) -> pa.DataType:
    """``data_type`` with every field inside it nullable (what delta-spark declares for nested fields)."""
    if pa.types.is_struct(data_type):
        return pa.struct([pa.field(f.name, _nested_nullable(f.type), True) for f in data_type])
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return pa.list_(pa.field(data_type.value_field.name, _nested_nullable(data_type.value_type), True))
    if pa.types.is_map(data_type):
        return pa.map_(_nested_nullable(data_type.key_type), _nested_nullable(data_type.item_type))
    return data_type


def _loosened(schema: pa.Schema) -> pa.Schema:
    return pa.schema([pa.field(f.name, _nested_nullable(f.type), f.nullable) for f in schema])


def compare_table(a: str | Path, b: str | Path, name: str, across_writers: bool = False) -> str | None:
    """``None`` when table ``name`` has the same schema and rows in both lakes, else what differs.

    ``across_writers``: nested fields' nullability is not compared (see the module's docstring).
    """
    schema_a, rows_a = _row_hashes(a, name)
    schema_b, rows_b = _row_hashes(b, name)
    if across_writers:
        schema_a, schema_b = _loosened(schema_a), _loosened(schema_b)
    if schema_a != schema_b:
        return f"schemas differ:\n  {schema_a}\n  {schema_b}"
    if len(rows_a) != len(rows_b):
        return f"{len(rows_a):,} rows against {len(rows_b):,}"
    if not rows_a.equals(rows_b):
        only_a = len(set(rows_a) - set(rows_b))
        return f"{len(rows_a):,} rows each, {only_a:,} of A's not in B"
    return None


def compare_summaries(a: str | Path, b: str | Path) -> list[str]:
    """Differences between the reports' ``summary.json`` files, one line each."""
    from jobs.storage import files

    problems = []
    names = sorted(r for r, _ in files.list_files(_join(a, "reports")) if r.endswith("/summary.json"))
    for relative in names:
        other = _join(b, "reports", relative)
        if not files.exists(other):
            problems.append(f"{other} missing")
        elif json.loads(files.read_text(_join(a, "reports", relative))) != json.loads(files.read_text(other)):
            problems.append(f"reports/{relative} differs")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lake_a", help="a lake folder or s3a://bucket/prefix")
    parser.add_argument("lake_b")
    parser.add_argument("--config", default=None, help="TOML config whose [storage] reaches s3a:// lakes")
    parser.add_argument(
        "--across-writers",
        action="store_true",
        help="the lakes were written through different Delta writers: nested fields' nullability may differ",
    )
    args = parser.parse_args(argv)
    from common.config import load_config
    from jobs.storage import settings

    settings.configure(load_config(args.config))
    names_a, names_b = _tables(args.lake_a), _tables(args.lake_b)
    differ = False
    for name in sorted(names_a | names_b):
        if name not in names_a or name not in names_b:
            print(f"{name:<24} only in {'A' if name in names_a else 'B'}")
            differ = True
            continue
        problem = compare_table(args.lake_a, args.lake_b, name, args.across_writers)
        print(f"{name:<24} {problem or 'same'}")
        differ |= problem is not None
    for problem in compare_summaries(args.lake_a, args.lake_b):
        print(f"reports                  {problem}")
        differ = True
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
