"""Ingest: listing and reading segments, checking lines, sequencing, the tables and findings.

Transform tests use small hand-built frames and chispa; the end-to-end tests ingest logs the real
writer produced and then damaged (garbage, wrong types, a cut-short line, lost lines, a clock step
back, copies of a segment) and check what a user would look at: the tables and the findings.
"""

from __future__ import annotations

import datetime as dt
import gzip
import json
from dataclasses import replace

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs import lake
from jobs.ingest.checks import select_checked, with_event, with_reason
from jobs.ingest.findings import (
    agg_duplicate_events_findings,
    agg_quarantined_lines_findings,
    select_clock_step_back_findings,
    select_seq_gap_findings,
)
from jobs.ingest.segments import (
    LINES_SCHEMA,
    SEGMENT_FILES_SCHEMA,
    IngestInputError,
    files_frame,
    gunzip,
    line_batches,
    list_day_segments,
    read_lines,
)
from jobs.ingest.sequence import (
    STATUS_CONFLICT,
    STATUS_DUPLICATE,
    STATUS_KEEP,
    agg_dropped_line_ranges,
    agg_last_events,
    select_kept_pairs,
    with_seq_status,
)
from jobs.ingest.stage import run_ingest
from jobs.ingest.tables import agg_ingest_files
from jobs.lake.findings import finding_columns, write_findings
from jobs.lake.tables import read_table
from schemas.events import EVENTS_TABLE_SCHEMA, QUARANTINE_SCHEMA
from schemas.findings import FINDINGS_SCHEMA
from schemas.ingest import INGEST_FILES_SCHEMA
from tests.jobs.logdata import (
    BROKER_A,
    BROKER_B,
    DAY,
    T0,
    append_lines,
    copy_as,
    drop_lines,
    gzip_copy,
    line_of,
    ns_start,
    ns_stop,
    register,
    relative,
    write_log,
)

PREVIOUS_DAY = DAY - dt.timedelta(days=1)
F_ = "ns-a/2026-11-21/events-00000000000000000001.jsonl"  # a file name for hand-built rows


# ------------------------------------------------------------------------------ listing, reading


def _touch(path, data: bytes = b"") -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_list_day_segments_finds_every_kind_and_skips_the_rest(tmp_path):
    day_dir = tmp_path / "ns-a" / "2026-11-21"
    for name in (
        "events-00000000000000000001.jsonl",
        "events-00000000000000000009.jsonl.gz",
        "events-00000000000000000020.jsonl.open",
        "events-copy.jsonl",
        "_events-x.jsonl",
        ".events-y.jsonl",
        "events-1.jsonl.gz.tmp",
        "notes.txt",
    ):
        _touch(day_dir / name, b"x\n")
    _touch(tmp_path / "ns-a" / "2026-11-22" / "events-00000000000000000030.jsonl", b"x\n")
    _touch(tmp_path / "_scratch" / "2026-11-21" / "events-00000000000000000001.jsonl", b"x\n")
    _touch(tmp_path / "ns-b" / "2026-11-21" / "events-00000000000000000001.jsonl", b"")

    files = list_day_segments(tmp_path, DAY)

    assert [(f.file, f.compressed, f.open_segment, f.bytes) for f in files] == [
        ("ns-a/2026-11-21/events-00000000000000000001.jsonl", False, False, 2),
        ("ns-a/2026-11-21/events-00000000000000000009.jsonl.gz", True, False, 2),
        ("ns-a/2026-11-21/events-00000000000000000020.jsonl.open", False, True, 2),
        ("ns-a/2026-11-21/events-copy.jsonl", False, False, 2),
        ("ns-b/2026-11-21/events-00000000000000000001.jsonl", False, False, 0),
    ]
    assert {f.ns for f in files} == {"ns-a", "ns-b"} and {f.date for f in files} == {DAY}
    assert files[0].path == str(day_dir / "events-00000000000000000001.jsonl")


def test_list_day_segments_refuses_a_missing_dir_and_an_empty_day(tmp_path):
    with pytest.raises(IngestInputError, match="does not exist"):
        list_day_segments(tmp_path / "nope", DAY)
    _touch(tmp_path / "ns-a" / "2026-11-20" / "events-00000000000000000001.jsonl", b"x\n")
    with pytest.raises(IngestInputError, match="no event-log segments for 2026-11-21"):
        list_day_segments(tmp_path, DAY)


def _lines(data: bytes, tail_problem=None) -> list[tuple[int, str, str | None]]:
    rows = []
    for batch in line_batches(data, DAY, "ns-a", F_, tail_problem):
        d = batch.to_pydict()
        assert set(d["file"]) == {F_} and set(d["ns"]) == {"ns-a"} and set(d["date"]) == {DAY}
        rows += zip(d["line"], d["text"], d["read_problem"], strict=True)
    return rows


def test_line_batches_numbers_lines_and_marks_a_cut_short_last_one():
    assert _lines(b'{"a":1}\n\n{"a":2}\n{"a"') == [
        (1, '{"a":1}\n', None),
        (2, "\n", None),
        (3, '{"a":2}\n', None),
        (4, '{"a"', "truncated_line"),
    ]
    assert _lines(b'{"a":1}\n') == [(1, '{"a":1}\n', None)]
    assert _lines(b"") == []


def test_line_batches_keeps_a_bad_utf8_line_escaped(monkeypatch):
    monkeypatch.setattr("jobs.ingest.segments.BATCH_LINES", 2)  # numbering continues across batches
    assert _lines(b'{"a":1}\n{"a":"\xff"}\n{"a":3}\n\xfe') == [
        (1, '{"a":1}\n', None),
        (2, '{"a":"\\xff"}\n', "invalid_utf8"),
        (3, '{"a":3}\n', None),
        (4, "\\xfe", "truncated_line"),
    ]


def test_gunzip_reads_members_stops_at_a_cut_and_names_corruption():
    one, two = gzip.compress(b"a\nb\n"), gzip.compress(b"c\n")
    assert gunzip(one + two) == (b"a\nb\nc\n", None)
    assert gunzip((one + two)[:-8]) == (b"a\nb\nc\n", None)  # the trailer of the last member is gone
    data, problem = gunzip(one + b"not gzip at all")
    assert data == b"a\nb\n" and problem.startswith("corrupt_gzip: ")
    assert _lines(data, problem)[-1] == (3, "", problem)  # the corrupt rest is a visible line


@pytest.mark.spark
def test_read_lines_reads_plain_and_gzip_files_in_parallel(spark, tmp_path):
    plain = tmp_path / "ns-a" / "2026-11-21" / "events-00000000000000000001.jsonl"
    _touch(plain, b'{"a":1}\n{"a":2}\n{"a"')
    _touch(plain.with_name(plain.name + ".gz"), gzip.compress(b'{"a":1}\n'))

    rows = read_lines(spark, list_day_segments(tmp_path, DAY)).orderBy("file", "line").collect()

    assert [(r.file.rsplit("/", 1)[1], r.line, r.text, r.read_problem) for r in rows] == [
        ("events-00000000000000000001.jsonl", 1, '{"a":1}\n', None),
        ("events-00000000000000000001.jsonl", 2, '{"a":2}\n', None),
        ("events-00000000000000000001.jsonl", 3, '{"a"', "truncated_line"),
        ("events-00000000000000000001.jsonl.gz", 1, '{"a":1}\n', None),
    ]


@pytest.mark.spark
def test_files_frame_gives_a_large_file_its_own_task_and_small_ones_one_largest_first_without_python(spark, tmp_path):
    day_dir = tmp_path / "ns-a" / "2026-11-21"
    for i, size in enumerate([10, 3 << 20, 300, 20, 2 << 20, 200, 5]):  # two of a few MiB: a task each
        _touch(day_dir / f"events-{i + 1:020d}.jsonl", b"x" * size)
    files = list_day_segments(tmp_path, DAY)

    files_df = files_frame(spark, files)
    rows = files_df.select(F.spark_partition_id().alias("task"), "file").collect()

    by_task: dict[int, set[str]] = {}
    for r in rows:
        by_task.setdefault(r.task, set()).add(r.file.rsplit("-", 1)[1])
    assert by_task == {
        0: {"00000000000000000002.jsonl"},
        1: {"00000000000000000005.jsonl"},
        2: {f"{i:020d}.jsonl" for i in (1, 3, 4, 6, 7)},
    }
    assert files_df.schema == SEGMENT_FILES_SCHEMA
    # no Python RDD under it: converting its rows would take a second Python worker per task
    query = files_df._jdf.queryExecution()
    assert "PythonRDD" not in query.toRdd().toDebugString()
    assert "ExistingRDD" not in query.executedPlan().toString()  # the broadcast listing neither


# ---------------------------------------------------------------------------------- checking

GOOD = '{"v":1,"ns":"ns-a","seq":1,"ts":1795219200000,"type":"ns_stop","reason":"SIGTERM"}'
REG = (
    '{"v":1,"ns":"ns-a","seq":2,"ts":1795219201234,"type":"register","request_code":103,"channel":"c1",'
    '"remote":"10.0.0.5:50112","cluster":"C","broker_name":"broker-a","broker_id":0,"broker_addr":"10.0.0.5:10911",'
    '"ha_addr":"10.0.0.5:10912","data_version":{"timestamp":1795219100000,"counter":3},"topics_digest":"9f2c",'
    '"topics":[{"topic":"T","read_queue_nums":8,"write_queue_nums":8,"perm":6,"topic_sys_flag":0,"order":false,'
    '"topic_filter_type":"SINGLE_TAG"}],"filter_servers":[],"request_version":401}'
)

REASON_CASES = [
    (GOOD, None),
    (GOOD.replace('"SIGTERM"', "null"), None),  # a "present" key may be null
    (REG, None),
    (" " + GOOD + " \t", None),  # JSON whitespace around the object is fine
    ('{"v":1,"ns":"ns-a","seq":3,"ts":5,"type":"channel_close","broker_addr":null}', None),
    (
        '{"v":1,"ns":"ns-a","seq":3,"ts":5,"type":"channel_close"}',
        "missing_key: broker_addr (required by channel_close)",
    ),
    ("", "empty_line"),
    ("   ", "empty_line"),
    ("garbage", "not_json"),
    ("{'v':1}", "not_json"),
    (GOOD + " x", "not_json"),
    (GOOD + GOOD, "not_json"),
    (GOOD[:-1] + ',"zz":1}, "extra": 2', "not_json"),
    ('{"v":1,"seq":NaN}', "not_json"),
    ("null", "not_object"),
    ("[1,2]", "not_object"),
    ('"text"', "not_object"),
    (GOOD.replace('"seq":1', '"seq":"12"'), "wrong_type: seq"),
    (REG.replace('"broker_id":0', '"broker_id":"0"'), "wrong_type: broker_id"),
    (GOOD.replace('"seq":1', '"seq":1.5'), "wrong_type: seq"),
    (REG.replace('"perm":6', '"perm":"6"'), "wrong_type: topics[].perm"),
    (REG.replace('"counter":3}', '"counter":"3"}'), "wrong_type: data_version.counter"),
    (REG.replace('"broker_addr":"10.0.0.5:10911"', '"broker_addr":12345'), "wrong_type: broker_addr"),
    (REG.replace('"filter_servers":[]', '"filter_servers":["a",1]'), "wrong_type: filter_servers[]"),
    (REG.replace('"filter_servers":[]', '"topics":null,"filter_servers":[]'), "wrong_type: topics (null)"),
    (GOOD[:-1] + ',"junk":1}', "unknown_key: junk"),
    (REG.replace('"perm":6', '"perm":6,"extra":1'), "unknown_key: topics[].extra"),
    (REG.replace('"filter_servers":[]', '"filter_servers":[null]'), "wrong_type: filter_servers[] (null)"),
    (REG.replace('"perm":6,', ""), "missing_key: topics[].perm"),
    (REG.replace('"counter":3', '"counter":null'), "missing_key: data_version.counter"),
    (GOOD.replace('"ts":1795219200000,', ""), "missing_key: ts"),
    (REG.replace('"broker_addr":"10.0.0.5:10911",', ""), "missing_key: broker_addr (required by register)"),
    (REG.replace('"ha_addr":"10.0.0.5:10912",', ""), "missing_key: ha_addr (required by register)"),
    (GOOD.replace('"v":1', '"v":2'), "bad_version: 2"),
    (GOOD.replace("ns_stop", "ns_pause"), "unknown_type: ns_pause"),
    (GOOD.replace('"seq":1', '"seq":0'), "out_of_range: seq 0 < 1"),
    (GOOD.replace('"ns":"ns-a"', '"ns":"ns-b"'), "ns_mismatch: ns-b in a file of ns-a"),
]


def _lines_df(spark, texts, problems=None):
    problems = problems or [None] * len(texts)
    rows = [
        (DAY, "ns-a", F_, i + 1, text, problem) for i, (text, problem) in enumerate(zip(texts, problems, strict=True))
    ]
    return spark.createDataFrame(rows, LINES_SCHEMA)


@pytest.mark.spark
def test_with_reason_names_each_problem(spark):
    texts = [text + "\n" for text, _ in REASON_CASES]
    # a null reason from reading wins over anything else; the cut-short line has no newline
    texts.append(GOOD[:20])
    problems = [None] * len(REASON_CASES) + ["truncated_line"]

    actual_df = _lines_df(spark, texts, problems).transform(with_event).transform(with_reason).select("line", "reason")

    expected = [(i + 1, reason) for i, (_, reason) in enumerate(REASON_CASES)] + [(len(texts), "truncated_line")]
    expected_df = spark.createDataFrame(expected, "line long, reason string")
    assert_df_equality(actual_df, expected_df, ignore_nullable=True, ignore_row_order=True)


@pytest.mark.spark
def test_with_event_parses_with_the_explicit_schema(spark):
    texts = [REG + "\n", GOOD.replace('"SIGTERM"', "null") + "\n", "null\n", '{"v":1,"seq":"12"}\n']
    rows = _lines_df(spark, texts).transform(with_event).orderBy("line").collect()
    reg, null_reason, null_line, wrong = (r for r in rows)
    assert reg.corrupt is False
    assert reg.event.seq == 2 and reg.event.broker_id == 0 and reg.event.data_version.counter == 3
    assert reg.event.topics[0].order is False and reg.event.filter_servers == [] and reg.event.reason is None
    assert null_reason.corrupt is False and null_reason.event.type == "ns_stop" and null_reason.event.reason is None
    assert null_line.corrupt is False and null_line.event is None  # JSON null: no event, not corrupt
    assert wrong.corrupt is True and wrong.event.v == 1 and wrong.event.seq is None  # what parsed is kept


@pytest.mark.spark
def test_select_checked_keeps_the_event_or_the_raw_line(spark):
    checked_df = (
        _lines_df(spark, [GOOD + "\n", "garbage\n", REG + "\n", GOOD[:10]], [None, None, None, "truncated_line"])
        .transform(with_event)
        .transform(with_reason)
        .transform(select_checked)
    )
    rows = {r.line: r for r in checked_df.collect()}
    assert rows[1].reason is None and rows[1].raw is None and rows[1].event.seq == 1 and rows[1].event_hash is not None
    assert rows[2].reason == "not_json" and rows[2].raw == "garbage" and rows[2].event is None
    assert rows[2].event_hash is None
    assert rows[4].raw == GOOD[:10] and rows[4].reason == "truncated_line"
    assert rows[1].event_hash != rows[3].event_hash


# -------------------------------------------------------------------------------- sequencing

KEYS_SCHEMA = "ns string, seq long, ts_ms long, file string, line long, event_hash long"
STATUS_SCHEMA = (
    "ns string, seq long, ts_ms long, file string, line long, status string, kept_file string, "
    "kept_line long, prev_seq long, prev_ts_ms long, prev_file string"
)


@pytest.mark.spark
def test_with_seq_status_keeps_the_first_line_of_each_seq(spark):
    keys = [
        ("ns-a", 1, 100, "a.jsonl", 1, 11),
        ("ns-a", 2, 200, "a.jsonl", 2, 22),
        ("ns-a", 2, 200, "a.jsonl.gz", 2, 22),  # the same event again: duplicate
        ("ns-a", 2, 250, "b.jsonl", 1, 99),  # another event with the same seq: conflict
        ("ns-a", 5, 150, "b.jsonl", 2, 55),  # edge: after a gap, with an earlier ts
        ("ns-b", 2, 300, "c.jsonl", 1, 22),  # same seq on another server: its own
    ]
    actual_df = spark.createDataFrame(keys, KEYS_SCHEMA).transform(with_seq_status)
    expected_df = spark.createDataFrame(
        [
            ("ns-a", 1, 100, "a.jsonl", 1, STATUS_KEEP, None, None, None, None, None),  # nulls: no predecessor
            ("ns-a", 2, 200, "a.jsonl", 2, STATUS_KEEP, None, None, 1, 100, "a.jsonl"),
            ("ns-a", 2, 200, "a.jsonl.gz", 2, STATUS_DUPLICATE, "a.jsonl", 2, None, None, None),
            ("ns-a", 2, 250, "b.jsonl", 1, STATUS_CONFLICT, "a.jsonl", 2, None, None, None),
            ("ns-a", 5, 150, "b.jsonl", 2, STATUS_KEEP, None, None, 2, 200, "a.jsonl"),
            ("ns-b", 2, 300, "c.jsonl", 1, STATUS_KEEP, None, None, None, None, None),
        ],
        STATUS_SCHEMA,
    )
    assert_df_equality(actual_df, expected_df, ignore_nullable=True, ignore_row_order=True)


def _status_df(spark, rows):
    return spark.createDataFrame(rows, STATUS_SCHEMA)


@pytest.mark.spark
def test_select_kept_pairs_links_the_first_event_to_the_previous_day(spark):
    status_df = _status_df(
        spark,
        [
            ("ns-a", 7, 700, "d.jsonl", 1, STATUS_KEEP, None, None, None, None, None),
            ("ns-a", 8, 800, "d.jsonl", 2, STATUS_KEEP, None, None, 7, 700, "d.jsonl"),
            ("ns-a", 8, 800, "d.gz", 2, STATUS_DUPLICATE, "d.jsonl", 2, None, None, None),
            ("ns-b", 1, 100, "e.jsonl", 1, STATUS_KEEP, None, None, None, None, None),  # nothing before it
        ],
    )
    previous_df = spark.createDataFrame(
        [("ns-a", 5, 500, "p.jsonl"), ("ns-c", 9, 900, "q.jsonl")], "ns string, seq long, ts_ms long, file string"
    )

    actual_df = select_kept_pairs(status_df, previous_df)

    expected_df = spark.createDataFrame(
        [("ns-a", 7, 700, "d.jsonl", 1, 5, 500, "p.jsonl"), ("ns-a", 8, 800, "d.jsonl", 2, 7, 700, "d.jsonl")],
        "ns string, seq long, ts_ms long, file string, line long, prev_seq long, prev_ts_ms long, prev_file string",
    )
    assert_df_equality(actual_df, expected_df, ignore_nullable=True, ignore_row_order=True)


@pytest.mark.spark
def test_agg_last_events_takes_the_highest_seq(spark):
    events_df = spark.createDataFrame(
        [("ns-a", 3, 300, "a"), ("ns-a", 9, 100, "b"), ("ns-b", 1, None, "c")],  # null ts: edge of the type
        "ns string, seq long, ts_ms long, file string",
    )
    expected_df = spark.createDataFrame(
        [("ns-a", 9, 100, "b"), ("ns-b", 1, None, "c")], "ns string, seq long, ts_ms long, file string"
    )
    assert_df_equality(agg_last_events(events_df), expected_df, ignore_nullable=True, ignore_row_order=True)


@pytest.mark.spark
def test_agg_dropped_line_ranges_joins_runs_of_lines(spark):
    status_df = _status_df(
        spark,
        [("ns-a", s, 0, "x.gz", s, STATUS_DUPLICATE, "x", s, None, None, None) for s in (1, 2, 3, 5)]
        + [
            ("ns-a", 4, 0, "x.gz", 4, STATUS_CONFLICT, "x", 4, None, None, None),
            ("ns-a", 9, 0, "x.gz", 9, STATUS_KEEP, None, None, None, None, None),  # kept: not dropped
            ("ns-a", 9, 0, "y", 1, STATUS_DUPLICATE, "x.gz", 9, None, None, None),
        ],
    )
    expected_df = spark.createDataFrame([("x.gz", 1, 5), ("y", 1, 1)], "file string, first_line long, last_line long")
    assert_df_equality(agg_dropped_line_ranges(status_df), expected_df, ignore_nullable=True, ignore_row_order=True)


@pytest.mark.spark
def test_agg_ingest_files_balances_every_file(spark):
    listing_df = spark.createDataFrame(
        [
            (DAY, "ns-a", "a", 100, False, False),
            (DAY, "ns-a", "a.gz", 40, True, False),
            (DAY, "ns-a", "empty", 0, False, True),
        ],
        T.StructType([INGEST_FILES_SCHEMA[c] for c in ("date", "ns", "file", "bytes", "compressed", "open_segment")]),
    )
    checked_df = spark.createDataFrame(
        [("a", 1, None), ("a", 2, None), ("a", 3, "not_json"), ("a.gz", 1, None), ("a.gz", 2, None)],
        "file string, line long, reason string",
    )
    status_df = _status_df(
        spark,
        [
            ("ns-a", 1, 0, "a", 1, STATUS_KEEP, None, None, None, None, None),
            ("ns-a", 2, 0, "a", 2, STATUS_KEEP, None, None, None, None, None),
            ("ns-a", 1, 0, "a.gz", 1, STATUS_DUPLICATE, "a", 1, None, None, None),
            ("ns-a", 2, 0, "a.gz", 2, STATUS_CONFLICT, "a", 2, None, None, None),
        ],
    )
    expected_df = spark.createDataFrame(
        [
            (DAY, "ns-a", "a", 100, False, False, 3, 2, 1, 0, 1, 2),
            (DAY, "ns-a", "a.gz", 40, True, False, 2, 1, 1, 1, 1, 1),
            (DAY, "ns-a", "empty", 0, False, True, 0, 0, 0, 0, None, None),  # an empty file still has a row
        ],
        INGEST_FILES_SCHEMA,
    )
    actual_df = agg_ingest_files(listing_df, checked_df, status_df)
    assert_df_equality(actual_df, expected_df, ignore_nullable=True, ignore_row_order=True)


# --------------------------------------------------------------------------------- findings

PAIRS_SCHEMA = (
    "ns string, seq long, ts_ms long, file string, line long, prev_seq long, prev_ts_ms long, prev_file string"
)


def _detail(df):
    return [json.loads(r.detail) for r in df.orderBy("detail").collect()]


@pytest.mark.spark
def test_seq_gap_and_clock_step_back_findings(spark):
    pairs_df = spark.createDataFrame(
        [
            ("ns-a", 2, T0 + 2000, "a", 2, 1, T0 + 1000, "a"),  # adjacent, time moves on: nothing
            ("ns-a", 5, T0 + 5000, "b", 1, 2, T0 + 2000, "a"),  # 2 seqs lost
            ("ns-a", 6, T0 + 4000, "b", 2, 5, T0 + 5000, "b"),  # clock back by 1 s
            ("ns-b", 9, T0 + 100, "c", 1, 4, T0 + 900, "p"),  # edge: gap and step back at once
            ("ns-c", 3, T0 + 3000, "d", 1, 2, T0 + 3000, "d"),  # edge: equal ts is no step back
        ],
        PAIRS_SCHEMA,
    )
    gaps_df = select_seq_gap_findings(pairs_df)
    steps_df = select_clock_step_back_findings(pairs_df)

    def ts(ms):  # PySpark hands timestamps back as naive local datetimes of the same instant
        return dt.datetime.fromtimestamp(ms / 1000)

    assert [(r.kind, r.severity, r.subject, r.ns, r.start_ts, r.end_ts) for r in gaps_df.orderBy("ns").collect()] == [
        ("seq_gap", "warning", "ns-a", "ns-a", ts(T0 + 2000), ts(T0 + 5000)),
        # start <= end even where the clock stepped back
        ("seq_gap", "warning", "ns-b", "ns-b", ts(T0 + 100), ts(T0 + 900)),
    ]
    assert _detail(gaps_df) == [
        {"after_seq": 2, "next_seq": 5, "missing": 2, "files": ["a", "b"]},
        {"after_seq": 4, "next_seq": 9, "missing": 4, "files": ["p", "c"]},
    ]
    assert [(r.kind, r.subject) for r in steps_df.orderBy("ns").collect()] == [
        ("clock_step_back", "ns-a"),
        ("clock_step_back", "ns-b"),
    ]
    assert _detail(steps_df)[0] == {
        "seq": 6,
        "ts": "2026-11-21T00:00:04.000Z",
        "previous_seq": 5,
        "previous_ts": "2026-11-21T00:00:05.000Z",
        "step_ms": 1000,
        "file": "b",
        "line": 2,
    }


@pytest.mark.spark
def test_quarantined_lines_and_duplicate_events_findings(spark):
    quarantine_df = spark.createDataFrame(
        [
            ("f1", 3, "x", "not_json", "ns-a", DAY),
            ("f1", 9, "y", "wrong_type: seq", "ns-a", DAY),
            ("f1", 7, "z", "wrong_type: ts", "ns-a", DAY),
            ("f2", 1, "", "empty_line", "ns-b", DAY),
        ],
        QUARANTINE_SCHEMA,
    )
    findings_df = agg_quarantined_lines_findings(quarantine_df)
    assert [(r.kind, r.severity, r.subject, r.start_ts) for r in findings_df.orderBy("subject").collect()] == [
        ("quarantined_lines", "warning", "ns-a", None),
        ("quarantined_lines", "warning", "ns-b", None),
    ]
    assert _detail(findings_df) == [
        {"file": "f1", "count": 3, "reasons": {"not_json": 1, "wrong_type": 2}, "first_line": 3},
        {"file": "f2", "count": 1, "reasons": {"empty_line": 1}, "first_line": 1},
    ]

    status_df = _status_df(
        spark,
        [
            ("ns-a", 1, 0, "a.gz", 1, STATUS_DUPLICATE, "a", 1, None, None, None),
            ("ns-a", 2, 0, "a.gz", 2, STATUS_DUPLICATE, "b", 1, None, None, None),
            ("ns-a", 3, 0, "a.gz", 3, STATUS_CONFLICT, "a", 3, None, None, None),  # not a duplicate
            ("ns-a", 4, 0, "a", 4, STATUS_KEEP, None, None, None, None, None),
        ],
    )
    dups_df = agg_duplicate_events_findings(status_df)
    assert [(r.kind, r.severity, r.subject) for r in dups_df.collect()] == [("duplicate_events", "info", "ns-a")]
    assert _detail(dups_df) == [{"file": "a.gz", "count": 2, "first_seq": 1, "last_seq": 2, "duplicate_of": ["a", "b"]}]


@pytest.mark.spark
def test_finding_columns_and_write_findings_replace_only_their_partition(spark, tmp_path):
    rows_df = spark.createDataFrame([("t1", None), ("t2", 5)], "topic string, n long")
    # the positional form, with date and category, and the keyword form without them
    positional_df = rows_df.select(
        *finding_columns(
            DAY,
            "distribution",
            "single_broker_topic",
            "warning",
            F.col("topic"),
            None,
            None,
            None,
            F.struct(F.col("n")),
        )
    )
    # every column but the links, which write_findings adds
    assert positional_df.columns == [n for n in FINDINGS_SCHEMA.names if n not in ("finding_id", "incident_id")]
    keyword_df = rows_df.select(
        *finding_columns(kind="queue_skew", severity=F.lit("info"), subject=F.col("topic"), detail={"n": F.col("n")})
    )
    write_findings(positional_df, tmp_path, DAY, "distribution")
    write_findings(keyword_df, tmp_path, DAY, "consistency")
    write_findings(keyword_df.where("subject = 't1'"), tmp_path, DAY, "consistency")  # replaces its own

    found = read_table(spark, lake.table_path(tmp_path, lake.FINDINGS), FINDINGS_SCHEMA)
    assert sorted((r.category, r.kind, r.subject, r.detail) for r in found.collect()) == [
        ("consistency", "queue_skew", "t1", '{"n":null}'),
        ("distribution", "single_broker_topic", "t1", '{"n":null}'),
        ("distribution", "single_broker_topic", "t2", '{"n":5}'),
    ]
    with pytest.raises(ValueError, match="category"):
        finding_columns(DAY, "weather", "k", "info", F.lit("s"))
    with pytest.raises(ValueError, match="severity"):
        finding_columns(DAY, "telemetry", "k", "fatal", F.lit("s"))
    with pytest.raises(Exception, match="bad finding severity"):
        rows_df.select(*finding_columns(kind="k", severity=F.lit("fatal"), subject=F.col("topic"))).collect()


# ------------------------------------------------------------------------------- end to end

WRONG_TYPE_LINE = b'{"v":1,"ns":"ns-a","seq":"16","ts":1795219300000,"type":"ns_stop","reason":"x"}'


def e2e(test):
    """Mark an end-to-end test: the first one sets up three ingests (the previous day, the day,
    the day again), which on a busy machine takes longer than the default per-test limit."""
    for mark in (pytest.mark.spark, pytest.mark.slow, pytest.mark.timeout(1800)):
        test = mark(test)
    return test


@pytest.fixture(scope="module")
def damaged(tmp_path_factory):
    """Real writer logs over two days, then damaged; see the comments for what each file holds."""
    events = tmp_path_factory.mktemp("ingest") / "events"
    # ns-a, previous day: seqs 1-3. This day: seqs 4-12 in one closed segment, of which 4 (the
    # day's first: a gap across midnight) and 8-9 are lost; 11 steps the clock back by 20 s.
    day_events = [register(T0 + 1000, BROKER_A, "heartbeat"), register(T0 + 2000, BROKER_B)]
    day_events += [register(T0 + 30_000 * i, BROKER_A, "heartbeat") for i in range(1, 8)]
    day_events[7]["ts"] = day_events[6]["ts"] - 20_000  # seq 11
    write_log(
        events,
        "ns-a",
        [ns_start(T0 - 7_200_000), register(T0 - 7_100_000, BROKER_A), register(T0 - 7_000_000, BROKER_A, "heartbeat")]
        + day_events,
    )
    closed = events / "ns-a" / "2026-11-21" / "events-00000000000000000004.jsonl"
    drop_lines(closed, 1, 5, 6)
    # seqs 13-15 in the segment still open, then garbage, a wrong type and a line cut short
    opened = write_log(
        events, "ns-a", [register(T0 + 300_000 + i, BROKER_A, "heartbeat") for i in range(3)], close=False
    )[-1]
    append_lines(opened, b"garbage", WRONG_TYPE_LINE)
    append_lines(opened, b'{"v":1,"ns":"ns-a","seq":16,"ts":17952', newline=False)
    # after the writer's last start: it would take a .gz beside its plain segment for a finished
    # compression and remove the plain one
    gz = gzip_copy(closed)  # the same segment gzipped beside it
    copy = copy_as(closed, "events-copy.jsonl")  # and copied under another name
    # ns-b: seqs 1-3, and a second file repeating seq 3 with other content, then seq 4
    first_b = write_log(events, "ns-b", [ns_start(T0 + 10), register(T0 + 20, BROKER_A), ns_stop(T0 + 30)])[0]
    other_b = first_b.with_name("events-00000000000000000003.jsonl")
    stop = line_of(first_b, 3)
    append_lines(
        other_b,
        stop.replace(b'"ts":1795219200030', b'"ts":1795219200031'),
        stop.replace(b'"seq":3', b'"seq":4').replace(b'"ts":1795219200030', b'"ts":1795219200040'),
    )
    return {
        "events": events,
        "closed": closed,
        "gz": gz,
        "copy": copy,
        "opened": opened,
        "first_b": first_b,
        "other_b": other_b,
    }


def _day_rows(spark, lake_dir, name, schema, day=DAY):
    df = read_table(spark, lake.table_path(lake_dir, name), schema, where={"date": day})
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.fixture(scope="module")
def ingested(spark, damaged, tmp_path_factory):
    """The previous day, then the day twice; the tables after each run of the day."""
    lake_dir = tmp_path_factory.mktemp("lake")
    run_ingest(spark, damaged["events"], lake_dir, PREVIOUS_DAY)
    runs = []
    for _ in range(2):
        result = run_ingest(spark, damaged["events"], lake_dir, DAY)
        tables = {
            name: _day_rows(spark, lake_dir, name, schema)
            for name, schema in (
                (lake.EVENTS, EVENTS_TABLE_SCHEMA),
                (lake.QUARANTINE, QUARANTINE_SCHEMA),
                (lake.INGEST_FILES, INGEST_FILES_SCHEMA),
                (lake.FINDINGS, FINDINGS_SCHEMA),
            )
        }
        runs.append((result, tables))
    return {"lake": lake_dir, "runs": runs, **damaged}


def _canonical(rows):
    """Rows holding dicts, in an order that does not depend on how they were built."""
    return sorted(rows, key=lambda row: json.dumps(row, sort_keys=True, default=str))


def _rel(damaged, key):
    return relative(damaged["events"], damaged[key])


@e2e
def test_every_line_is_accounted_for(ingested):
    result, tables = ingested["runs"][0]
    files = {row[2]: dict(zip(INGEST_FILES_SCHEMA.names, row, strict=True)) for row in tables[lake.INGEST_FILES]}
    for f in files.values():
        assert f["accepted"] + f["quarantined"] == f["lines_read"], f
    counts = {
        k: (f["lines_read"], f["accepted"], f["quarantined"], f["duplicates"], f["first_seq"], f["last_seq"])
        for k, f in files.items()
    }
    assert counts == {
        _rel(ingested, "closed"): (6, 6, 0, 0, 5, 12),
        _rel(ingested, "gz"): (6, 6, 0, 6, 5, 12),
        _rel(ingested, "copy"): (6, 6, 0, 6, 5, 12),
        _rel(ingested, "opened"): (6, 3, 3, 0, 13, 15),
        _rel(ingested, "first_b"): (3, 3, 0, 0, 1, 3),
        _rel(ingested, "other_b"): (2, 1, 1, 0, 4, 4),
    }
    assert files[_rel(ingested, "gz")]["compressed"] and files[_rel(ingested, "opened")]["open_segment"]
    assert (
        result.files,
        result.lines_read,
        result.accepted,
        result.duplicates,
        result.quarantined,
        result.events_written,
    ) == (6, 29, 25, 12, 4, 13)


@e2e
def test_events_hold_each_event_once_with_lake_types(ingested):
    _, tables = ingested["runs"][0]
    events = [dict(zip(EVENTS_TABLE_SCHEMA.names, row, strict=True)) for row in tables[lake.EVENTS]]
    keys = sorted((e["ns"], e["seq"]) for e in events)
    assert keys == [("ns-a", s) for s in (5, 6, 7, 10, 11, 12, 13, 14, 15)] + [("ns-b", s) for s in (1, 2, 3, 4)]
    by_key = {(e["ns"], e["seq"]): e for e in events}
    first = by_key[("ns-a", 5)]
    assert first["file"] == _rel(ingested, "closed") and first["line"] == 1 and first["date"] == DAY
    # PySpark hands timestamps back as naive local datetimes of the same instant
    assert first["ts_ms"] == T0 + 2000 and first["ts"] == dt.datetime.fromtimestamp((T0 + 2000) / 1000)
    assert first["type"] == "register" and [t["topic"] for t in first["topics"]] == ["TopicOther", "TopicTest"]
    assert by_key[("ns-b", 3)]["ts_ms"] == T0 + 30  # the first of the conflicting lines is kept


@e2e
def test_quarantine_names_file_line_raw_and_reason(ingested):
    _, tables = ingested["runs"][0]
    rows = [dict(zip(QUARANTINE_SCHEMA.names, row, strict=True)) for row in tables[lake.QUARANTINE]]
    opened, other_b = _rel(ingested, "opened"), _rel(ingested, "other_b")
    assert sorted((r["file"], r["line"], r["reason"], r["ns"]) for r in rows) == [
        (opened, 4, "not_json", "ns-a"),
        (opened, 5, "wrong_type: seq", "ns-a"),
        (opened, 6, "truncated_line", "ns-a"),
        (other_b, 1, f"duplicate_seq_conflict: {_rel(ingested, 'first_b')}:3", "ns-b"),
    ]
    raws = {(r["file"], r["line"]): r["raw"] for r in rows}
    assert raws[(opened, 5)] == WRONG_TYPE_LINE.decode()
    assert raws[(opened, 6)] == '{"v":1,"ns":"ns-a","seq":16,"ts":17952'
    assert raws[(other_b, 1)] == line_of(ingested["other_b"], 1).decode()


@e2e
def test_findings_name_each_problem(ingested):
    _, tables = ingested["runs"][0]
    findings = [dict(zip(FINDINGS_SCHEMA.names, row, strict=True)) for row in tables[lake.FINDINGS]]
    assert {(f["date"], f["category"]) for f in findings} == {(DAY, "telemetry")}
    got = _canonical((f["kind"], f["severity"], f["subject"], f["ns"], json.loads(f["detail"])) for f in findings)
    previous = "ns-a/2026-11-20/events-00000000000000000001.jsonl"
    closed, gz, copy = _rel(ingested, "closed"), _rel(ingested, "gz"), _rel(ingested, "copy")
    assert got == _canonical(
        [
            (
                "seq_gap",
                "warning",
                "ns-a",
                "ns-a",
                {"after_seq": 3, "next_seq": 5, "missing": 1, "files": [previous, closed]},
            ),
            ("seq_gap", "warning", "ns-a", "ns-a", {"after_seq": 7, "next_seq": 10, "missing": 2, "files": [closed]}),
            (
                "clock_step_back",
                "warning",
                "ns-a",
                "ns-a",
                {
                    "seq": 11,
                    "ts": "2026-11-21T00:02:10.000Z",
                    "previous_seq": 10,
                    "previous_ts": "2026-11-21T00:02:30.000Z",
                    "step_ms": 20_000,
                    "file": closed,
                    "line": 5,
                },
            ),
            (
                "quarantined_lines",
                "warning",
                "ns-a",
                "ns-a",
                {
                    "file": _rel(ingested, "opened"),
                    "count": 3,
                    "first_line": 4,
                    "reasons": {"not_json": 1, "truncated_line": 1, "wrong_type": 1},
                },
            ),
            (
                "quarantined_lines",
                "warning",
                "ns-b",
                "ns-b",
                {
                    "file": _rel(ingested, "other_b"),
                    "count": 1,
                    "first_line": 1,
                    "reasons": {"duplicate_seq_conflict": 1},
                },
            ),
            (
                "duplicate_events",
                "info",
                "ns-a",
                "ns-a",
                {"file": gz, "count": 6, "first_seq": 5, "last_seq": 12, "duplicate_of": [closed]},
            ),
            (
                "duplicate_events",
                "info",
                "ns-a",
                "ns-a",
                {"file": copy, "count": 6, "first_seq": 5, "last_seq": 12, "duplicate_of": [closed]},
            ),
        ]
    )
    result, _ = ingested["runs"][0]
    assert result.findings == {"clock_step_back": 1, "duplicate_events": 2, "quarantined_lines": 2, "seq_gap": 2}


@e2e
def test_rerunning_the_day_gives_the_same_tables(ingested):
    (first_result, first), (second_result, second) = ingested["runs"]
    assert second_result == first_result
    for name in first:
        assert second[name] == first[name], name
    keys = [(row[1], row[2]) for row in second[lake.EVENTS]]  # (ns, seq)
    assert len(keys) == len(set(keys))


@e2e
def test_the_previous_day_is_left_alone(spark, ingested):
    rows = _day_rows(spark, ingested["lake"], lake.EVENTS, EVENTS_TABLE_SCHEMA, PREVIOUS_DAY)
    assert [(r[1], r[2]) for r in rows] == [("ns-a", 1), ("ns-a", 2), ("ns-a", 3)]


def _data_files(table_dir) -> set[str]:
    return {str(p.relative_to(table_dir)) for p in table_dir.rglob("*.parquet")}


@pytest.mark.spark
def test_a_failed_scan_leaves_the_previous_version_and_no_data_file(spark, tmp_path, monkeypatch):
    """A segment that vanishes between the listing and the scan (a retention job, an operator)
    fails the run. The other files' tasks wrote their events' data files, some after the job had
    failed: none may stay behind, and the table keeps its previous version."""
    from deltalake import DeltaTable

    import jobs.ingest.stage as ingest

    events, lake_dir = tmp_path / "events", tmp_path / "lake"
    for ns in ("ns-a", "ns-b", "ns-c"):
        write_log(
            events, ns, [ns_start(T0)] + [register(T0 + 30_000 * i, BROKER_A, "heartbeat") for i in range(1, 2_000)]
        )
    run_ingest(spark, events, lake_dir, DAY)
    table_dir = lake_dir / lake.EVENTS
    version, files_before = DeltaTable(str(table_dir)).version(), _data_files(table_dir)

    listed = ingest.list_day_segments(events, DAY)
    gone = replace(
        listed[0], file="ns-a/2026-11-21/events-gone.jsonl", path=str(events / "gone.jsonl"), bytes=1 << 40
    )  # listed, then removed: the largest, so its task starts first
    monkeypatch.setattr(ingest, "list_day_segments", lambda *_: [gone, *listed])
    with pytest.raises(Exception, match="gone.jsonl"):
        run_ingest(spark, events, lake_dir, DAY)

    assert DeltaTable(str(table_dir)).version() == version
    assert _data_files(table_dir) == files_before
    monkeypatch.undo()
    assert run_ingest(spark, events, lake_dir, DAY).events_written == 3 * 2_000
