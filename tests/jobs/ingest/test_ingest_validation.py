"""One validation, whichever path reads a segment: every key of ``schemas.validation.EVENT_RULE``
given a value of every wrong JSON kind, an unknown key, a null where none may be, or a line over
the maximum length is quarantined with its line number and a reason naming the key (or length).

The lines are made in Python; Spark ingests them once with the fast path on (the scan accepts
the good lines itself and leaves the rest to the JVM) and once with every line judged by the JVM
(as when delta-spark writes the table).
"""

from __future__ import annotations

import copy
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

import jobs.ingest.stage as ingest_module
from jobs import lake
from jobs.ingest.classifier import classify_lines
from jobs.ingest.plan import build_plan
from jobs.ingest.segments import line_batches
from jobs.ingest.stage import run_ingest
from jobs.lake.tables import read_table
from nameserver.codec import MAX_FRAME_BYTES, MAX_INFLATED_BYTES
from schemas import validation
from schemas.events import EVENT_KEYS, EVENTS_TABLE_SCHEMA, KEYS_BY_NAME, QUARANTINE_SCHEMA
from schemas.ingest import INGEST_FILES_SCHEMA
from schemas.validation import EVENT_RULE, JSON_ARRAY, JSON_BOOLEAN, JSON_INTEGER, JSON_OBJECT, JSON_STRING, ValueRule
from tests.jobs.logdata import BROKER_A, DAY, T0, append_lines, ns_start, ns_stop, register, write_log

NS = "ns-a"

# a value of every other JSON kind, for each kind a key may have
WRONG_VALUES = {
    JSON_STRING: [12345, 1.5, True, {"a": "x"}, ["x"]],
    JSON_INTEGER: ["12", 1.5, 1e3, True, {"a": 1}, [1]],
    JSON_BOOLEAN: [1, "true", {"a": True}, [True]],
    JSON_OBJECT: [1, "x", True, [1]],
    JSON_ARRAY: [1, "x", True, {"a": 1}],
}
TOO_BIG = {(-(2**31), 2**31 - 1): 2**31, (-(2**63), 2**63 - 1): 2**63}


def _full_event(seq: int) -> dict:
    """A valid ``rejected`` event that carries every v1 key (a rejected event may log any)."""
    values = {
        "v": 1,
        "ns": NS,
        "seq": seq,
        "ts": T0 + seq,
        "type": "rejected",
        "request_code": 103,
        "data_version": {"timestamp": T0, "counter": 3},
        "topics_digest": "0" * 64,
        "topics": [
            {
                "topic": "TopicTest",
                "read_queue_nums": 8,
                "write_queue_nums": 8,
                "perm": 6,
                "topic_sys_flag": 0,
                "order": False,
                "topic_filter_type": "SINGLE_TAG",
            }
        ],
        "filter_servers": ["10.0.0.7:1"],
        "last_update_ts": T0,
        # the observation keys (nsaudit collect), nested arrays of objects
        "broker_addrs": [{"broker_id": 0, "broker_addr": "10.0.0.5:10911"}],
        "queue_datas": [
            {"broker_name": "broker-a", "read_queue_nums": 8, "write_queue_nums": 8, "perm": 6, "topic_sys_flag": 0}
        ],
        "broker_datas": [
            {
                "cluster": "C1",
                "broker_name": "broker-a",
                "broker_addrs": [{"broker_id": 0, "broker_addr": "10.0.0.5:10911"}],
            }
        ],
        "filter_server_table": [{"broker_addr": "10.0.0.5:10911", "filter_servers": ["10.0.0.5:30000"]}],
        # the live incident keys (nsaudit collect), arrays of strings
        "servers": ["obs-10.0.0.5-9876"],
        "kinds": ["write_perm_wiped"],
        # the refreshes a log outage refused (rejected log_unavailable), an array of objects
        "refreshes": [{"broker_addr": "10.0.0.5:10911", "last_update_ts": T0}],
    }
    kinds = {"string": "x", "int32": 7, "int64": 7}
    return {k.name: values.get(k.name, kinds.get(k.type)) for k in EVENT_KEYS}


def _rules(rule: ValueRule = EVENT_RULE):
    """Every place of the rule tree below the line itself."""
    for _, child in rule.keys:
        yield child
        yield from _rules(child)
    if rule.element is not None:
        yield rule.element
        yield from _rules(rule.element)


def _set(event: dict, path: str, value) -> dict:
    """``event`` with ``value`` at ``path`` (``a.b``, ``a[].b``: the first element, ``a[]``)."""
    event = copy.deepcopy(event)
    target, parts = event, path.split(".")
    for i, part in enumerate(parts):
        last = i == len(parts) - 1
        name, in_array = (part[:-2], True) if part.endswith("[]") else (part, False)
        if in_array:
            target = target[name]
            name = 0
        if last:
            target[name] = value
        else:
            target = target[name]
    return event


def _null_reason(rule: ValueRule) -> str | None:
    """The reason a null at ``rule`` gets, None where null is allowed."""
    if rule.null_is_wrong_type:
        return f"wrong_type: {rule.path} (null)"
    top = KEYS_BY_NAME.get(rule.path)
    if top is not None and top.nullable:
        return None
    return f"missing_key: {rule.path}"  # a required key: null is as good as absent


def _bad_cases() -> list[tuple[str, dict, str]]:
    """``(what, event, reason)`` for every place x wrong kind, every null where none may be, and an
    unknown key in every object."""
    cases = []
    for rule in _rules():
        wrong = list(WRONG_VALUES[rule.kind])
        if rule.bounds is not None:
            wrong.append(TOO_BIG[rule.bounds])
        cases += [(f"{rule.path}={value!r}", value, f"wrong_type: {rule.path}") for value in wrong]
        if _null_reason(rule) is not None:
            cases.append((f"{rule.path}=null", None, _null_reason(rule)))
    out = [(what, _set(_full_event(100), what.split("=")[0], value), reason) for what, value, reason in cases]
    for prefix in ("", "data_version.", "topics[].", "broker_datas[].broker_addrs[]."):
        event = _full_event(100)
        holder = {
            "": event,
            "data_version.": event["data_version"],
            "topics[].": event["topics"][0],
            "broker_datas[].broker_addrs[].": event["broker_datas"][0]["broker_addrs"][0],
        }[prefix]
        holder["junk"] = 1
        out.append((f"{prefix}junk", event, f"unknown_key: {prefix}junk"))
    return out


def _dump(event: dict) -> str:
    return json.dumps(event, separators=(",", ":"))


def _plan(tmp_path):
    struct = T.StructType([f for f in EVENTS_TABLE_SCHEMA.fields if f.name not in ("date", "ns")])
    return build_plan(str(tmp_path / "events"), ("date", "ns"), to_arrow_schema(struct))


def _fast(lines: list[str], plan) -> np.ndarray:
    data = ("\n".join(lines) + "\n").encode()
    return np.concatenate(
        [
            classify_lines(b.column(4), b.column(5), NS, plan)[0]
            for b in line_batches(data, DAY, NS, f"{NS}/{DAY}/f.jsonl")
        ]
    )


def test_the_rules_cover_every_key_and_the_writers_longest_line():
    assert [name for name, _ in EVENT_RULE.keys] == [k.name for k in EVENT_KEYS]
    assert validation.NOT_NULL_WHEN_PRESENT == ("topics", "refreshes")
    # the bound is derived from the name server's own limits, and every line it allows fits in
    # one Arrow or JVM string
    assert (validation.MAX_FRAME_BYTES, validation.MAX_INFLATED_BYTES) == (MAX_FRAME_BYTES, MAX_INFLATED_BYTES)
    assert validation.MAX_LINE_BYTES < 2**31 - 1


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=st.sampled_from(_bad_cases()), position=st.integers(0, 40))
def test_the_fast_path_accepts_no_line_the_rules_refuse(tmp_path, case, position):
    _, event, _ = case
    good = [_dump(_full_event(i + 1)) for i in range(40)]
    lines = good[:position] + [_dump(event)] + good[position:]
    fast = _fast(lines, _plan(tmp_path))
    assert not fast[position]
    assert fast.sum() == len(good)  # the good lines around it still take the fast path


def _write_day(events) -> tuple[str, dict[int, str]]:
    """Good lines by the real writer, then every bad case: the segment and ``line -> reason``."""
    path = write_log(events, NS, [ns_start(T0), register(T0 + 1, BROKER_A), ns_stop(T0 + 2)])[0]
    good = [_dump(_full_event(seq)) for seq in range(4, 14)]
    cases = _bad_cases()
    lines = good + [_dump(event) for _, event, _ in cases]
    append_lines(path, *(line.encode() for line in lines))
    first_bad = 3 + len(good) + 1
    return path.relative_to(events).as_posix(), {first_bad + i: reason for i, (_, _, reason) in enumerate(cases)}


def _day(spark, lake_dir, name, schema):
    return read_table(spark, lake.table_path(lake_dir, name), schema, where={"date": DAY}).collect()


def _force(monkeypatch, reader: str) -> None:
    """``jvm``: no line takes the fast path, as when delta-spark writes ``events``."""
    if reader == "jvm":
        monkeypatch.setattr(ingest_module, "lake_writer", lambda spark: "native")
        seen = []
        real = ingest_module.build_plan
        monkeypatch.setattr(
            ingest_module, "build_plan", lambda *a, **kw: seen.append(kw["write_events"]) or real(*a, **kw)
        )
        monkeypatch.setattr(ingest_module, "_seen_write_events", seen, raising=False)


@pytest.mark.spark
@pytest.mark.parametrize("reader", ["fast", "jvm"])
def test_every_wrong_type_and_unknown_key_is_quarantined_whichever_path_reads_it(spark, tmp_path, monkeypatch, reader):
    events = tmp_path / "events"
    file, expected = _write_day(events)
    _force(monkeypatch, reader)
    result = run_ingest(spark, events, tmp_path / "lake", DAY)

    if reader == "jvm":
        assert ingest_module._seen_write_events == [False]
    quarantined = {
        r["line"]: r["reason"]
        for r in _day(spark, tmp_path / "lake", lake.QUARANTINE, QUARANTINE_SCHEMA)
        if r["file"] == file
    }
    mismatched = {
        line: (quarantined.get(line), reason) for line, reason in expected.items() if quarantined.get(line) != reason
    }
    assert not mismatched, mismatched
    assert set(quarantined) == set(expected)
    events_lines = {r["line"] for r in _day(spark, tmp_path / "lake", lake.EVENTS, EVENTS_TABLE_SCHEMA)}
    assert events_lines == set(range(1, 14))
    (row,) = _day(spark, tmp_path / "lake", lake.INGEST_FILES, INGEST_FILES_SCHEMA)
    assert (row["lines_read"], row["accepted"], row["quarantined"]) == (13 + len(expected), 13, len(expected))
    assert (result.lines_read, result.accepted, result.quarantined) == (13 + len(expected), 13, len(expected))


@pytest.mark.spark
@pytest.mark.parametrize("reader", ["fast", "jvm"])
def test_a_giant_line_with_an_unknown_key_and_a_line_over_the_maximum_are_quarantined(
    spark, tmp_path, monkeypatch, reader
):
    events = tmp_path / "events"
    path = write_log(events, NS, [ns_start(T0), register(T0 + 1, BROKER_A)])[0]
    stop = {"v": 1, "ns": NS, "seq": 3, "ts": T0 + 2, "type": "ns_stop", "reason": "SIGTERM"}
    junk = _dump({**stop, "junk": "j" * 30_000_000})  # 30 MB, under the maximum
    # the broker address as a JSON number, in a heartbeat of the address registered above
    heartbeat = _dump(
        {**json.loads(path.read_bytes().splitlines()[1]), "seq": 4, "type": "heartbeat", "broker_addr": 12345}
    )
    too_long = _dump({**stop, "seq": 5, "reason": "r" * 41_000_000})  # a valid event, over the maximum
    append_lines(path, junk.encode(), heartbeat.encode(), too_long.encode(), _dump({**stop, "seq": 6}).encode())
    monkeypatch.setattr(validation, "MAX_LINE_BYTES", 40_000_000)
    _force(monkeypatch, reader)
    result = run_ingest(spark, events, tmp_path / "lake", DAY)

    quarantined = {r["line"]: r["reason"] for r in _day(spark, tmp_path / "lake", lake.QUARANTINE, QUARANTINE_SCHEMA)}
    assert quarantined == {
        3: "unknown_key: junk",
        4: "wrong_type: broker_addr",
        5: f"line_too_long: {len(too_long)} bytes > 40000000",
    }
    assert sorted(r["seq"] for r in _day(spark, tmp_path / "lake", lake.EVENTS, EVENTS_TABLE_SCHEMA)) == [1, 2, 6]
    assert (result.lines_read, result.accepted, result.quarantined) == (6, 3, 3)
