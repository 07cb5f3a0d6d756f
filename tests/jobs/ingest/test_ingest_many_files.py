"""Ingest of a day held in many small segment files: a task reads many files and writes one data
file per server, and every file is still accounted for on its own (``ingest_files``, quarantine),
as when each file had a task of its own. (Duplicates across files sharing a data file: the
copied segments of ``test_ingest.py``'s damaged day.)"""

from __future__ import annotations

import pytest
from deltalake import DeltaTable

from jobs import lake
from jobs.ingest.segments import TASK_MAX_FILES, SegmentFile, group_tasks
from jobs.ingest.stage import run_ingest
from jobs.lake.tables import read_table
from schemas.events import EVENTS_TABLE_SCHEMA, QUARANTINE_SCHEMA
from schemas.ingest import INGEST_FILES_SCHEMA
from tests.jobs.logdata import BROKER_A, BROKER_B, DAY, T0, append_lines, register, relative, write_log


def _segment(name: str, size: int, ns: str = "ns-a") -> SegmentFile:
    return SegmentFile(f"{ns}/{DAY}/{name}", f"/x/{ns}/{DAY}/{name}", ns, DAY, size, False, False)


def test_group_tasks_puts_small_files_together_and_a_large_one_alone():
    small = [_segment(f"events-{i:020d}.jsonl", 100) for i in range(10)]
    large = _segment("events-large.jsonl", 5 * 1024 * 1024, "ns-b")
    groups = group_tasks(small + [large], parallelism=2)
    assert [[f.file for f in g] for g in groups] == [[large.file], [f.file for f in small]]  # largest first
    many = [_segment(f"events-{i:020d}.jsonl", 10) for i in range(TASK_MAX_FILES + 5)]
    assert [len(g) for g in group_tasks(many, parallelism=2)] == [TASK_MAX_FILES, 5]
    # a day of mid-sized files is cut into at least as many tasks as run at once
    mid = [_segment(f"events-{i:020d}.jsonl", 1536 * 1024) for i in range(8)]
    assert len(group_tasks(mid, parallelism=4)) == 8 and len(group_tasks(mid, parallelism=1)) == 2


@pytest.mark.spark
def test_hundreds_of_one_line_segments_are_each_accounted_for(spark, tmp_path):
    events, lake_dir = tmp_path / "events", tmp_path / "lake"
    # a segment per event: 240 of ns-a (seqs 1-240), 120 of ns-b (seqs 1-120)
    a = write_log(events, "ns-a", [register(T0 + i, BROKER_A, "heartbeat") for i in range(240)], segment_max_bytes=1)
    b = write_log(events, "ns-b", [register(T0 + i, BROKER_B, "heartbeat") for i in range(120)], segment_max_bytes=1)
    bad = a[::40]  # a second line that is not JSON
    for path in bad:
        append_lines(path, b"garbage")

    result = run_ingest(spark, events, lake_dir, DAY)

    files = {
        r.file: r
        for r in read_table(spark, lake.table_path(lake_dir, lake.INGEST_FILES), INGEST_FILES_SCHEMA).collect()
    }
    assert len(files) == 240 + 120  # one row per file
    assert all(f.accepted + f.quarantined == f.lines_read for f in files.values())
    for seq, path in [*enumerate(a, 1), *enumerate(b, 1)]:
        f = files[relative(events, path)]
        expected = (2, 1, 1) if path in bad else (1, 1, 0)
        assert (f.lines_read, f.accepted, f.quarantined, f.duplicates, f.first_seq, f.last_seq) == (
            *expected,
            0,
            seq,
            seq,
        )
    assert (result.files, result.lines_read, result.quarantined, result.duplicates, result.events_written) == (
        360,
        366,
        6,
        0,
        360,
    )

    quarantined = read_table(spark, lake.table_path(lake_dir, lake.QUARANTINE), QUARANTINE_SCHEMA).collect()
    assert sorted((q.file, q.line, q.raw) for q in quarantined) == sorted(
        (relative(events, p), 2, "garbage") for p in bad
    )
    # each event once, with the file and line it came from
    events_df = read_table(spark, lake.table_path(lake_dir, lake.EVENTS), EVENTS_TABLE_SCHEMA)
    rows = events_df.select("ns", "seq", "file", "line").collect()
    by_key = {(r.ns, r.seq): (r.file, r.line) for r in rows}
    assert len(rows) == len(by_key) == 360
    assert all(by_key[("ns-a", seq)] == (relative(events, p), 1) for seq, p in enumerate(a, 1))
    assert all(by_key[("ns-b", seq)] == (relative(events, p), 1) for seq, p in enumerate(b, 1))
    # a data file per task and server, not per segment
    assert len(DeltaTable(str(lake.table_path(lake_dir, lake.EVENTS))).file_uris()) <= 4
