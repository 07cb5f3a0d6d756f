"""Which lines of a batch the fast path accepts: parsed with ``pyarrow.json`` against the event
schema and checked with Arrow compute against the rules ``jobs.ingest.checks.with_reason``
applies in the JVM (``schemas.validation.EVENT_RULE`` and the rest).

pyarrow refuses a batch with any line that is not one JSON object of the right types, a key the
schema lacks, a repeated key or lax JSON (single quotes, NaN, comments, trailing commas), so a
refused batch is halved until the lines it refuses are found. A line over the maximum length is
not parsed. Every line not accepted here is judged by the JVM. Runs in the scan's tasks (shipped
by value).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.json as pj

from jobs.ingest.checks import MAX_TIMESTAMP_MILLIS
from jobs.ingest.plan import FastPlan

# Below this many lines a refused range is parsed line by line rather than halved again.
_BISECT_LINES = 8


def classify_lines(
    text: pa.StringArray, problems: pa.Array, folder_ns: str, plan: FastPlan
) -> tuple[np.ndarray, pa.Table | None]:
    """Which lines the fast path accepts, and their parsed events (in line order).

    Args:
        text: the lines, each with its ``"\\n"`` (the last may lack it and then has a problem).
        problems: the read problem of each line, null when none.
        folder_ns: the server folder the file is in.

    Returns:
        ``(fast, parsed)``: a boolean per line, and the parsed rows of the true ones (None when
        there are none).
    """
    n = len(text)
    candidate = np.asarray(pc.is_null(problems).to_numpy(zero_copy_only=False), dtype=bool)
    # Only lines that look like one object are parsed here. A blank line parses to no row at all,
    # which would shift every later row; and pyarrow 21 crashes (SIGSEGV) on a block that starts
    # with a bare `null`. Anything else is Spark's to judge.
    trimmed = pc.utf8_trim_whitespace(text)
    candidate &= _np(pc.starts_with(trimmed, "{")) & _np(pc.ends_with(trimmed, "}"))
    candidate &= _np(pc.less_equal(pc.binary_length(text), plan.max_line_bytes + 1))  # with its "\n"
    ok = np.zeros(n, dtype=bool)
    pieces: list[tuple[np.ndarray, pa.Table]] = []
    index = np.flatnonzero(candidate)
    if len(index):
        for rows, table in _parse(text, index, plan.parse_schema):
            pieces.append((rows, table))
    if not pieces:
        return ok, None
    rows = np.concatenate([r for r, _ in pieces])
    parsed = pa.concat_tables([t for _, t in pieces]) if len(pieces) > 1 else pieces[0][1]
    if len(pieces) > 1:  # bisecting yields ranges in line order already; keep it explicit
        order = np.argsort(rows, kind="stable")
        rows, parsed = rows[order], parsed.take(pa.array(order))
    passed = check_events(parsed, text.take(pa.array(rows)), folder_ns, plan)
    ok[rows[passed]] = True
    return ok, parsed.filter(pa.array(passed)) if not passed.all() else parsed


def _parse(text: pa.StringArray, index: np.ndarray, schema: pa.Schema) -> Iterator[tuple[np.ndarray, pa.Table]]:
    """Parse the lines at ``index``; yield ``(rows, table)`` for every range pyarrow accepts.

    A range is refused as a whole when any of its lines is not a well-typed JSON object; it is
    then halved, so a batch with one bad line costs about ``log2(lines)`` extra parses.
    """
    table = _parse_range(text, index, schema)
    if table is not None:
        yield index, table
        return
    if len(index) <= _BISECT_LINES:
        for i in index:
            one = np.array([i])
            table = _parse_range(text, one, schema)
            if table is not None:
                yield one, table
        return
    half = len(index) // 2
    yield from _parse(text, index[:half], schema)
    yield from _parse(text, index[half:], schema)


def _parse_range(text: pa.StringArray, index: np.ndarray, schema: pa.Schema) -> pa.Table | None:
    """The lines at ``index`` parsed as one NDJSON block, or None if pyarrow refuses any."""
    contiguous = index[-1] - index[0] + 1 == len(index)
    chosen = text.slice(int(index[0]), len(index)) if contiguous else text.take(pa.array(index))
    offsets = np.frombuffer(chosen.buffers()[1], dtype=np.int32)[chosen.offset : chosen.offset + len(chosen) + 1]
    start, end = int(offsets[0]), int(offsets[-1])
    body = chosen.buffers()[2].slice(start, end - start)
    if np.frombuffer(body, dtype=np.uint8)[-1] != 0x0A:
        return None  # only a line with a read problem lacks its "\n", and those are not parsed
    try:
        table = pj.read_json(
            pa.BufferReader(body),
            read_options=pj.ReadOptions(use_threads=False, block_size=max(1 << 20, len(body) + 1)),
            parse_options=pj.ParseOptions(explicit_schema=schema, unexpected_field_behavior="error"),
        )
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    # Blank lines were left out, so a block that gave more rows than lines has a line holding
    # two objects: not an event. Refuse the block and let halving find that line.
    if table.num_rows != len(index):
        return None
    return table.combine_chunks()


def check_events(parsed: pa.Table, text: pa.StringArray, folder_ns: str, plan: FastPlan) -> np.ndarray:
    """A boolean per parsed line: it passes every check ``with_reason`` makes in the JVM."""
    n = parsed.num_rows

    def col(name: str) -> pa.Array:
        return (
            parsed.column(name).combine_chunks()
            if isinstance(parsed.column(name), pa.ChunkedArray)
            else parsed.column(name)
        )

    def present(name: str) -> np.ndarray:
        return np.asarray(pc.is_valid(col(name)).to_numpy(zero_copy_only=False), dtype=bool)

    ok = np.ones(n, dtype=bool)
    for key in plan.required:
        ok &= present(key)
    ok &= _np(pc.equal(col("v"), plan.version))
    ok &= _np(pc.is_in(col("type"), value_set=pa.array(plan.event_types)))
    ok &= _np(pc.greater_equal(col("seq"), 1))
    ok &= _np(pc.equal(col("ns"), folder_ns))
    for key in plan.millis_to_ts.values():
        # a time the lake's microsecond timestamps cannot hold is out_of_range (the JVM says so)
        values = col(key)
        in_range = pc.and_kleene(
            pc.greater_equal(values, -MAX_TIMESTAMP_MILLIS), pc.less_equal(values, MAX_TIMESTAMP_MILLIS)
        )
        ok &= _np(in_range) | ~present(key)
    types = col("type")
    for event_type, (required, may_be_null) in plan.type_rules.items():
        of_type = _np(pc.equal(types, event_type))
        if not of_type.any():
            continue
        for key in required:
            ok &= ~of_type | present(key)
        for key in may_be_null:
            missing = of_type & ~present(key)
            if missing.any():
                # null or absent: only the text tells, as in the JVM check
                rows = np.flatnonzero(missing)
                has_key = _np(pc.match_substring_regex(text.take(pa.array(rows)), f'"{key}"\\s*:'))
                ok[rows[~has_key]] = False
    if plan.not_null_when_present:
        # Absent or null? A line whose text names such a key that read as null, or has an escape
        # that might spell it, is left to the JVM, which tells them apart. One pass of RE2 over the
        # batch for any of the keys, then one per key over the few lines that name one.
        # (On the columns as parsed: combining a list column's chunks would copy its values.)
        absent = {key: _np(pc.is_null(parsed.column(key))) for key in plan.not_null_when_present}
        any_absent = np.logical_or.reduce(list(absent.values()))
        if any_absent.any():
            pattern = "|".join(f'"{key}"' for key in absent) + "|\\\\u"
            rows = np.flatnonzero(any_absent & _np(pc.match_substring_regex(text, pattern)))
            if len(rows):
                named = text.take(pa.array(rows))
                for key, key_absent in absent.items():
                    hit = key_absent[rows] & _np(pc.match_substring_regex(named, f'"{key}"|\\\\u'))
                    ok[rows[hit]] = False
    ok &= ~_nested_bad(parsed, plan.nested)
    return ok


def _np(arr: pa.Array | pa.ChunkedArray) -> np.ndarray:
    """A boolean array as numpy, null counting as false."""
    return np.asarray(pc.fill_null(arr, False).to_numpy(zero_copy_only=False), dtype=bool)


def _nested_bad(parsed: pa.Table, rules: tuple[Any, ...]) -> np.ndarray:
    bad = np.zeros(parsed.num_rows, dtype=bool)
    for name, _, subtree in rules[1]:
        if subtree is not None:
            column = parsed.column(name)
            arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
            bad |= _bad_values(arr, subtree)
    return bad


def _bad_values(arr: pa.Array, rule: tuple[Any, ...]) -> np.ndarray:
    """Per element of ``arr``: a NOT NULL place under it holds a null."""
    bad = np.zeros(len(arr), dtype=bool)
    if rule[0] == "struct":
        valid = np.asarray(pc.is_valid(arr).to_numpy(zero_copy_only=False), dtype=bool)
        for child, (_name, not_null, subtree) in zip(arr.flatten(), rule[1], strict=True):
            if not_null:
                bad |= valid & np.asarray(pc.is_null(child).to_numpy(zero_copy_only=False), dtype=bool)
            if subtree is not None:
                bad |= _bad_values(child, subtree)
    else:  # array
        _, not_null_elements, subtree = rule
        values = arr.flatten()
        if len(values):
            element_bad = np.zeros(len(values), dtype=bool)
            if not_null_elements:
                element_bad |= np.asarray(pc.is_null(values).to_numpy(zero_copy_only=False), dtype=bool)
            if subtree is not None:
                element_bad |= _bad_values(values, subtree)
            if element_bad.any():
                parents = pc.list_parent_indices(arr).to_numpy()
                bad[parents[element_bad]] = True
    return bad
