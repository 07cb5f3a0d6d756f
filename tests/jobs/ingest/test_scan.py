"""Ingest's fast path (``jobs.ingest.scan``) against the JVM check it stands in for.

The fast path may refuse a line the JVM would accept (it then goes the slow way), but it must
never accept a line the JVM refuses, nor read an accepted line differently. These tests hold it to
that on thousands of generated good and damaged lines, and check that the two ways of sequencing
a day (files already in seq order, or the general window) give the same tables.
"""

from __future__ import annotations

import datetime as dt
import json
import random

import numpy as np
import pyarrow as pa
import pytest
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

import jobs.ingest.stage as ingest_module
from jobs import lake
from jobs.ingest.checks import checked_schema, select_checked, with_event, with_reason
from jobs.ingest.classifier import classify_lines
from jobs.ingest.datafiles import event_batch
from jobs.ingest.plan import build_plan
from jobs.ingest.scan import FileSummary
from jobs.ingest.segments import LINES_SCHEMA, line_batches
from jobs.ingest.stage import run_ingest
from jobs.ingest.tables import select_events
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
    drop_lines,
    expire,
    heartbeat_904,
    ns_start,
    ns_stop,
    register,
    write_log,
)

FILE_STRUCT = T.StructType([f for f in EVENTS_TABLE_SCHEMA.fields if f.name not in ("date", "ns")])


def _plan(tmp_path) -> object:
    return build_plan(str(tmp_path / "events"), ("date", "ns"), to_arrow_schema(FILE_STRUCT))


def _good_events() -> list[dict]:
    """One event of every shape the writer makes, numbered from seq 1, as JSON-ready dicts."""
    events = [
        ns_start(T0),
        register(T0 + 1, BROKER_A),
        register(T0 + 2, BROKER_B, "heartbeat"),
        heartbeat_904(T0 + 3, BROKER_A),
        expire(T0 + 4, BROKER_B, T0 - 200_000),
        {"ts": T0 + 5, "type": "channel_close", "channel": "c9", "broker_addr": None},
        {
            "ts": T0 + 6,
            "type": "wipe_write_perm",
            "request_code": 205,
            "channel": "c2",
            "remote": "10.0.0.9:1",
            "broker_name": "broker-a",
            "topic_count": 3,
        },
        {
            "ts": T0 + 7,
            "type": "delete_topic",
            "request_code": 216,
            "channel": "c2",
            "remote": "10.0.0.9:1",
            "topic": "TopicTest",
            "cluster": None,
        },
        {
            "ts": T0 + 8,
            "type": "rejected",
            "reason": "malformed_frame",
            "detail": "bad length",
            "frame_length": -5,
            "serialize_type": 0,
            "header_length": 3,
        },
        {
            "ts": T0 + 9,
            "type": "rejected",
            "reason": "log_unavailable",
            "detail": "[Errno 28] No space left on device",
            "refused_count": 12,
            "unlogged_count": 0,
            "outage_ms": 1943,
            "refreshes": [{"broker_addr": "10.0.0.5:10911", "last_update_ts": T0 + 8}],
        },
        {**ns_stop(T0 + 10), "silent_closes": 32852},
    ]
    out = []
    for seq, event in enumerate(events, 1):
        event = {"v": 1, "ns": "ns-a", "seq": seq, **event}
        if "data_version" in event:
            dv = event["data_version"]
            event["data_version"] = {"timestamp": dv.timestamp, "counter": dv.counter}
        if "topics" in event:
            event["topics"] = [
                {
                    "topic": t.topic,
                    "read_queue_nums": t.read_queue_nums,
                    "write_queue_nums": t.write_queue_nums,
                    "perm": t.perm,
                    "topic_sys_flag": t.topic_sys_flag,
                    "order": t.order,
                    "topic_filter_type": t.topic_filter_type,
                }
                for t in event["topics"]
            ]
        out.append(event)
    return out


def _dump(event: dict) -> str:
    return json.dumps(event, separators=(",", ":"))


# Damage to a good event's text or value; each returns the new line text (without "\n").
def _mutations(rng: random.Random):
    def set_key(key, value):
        return lambda e: _dump({**e, key: value})

    def drop_key(key):
        return lambda e: _dump({k: v for k, v in e.items() if k != key})

    def topic_edit(edit):
        def apply(e):
            if not e.get("topics"):
                return _dump(e)
            topics = [dict(t) for t in e["topics"]]
            edit(topics)
            return _dump({**e, "topics": topics})

        return apply

    key = rng.choice(
        [
            "v",
            "ns",
            "seq",
            "ts",
            "type",
            "broker_addr",
            "broker_id",
            "cluster",
            "ha_addr",
            "request_code",
            "topics",
            "data_version",
            "filter_servers",
            "last_update_ts",
            "reason",
        ]
    )
    return [
        drop_key(key),
        set_key(key, None),
        set_key(key, "12"),
        set_key(key, 12),
        set_key(key, 1.5),
        set_key(key, True),
        set_key(key, [1]),
        set_key(key, {"a": 1}),
        set_key("v", 2),
        set_key("type", "bogus"),
        set_key("seq", 0),
        set_key("seq", -3),
        set_key("seq", 2**63),
        set_key("ns", "ns-b"),
        set_key("ts", 2**62),
        set_key("broker_id", 2**40),
        set_key("request_code", 2**40),
        set_key("Seq", 5),
        set_key("unknown_key", {"deep": [1, None, {"x": "y"}]}),
        set_key("data_version", {"timestamp": 1}),
        set_key("data_version", {"timestamp": 1, "counter": None}),
        set_key("data_version", {"timestamp": 1, "counter": "2"}),
        set_key("filter_servers", [None]),
        set_key("filter_servers", ["a", 1]),
        set_key("topics", [None]),
        set_key("topics", []),
        topic_edit(lambda ts: ts[0].pop("perm")),
        topic_edit(lambda ts: ts[0].update(perm=None)),
        topic_edit(lambda ts: ts[0].update(order="false")),
        topic_edit(lambda ts: ts[0].update(extra=1)),
        lambda e: _dump(e)[:-1] + ',"seq":7}',  # a repeated key
        lambda e: _dump(e)[:-1] + ',"seq":"7"}',
        lambda e: _dump(e) + " trailing",
        lambda e: _dump(e) + _dump(e),  # two objects on one line
        lambda e: _dump(e) + "  ",
        lambda e: "  " + _dump(e),
        lambda e: _dump(e) + "\r",
        lambda e: _dump(e).replace('"', "'"),
        lambda e: _dump(e)[:-1] + ",}",
        lambda e: _dump(e)[: len(_dump(e)) // 2],
        lambda e: _dump(e).replace(":1,", ":01,", 1),
        lambda e: _dump(e).replace('"ns-a"', '"ns-\\u0061"'),
        lambda e: _dump(e).replace('"ns-a"', '"ns\ta"'),
        lambda e: _dump({**e, "detail": 'caf\u00e9 \\ " \u2603'}),
        lambda e: "",
        lambda e: "   ",
        lambda e: "[1,2]",
        lambda e: "null",
        lambda e: "42",
        lambda e: '"text"',
    ]


def _generated_lines(seed: int, count: int) -> list[str]:
    rng = random.Random(seed)
    good = _good_events()
    lines = []
    for _ in range(count):
        event = dict(rng.choice(good))
        if rng.random() < 0.4:
            lines.append(_dump(event))  # untouched
        else:
            lines.append(rng.choice(_mutations(rng))(event))
    return lines


def _fast_path(lines: list[str], plan) -> tuple[np.ndarray, list[dict]]:
    data = ("\n".join(lines) + "\n").encode()
    fast_all, rows = [], []
    for batch in line_batches(data, DAY, "ns-a", "ns-a/2026-11-21/f.jsonl"):
        fast, parsed = classify_lines(batch.column(4), batch.column(5), "ns-a", plan)
        fast_all.append(fast)
        if parsed is not None:
            numbers = batch.column(3).filter(pa.array(fast))
            rows += event_batch(parsed, numbers, "ns-a/2026-11-21/f.jsonl", plan).to_pylist()

    # as Spark hands them back: naive UTC datetimes
    def naive(v):
        return v.replace(tzinfo=None) if isinstance(v, dt.datetime) else v

    return np.concatenate(fast_all), [{k: naive(v) for k, v in r.items()} for r in rows]


def _jvm_path(spark, lines: list[str]) -> tuple[dict[int, str | None], dict[int, dict]]:
    data = ("\n".join(lines) + "\n").encode()
    batches = list(line_batches(data, DAY, "ns-a", "ns-a/2026-11-21/f.jsonl"))
    lines_df = spark.createDataFrame(pa.Table.from_batches(batches).to_pandas(), LINES_SCHEMA)
    checked_df = lines_df.transform(with_event).transform(with_reason).transform(select_checked).cache()
    reasons = {r["line"]: r["reason"] for r in checked_df.select("line", "reason").collect()}
    no_drops = spark.createDataFrame([], "file string, first_line long, last_line long")
    events = {r["line"]: r.asDict(recursive=True) for r in select_events(checked_df, no_drops).collect()}
    checked_df.unpersist()
    return reasons, events


def test_the_checked_schema_is_what_the_checks_give(spark):
    """A day whose every line the fast path accepted skips the JVM's checks and stands an empty
    frame of ``checked_schema`` in for their rows: the same columns, types and nullability."""
    data = (_dump(_good_events()[0]) + "\n").encode()
    batches = list(line_batches(data, DAY, "ns-a", "ns-a/2026-11-21/f.jsonl"))
    lines_df = spark.createDataFrame(pa.Table.from_batches(batches).to_pandas(), LINES_SCHEMA)
    checked = lines_df.transform(with_event).transform(with_reason).transform(select_checked)
    assert checked_schema(lines_df.schema) == checked.schema


def test_classify_lines_finds_the_bad_lines_among_good_ones(tmp_path):
    plan = _plan(tmp_path)
    good = [_dump(e) for e in _good_events()] * 30
    bad_at = {0, 17, 18, 150, len(good) - 1}
    lines = [("garbage" if i in bad_at else line) for i, line in enumerate(good)]
    lines.insert(40, "")  # a blank line shifts nothing
    fast, rows = _fast_path(lines, plan)
    refused = {i for i, ok in enumerate(fast) if not ok}
    expected = {i if i < 40 else i + 1 for i in bad_at} | {40}
    assert refused == expected
    assert [r["line"] for r in rows] == [i + 1 for i in range(len(lines)) if i not in expected]
    # every row is the event of its line
    by_line = {i + 1: json.loads(line) for i, line in enumerate(lines) if i not in expected}
    assert all(r["seq"] == by_line[r["line"]]["seq"] and r["type"] == by_line[r["line"]]["type"] for r in rows)


def test_every_unchanged_event_shape_takes_the_fast_path(tmp_path):
    fast, rows = _fast_path([_dump(e) for e in _good_events()], _plan(tmp_path))
    assert fast.all()
    assert [r["type"] for r in rows] == [e["type"] for e in _good_events()]


def test_file_summary_tracks_order_and_steps_across_batches():
    summary = FileSummary()
    summary.add(np.array([5, 6, 7]), np.array([100, 101, 90]), np.array([1, 2, 3]))
    summary.add(np.array([9, 10]), np.array([95, 96]), np.array([5, 6]))
    assert summary.first == [5, 100, 1] and summary.last == [10, 96, 6] and summary.fast == 5
    assert summary.increasing
    # 6 -> 7 steps the clock back; 7 -> 9 skips a seq (across the batch boundary)
    assert summary.steps == [[6, 101, 7, 90, 3], [7, 90, 9, 95, 5]]
    summary.add(np.array([8]), np.array([97]), np.array([7]))
    assert not summary.increasing


@pytest.mark.spark
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_the_fast_path_accepts_only_what_the_jvm_accepts_and_reads_it_alike(spark, tmp_path, seed):
    lines = _generated_lines(seed, 1500)
    fast, rows = _fast_path(lines, _plan(tmp_path))
    reasons, jvm_events = _jvm_path(spark, lines)
    assert len(reasons) == len(lines)
    for row in rows:
        line = row["line"]
        assert reasons[line] is None, (lines[line - 1], reasons[line])
        expected = {k: v for k, v in jvm_events[line].items() if k not in ("date", "ns")}
        assert row == expected, lines[line - 1]
    # and the shortcut is worth having: untouched events all take it
    untouched = [i for i, line in enumerate(lines) if line in {_dump(e) for e in _good_events()}]
    assert untouched and all(fast[i] for i in untouched)
    # the damage is varied enough to reach both the JVM-only accepts and many refusals
    assert sum(1 for i, ok in enumerate(fast) if not ok and reasons[i + 1] is None) > 0
    assert sum(1 for r in reasons.values() if r is not None) > 200


def _tables(spark, lake_dir):
    out = {}
    for name, schema in (
        (lake.EVENTS, EVENTS_TABLE_SCHEMA),
        (lake.QUARANTINE, QUARANTINE_SCHEMA),
        (lake.INGEST_FILES, INGEST_FILES_SCHEMA),
        (lake.FINDINGS, FINDINGS_SCHEMA),
    ):
        df = read_table(spark, lake.table_path(lake_dir, name), schema, where={"date": DAY})
        out[name] = sorted((tuple(r) for r in df.collect()), key=repr)
    return out


def _write_day_with_gap_and_step(events, heartbeats: int, step_at: int, segment_max_bytes: int) -> list:
    """ns-a: an ``ns_start`` and ``heartbeats`` heartbeats 30 s apart, the one at ``step_at`` 100 s
    back in time, in segments of ``segment_max_bytes``, the second segment's first 2 lines lost;
    ns-b: one short segment. Returns ns-a's segment paths."""
    stream = [ns_start(T0)] + [register(T0 + 30_000 * i, BROKER_A, "heartbeat") for i in range(1, heartbeats + 1)]
    stream[step_at]["ts"] -= 100_000
    paths = write_log(events, "ns-a", stream, segment_max_bytes=segment_max_bytes)
    drop_lines(paths[1], 2)
    write_log(events, "ns-b", [ns_start(T0 + 5), register(T0 + 6, BROKER_B), ns_stop(T0 + 7)])
    return paths


def _assert_ingests_alike(spark, events, result, first_lake, second_lake) -> None:
    """Ingesting ``events`` into ``second_lake`` gives ``result`` and the tables of ``first_lake``."""
    assert run_ingest(spark, events, second_lake, DAY) == result
    first, second = _tables(spark, first_lake), _tables(spark, second_lake)
    for name in first:
        assert first[name] == second[name], name


@pytest.mark.spark
def test_files_in_seq_order_give_the_same_tables_as_the_general_sequencing(spark, tmp_path, monkeypatch):
    events = tmp_path / "events"
    # ns-a: three segments in seq order with a lost line, a clock step back inside a file and
    # one across files, garbage and a line cut short; ns-b: one short segment
    paths = _write_day_with_gap_and_step(events, heartbeats=39, step_at=25, segment_max_bytes=4000)
    assert len(paths) >= 3
    second_first = json.loads(paths[1].read_bytes().splitlines()[0])
    first_last = json.loads(paths[0].read_bytes().splitlines()[-1])
    assert second_first["seq"] > first_last["seq"]
    append_lines(paths[-1], b"garbage")
    append_lines(paths[-1], b'{"v":1,"ns":"ns-a"', newline=False)

    in_order_lake = tmp_path / "in_order"
    result = run_ingest(spark, events, in_order_lake, DAY)
    assert result.findings.get("seq_gap") == 1 and result.findings.get("clock_step_back") == 1
    monkeypatch.setattr(ingest_module, "in_seq_order", lambda summaries: False)
    _assert_ingests_alike(spark, events, result, in_order_lake, tmp_path / "general")


@pytest.mark.spark
def test_a_day_the_fast_path_takes_whole_gives_the_same_tables_as_with_the_jvm_checks(spark, tmp_path, monkeypatch):
    events = tmp_path / "events"
    # every line well formed (the shortcut applies), with a lost line and a clock step back
    _write_day_with_gap_and_step(events, heartbeats=29, step_at=12, segment_max_bytes=3000)
    seen, real = [], ingest_module.all_lines_fast
    monkeypatch.setattr(ingest_module, "all_lines_fast", lambda summaries: seen.append(real(summaries)) or seen[-1])

    shortcut_lake = tmp_path / "shortcut"
    result = run_ingest(spark, events, shortcut_lake, DAY)
    assert seen == [True]
    assert result.findings == {"clock_step_back": 1, "seq_gap": 1} and result.quarantined == 0
    monkeypatch.setattr(ingest_module, "all_lines_fast", lambda summaries: False)
    _assert_ingests_alike(spark, events, result, shortcut_lake, tmp_path / "checked")


@pytest.mark.spark
def test_a_line_only_the_jvm_accepts_is_committed_with_the_fast_ones(spark, tmp_path):
    from jobs.lake.tables import table_version

    events = tmp_path / "events"
    path = write_log(
        events, "ns-a", [ns_start(T0), register(T0 + 1, BROKER_A), register(T0 + 2, BROKER_A, "heartbeat")]
    )[0]
    # seq 4 repeats its seq key: pyarrow refuses the line, the JVM reads it
    odd = _dump({**json.loads(path.read_bytes().splitlines()[2]), "seq": 4, "ts": T0 + 3})
    append_lines(path, (odd[:-1] + ',"seq":4}').encode())
    lake_dir = tmp_path / "lake"
    result = run_ingest(spark, events, lake_dir, DAY)
    assert (result.lines_read, result.accepted, result.quarantined, result.events_written) == (4, 4, 0, 4)
    assert table_version(lake.table_path(lake_dir, lake.EVENTS)) == 0  # one commit for both kinds
    rows = {
        r["seq"]: r for r in read_table(spark, lake.table_path(lake_dir, lake.EVENTS), EVENTS_TABLE_SCHEMA).collect()
    }
    assert sorted(rows) == [1, 2, 3, 4]
    assert rows[4]["remote"] == rows[3]["remote"] == "10.0.0.5:50112"
    assert not result.findings  # no gap: the JVM's line sits between the fast ones in seq order
