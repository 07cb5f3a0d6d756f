"""Compare two lakes table by table, row for row.

A restructure or an optimisation of the audit must leave every table as it was. This reads each
Delta table of both lakes with ``deltalake`` (no Spark), hashes every row (nested values as sorted
JSON), and compares the multisets of row hashes and the schemas; ``summary.json`` of every report is
compared too. Columns that record the run itself (``audit_runs``' finish time and durations) are
left out.

Usage:
    .venv/bin/python bench/lake_diff.py LAKE_A LAKE_B

Prints one line per table (``same``, or what differs) and exits 1 when anything differs.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa

RUN_COLUMNS = {"audit_runs": ("finished_ts", "seconds", "stages")}


def _tables(lake: Path) -> set[str]:
    return {p.name for p in lake.iterdir() if (p / "_delta_log").is_dir()}


def _row_hashes(lake: Path, name: str) -> tuple[pa.Schema, pd.Series]:
    from deltalake import DeltaTable

    table = DeltaTable(str(lake / name)).to_pyarrow_table()
    table = table.drop_columns([c for c in RUN_COLUMNS.get(name, ()) if c in table.column_names])
    columns = {}
    for field, column in zip(table.schema, table.columns):
        if pa.types.is_nested(field.type):
            columns[field.name] = [json.dumps(v, sort_keys=True, default=str) for v in column.to_pylist()]
        else:
            columns[field.name] = column.to_pandas()
    frame = pd.DataFrame(columns)
    hashes = pd.util.hash_pandas_object(frame, index=False) if len(frame.columns) else pd.Series(dtype="uint64")
    return table.schema, hashes.sort_values(ignore_index=True)


def compare_table(a: Path, b: Path, name: str) -> str | None:
    """``None`` when table ``name`` has the same schema and rows in both lakes, else what differs."""
    schema_a, rows_a = _row_hashes(a, name)
    schema_b, rows_b = _row_hashes(b, name)
    if schema_a != schema_b:
        return f"schemas differ:\n  {schema_a}\n  {schema_b}"
    if len(rows_a) != len(rows_b):
        return f"{len(rows_a):,} rows against {len(rows_b):,}"
    if not rows_a.equals(rows_b):
        only_a = len(set(rows_a) - set(rows_b))
        return f"{len(rows_a):,} rows each, {only_a:,} of A's not in B"
    return None


def compare_summaries(a: Path, b: Path) -> list[str]:
    """Differences between the reports' ``summary.json`` files, one line each."""
    problems = []
    for summary in sorted((a / "reports").glob("*/summary.json")):
        other = b / summary.relative_to(a)
        if not other.exists():
            problems.append(f"{other} missing")
        elif json.loads(summary.read_text()) != json.loads(other.read_text()):
            problems.append(f"{summary.relative_to(a)} differs")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lake_a", type=Path)
    parser.add_argument("lake_b", type=Path)
    args = parser.parse_args(argv)
    names_a, names_b = _tables(args.lake_a), _tables(args.lake_b)
    differ = False
    for name in sorted(names_a | names_b):
        if name not in names_a or name not in names_b:
            print(f"{name:<24} only in {'A' if name in names_a else 'B'}")
            differ = True
            continue
        problem = compare_table(args.lake_a, args.lake_b, name)
        print(f"{name:<24} {problem or 'same'}")
        differ |= problem is not None
    for problem in compare_summaries(args.lake_a, args.lake_b):
        print(f"reports                  {problem}")
        differ = True
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())
