"""The event-log writer and readers against docs/event-log.md (format v1)."""

from __future__ import annotations

import asyncio
import errno
import gzip
import os
import threading
import time
from pathlib import Path
from types import SimpleNamespace

import orjson
import pytest

from common.config import EventLogConfig
from nameserver.eventlog import group_commit
from nameserver.eventlog import writer as eventlog
from nameserver.eventlog.writer import (
    AsyncGroupCommit,
    EventLogError,
    EventLogWriter,
    iter_segment_lines,
    list_segments,
    read_events,
    segment_name,
)
from nameserver.model import DataVersion, TopicConfig, topics_digest

T0 = 1795219200000  # 2026-11-21T00:00:00Z
NS = "ns-a"
ADDR_A = "10.0.0.5:10911"
ADDR_B = "10.0.0.6:10911"
TOPICS_1 = (TopicConfig("TopicTest", 8, 8),)
TOPICS_2 = (TopicConfig("TopicTest", 8, 8), TopicConfig("TopicNew", 4, 4))
NONE = EventLogConfig(durability="none")


def register(ts: int, addr: str = ADDR_A, topics=TOPICS_1, kind: str = "register") -> dict:
    """A REGISTER_BROKER event as the route table returns it (no v, ns, seq)."""
    return {
        "ts": ts,
        "type": kind,
        "request_code": 103,
        "channel": "c1",
        "remote": "10.0.0.5:50112",
        "cluster": "DefaultCluster",
        "broker_name": "broker-a",
        "broker_id": 0,
        "broker_addr": addr,
        "ha_addr": "10.0.0.5:10912",
        "data_version": DataVersion(1795219100000, 3),
        "topics_digest": topics_digest(topics),
        "topics": topics,
        "filter_servers": [],
        "request_version": 401,
    }


def heartbeat_904(ts: int, addr: str = ADDR_A) -> dict:
    """A BROKER_HEARTBEAT event: no payload keys."""
    return {
        "ts": ts,
        "type": "heartbeat",
        "request_code": 904,
        "channel": "c1",
        "remote": "10.0.0.5:50112",
        "cluster": "DefaultCluster",
        "broker_name": "broker-a",
        "broker_id": None,
        "broker_addr": addr,
        "ha_addr": None,
    }


def stop(ts: int) -> dict:
    return {"ts": ts, "type": "ns_stop", "reason": "test"}


def write(tmp_path: Path, events, config: EventLogConfig = NONE) -> list[int]:
    with EventLogWriter(tmp_path, NS, config) as writer:
        return [writer.append(e) for e in events]


def raw_lines(tmp_path: Path) -> list[bytes]:
    return [line.raw for seg in list_segments(tmp_path, NS) for line in iter_segment_lines(seg.path)]


def events_of(tmp_path: Path) -> list[dict]:
    problems: list = []
    events = list(read_events(tmp_path, NS, problems))
    assert problems == []
    return events


# ------------------------------------------------------------------------------- line format


def test_stamps_v_ns_seq_first_then_the_events_keys_in_order(tmp_path):
    event = register(T0 + 1234)
    keys_before = list(event)

    assert write(tmp_path, [event, stop(T0 + 2000)]) == [1, 2]

    line = raw_lines(tmp_path)[0]
    parsed = orjson.loads(line)
    assert list(parsed) == ["v", "ns", "seq", "ts", "type"] + keys_before[2:]
    assert parsed["v"] == 1 and parsed["ns"] == NS and parsed["seq"] == 1
    assert parsed["data_version"] == {"timestamp": 1795219100000, "counter": 3}
    assert parsed["topics"][0] == {
        "topic": "TopicTest",
        "read_queue_nums": 8,
        "write_queue_nums": 8,
        "perm": 6,
        "topic_sys_flag": 0,
        "order": False,
        "topic_filter_type": "SINGLE_TAG",
    }
    assert line == orjson.dumps(parsed)  # compact: no spaces
    assert list(event) == keys_before  # the caller's dict is left alone


def test_ts_and_type_come_first_even_when_the_event_lists_them_later(tmp_path):
    write(tmp_path, [{"reason": "x", "type": "ns_stop", "ts": T0}])
    assert list(orjson.loads(raw_lines(tmp_path)[0])) == ["v", "ns", "seq", "ts", "type", "reason"]


def test_every_line_ends_with_a_newline(tmp_path):
    write(tmp_path, [register(T0 + i) for i in range(3)])
    data = list_segments(tmp_path, NS)[0].path.read_bytes()
    assert data.endswith(b"\n") and data.count(b"\n") == 3


@pytest.mark.parametrize(
    "bad",
    [
        {"ts": T0, "type": "ns_stop", "seq": 7},
        {"ts": T0, "type": "ns_stop", "ns": "other"},
        {"ts": T0, "type": "ns_stop", "v": 2},
        {"type": "ns_stop"},
        {"ts": "2026-11-21", "type": "ns_stop"},
        {"ts": float(T0), "type": "ns_stop"},
        {"ts": T0},
        {"ts": T0, "type": "rejected", "reason": object()},
    ],
)
def test_a_bad_event_is_refused_without_using_a_seq(tmp_path, bad):
    with EventLogWriter(tmp_path, NS, NONE) as writer:
        with pytest.raises(ValueError):
            writer.append(bad)
        assert writer.append(stop(T0)) == 1
    assert [e["seq"] for e in events_of(tmp_path)] == [1]


def test_a_refused_event_leaves_no_empty_segment_behind(tmp_path):
    with EventLogWriter(tmp_path, NS, NONE) as writer:
        with pytest.raises(ValueError):  # opens the day's segment, then fails to serialise
            writer.append({"ts": T0, "type": "rejected", "reason": object()})
        writer.append(stop(T0 + 2 * 86_400_000))  # another day: the empty segment is dropped
    assert [s.path.relative_to(tmp_path).as_posix() for s in list_segments(tmp_path, NS)] == [
        f"{NS}/2026-11-23/{segment_name(1, 'closed')}"
    ]


# --------------------------------------------------------------------------------- seq, restart


def test_seq_continues_after_a_restart(tmp_path):
    assert write(tmp_path, [register(T0), stop(T0 + 1)]) == [1, 2]
    assert write(tmp_path, [register(T0 + 10), stop(T0 + 11)]) == [3, 4]

    assert [e["seq"] for e in events_of(tmp_path)] == [1, 2, 3, 4]
    assert [s.first_seq for s in list_segments(tmp_path, NS)] == [1, 3]
    assert all(s.state == "closed" for s in list_segments(tmp_path, NS))


def test_seq_continues_after_the_highest_seq_on_any_day(tmp_path):
    write(tmp_path, [register(T0 - 1), register(T0 + 5), stop(T0 + 86_400_000)])
    with EventLogWriter(tmp_path, NS, NONE) as writer:
        assert writer.last_seq == 3
        assert writer.append(stop(T0)) == 4


def test_other_name_servers_do_not_affect_the_seq(tmp_path):
    with EventLogWriter(tmp_path, "ns-b", NONE) as other:
        for i in range(5):
            other.append(stop(T0 + i))
    assert write(tmp_path, [stop(T0)]) == [1]


# ---------------------------------------------------------------------------------- topics rule


def test_topics_only_on_first_digest_event_per_address_and_on_digest_changes(tmp_path):
    events = [
        register(T0 + 1, ADDR_A, TOPICS_1),  # first of A: topics
        register(T0 + 2, ADDR_A, TOPICS_1, "heartbeat"),  # same digest: none
        heartbeat_904(T0 + 3, ADDR_A),  # never carries topics, does not reset the rule
        register(T0 + 4, ADDR_B, TOPICS_1),  # first of B: topics even though A had this digest
        register(T0 + 5, ADDR_A, TOPICS_2, "heartbeat"),  # A's digest changed: topics
        register(T0 + 6, ADDR_A, TOPICS_2, "heartbeat"),  # unchanged: none
        register(T0 + 7, ADDR_A, TOPICS_1, "heartbeat"),  # changed back: topics
        register(T0 + 8, ADDR_B, TOPICS_1, "heartbeat"),  # B unchanged: none
    ]
    write(tmp_path, events)

    logged = events_of(tmp_path)
    assert ["topics" in e for e in logged] == [True, False, False, True, True, False, True, False]
    assert all("topics_digest" in e for i, e in enumerate(logged) if i != 2)
    assert logged[4]["topics"] == [t.to_json_obj() for t in TOPICS_2]


def test_an_event_that_should_carry_topics_but_has_none_makes_the_next_one_carry_them(tmp_path):
    def without_topics(ts, topics):
        event = register(ts, ADDR_A, topics, "rejected")
        del event["topics"]
        return event

    events = [
        without_topics(T0 + 1, TOPICS_1),  # first of A, nothing to write
        register(T0 + 2, ADDR_A, TOPICS_1, "heartbeat"),  # so this one carries them
        register(T0 + 3, ADDR_A, TOPICS_1, "heartbeat"),
        without_topics(T0 + 4, TOPICS_2),  # digest changed, nothing to write
        register(T0 + 5, ADDR_A, TOPICS_2, "heartbeat"),  # so this one carries them
    ]
    write(tmp_path, events)
    assert ["topics" in e for e in events_of(tmp_path)] == [False, True, False, False, True]


def test_topics_are_written_again_in_every_new_segment(tmp_path):
    config = EventLogConfig(durability="none", segment_max_bytes=1)  # one event per segment
    write(tmp_path, [register(T0 + i, kind="heartbeat") for i in range(3)], config)
    write(tmp_path, [register(T0 + 10, kind="heartbeat")])  # a restart opens a segment too
    write(tmp_path, [register(T0 + 86_400_000, kind="heartbeat"), register(T0 + 86_400_001, kind="heartbeat")])

    logged = events_of(tmp_path)
    assert ["topics" in e for e in logged] == [True, True, True, True, True, False]
    assert len(list_segments(tmp_path, NS)) == 5


# ------------------------------------------------------------------------------------- rotation


def test_a_segment_closes_at_the_utc_day_boundary(tmp_path):
    write(tmp_path, [register(T0 - 2), register(T0 - 1), register(T0), register(T0 + 1)])

    segments = list_segments(tmp_path, NS)
    assert [(s.date, s.first_seq, s.state) for s in segments] == [
        ("2026-11-20", 1, "closed"),
        ("2026-11-21", 3, "closed"),
    ]
    assert segments[1].path == tmp_path / NS / "2026-11-21" / "events-00000000000000000003.jsonl"
    assert [orjson.loads(entry.raw)["seq"] for entry in iter_segment_lines(segments[0].path)] == [1, 2]


def test_the_open_segment_is_named_by_its_first_seq_and_date(tmp_path):
    with EventLogWriter(tmp_path, NS, NONE) as writer:
        writer.append(register(T0 + 5))
        assert writer.segment_path == tmp_path / NS / "2026-11-21" / "events-00000000000000000001.jsonl.open"
        assert writer.segment_path.exists()
    assert writer.segment_path is None
    assert not list((tmp_path / NS).rglob("*.open"))


def test_every_event_of_a_segment_has_the_segments_date_even_when_ts_goes_back(tmp_path):
    write(tmp_path, [register(T0 + 1), register(T0 - 1), register(T0 + 2)])
    segments = list_segments(tmp_path, NS)
    assert [(s.date, s.first_seq) for s in segments] == [("2026-11-21", 1), ("2026-11-20", 2), ("2026-11-21", 3)]


def test_a_segment_closes_once_it_reaches_its_size_limit(tmp_path):
    limit = 2000
    seqs = write(
        tmp_path,
        [register(T0 + i, kind="heartbeat") for i in range(40)],
        EventLogConfig(durability="none", segment_max_bytes=limit),
    )

    segments = list_segments(tmp_path, NS)
    assert len(segments) > 2
    for seg in segments[:-1]:
        size = seg.path.stat().st_size
        last_line = size - seg.path.read_bytes()[:-1].rfind(b"\n") - 1
        assert limit <= size < limit + last_line  # closes with the line that reaches the limit
    assert [s.first_seq for s in segments] == sorted(s.first_seq for s in segments)
    firsts = [orjson.loads(next(iter_segment_lines(s.path)).raw)["seq"] for s in segments]
    assert firsts == [s.first_seq for s in segments]
    assert [e["seq"] for e in events_of(tmp_path)] == seqs


def test_closed_segments_are_gzipped_and_readable(tmp_path):
    config = EventLogConfig(durability="group", segment_max_bytes=1500, gzip_closed=True)
    seqs = write(tmp_path, [register(T0 + i, kind="heartbeat") for i in range(30)], config)

    segments = list_segments(tmp_path, NS)
    assert len(segments) > 1 and all(s.state == "gzip" for s in segments)
    assert not [p for p in (tmp_path / NS).rglob("*") if p.is_file() and not p.name.endswith(".jsonl.gz")]
    with gzip.open(segments[0].path, "rb") as f:
        assert f.read().endswith(b"\n")
    assert [e["seq"] for e in events_of(tmp_path)] == seqs
    assert write(tmp_path, [stop(T0 + 100)], config) == [31]  # the last seq is found in a .gz


# ------------------------------------------------------------------------------------- recovery


def crashed_run(tmp_path: Path, n: int, tail: bytes) -> Path:
    """A run that wrote ``n`` events, handed them to the OS, then died leaving ``tail`` unfinished."""
    writer = EventLogWriter(tmp_path, NS, NONE).open()
    for i in range(n):
        writer.append(register(T0 + i, kind="heartbeat"))
    writer.sync()
    path = writer.segment_path
    with open(path, "ab") as f:
        f.write(tail)
    return path


def test_a_leftover_open_segment_is_kept_byte_for_byte_and_a_new_segment_follows(tmp_path):
    path = crashed_run(tmp_path, 5, b'{"v":1,"ns":"ns-a","seq":6,"ts":17952')
    before = path.read_bytes()

    with EventLogWriter(tmp_path, NS, EventLogConfig(durability="fsync")) as writer:
        assert writer.last_seq == 5
        assert writer.append(stop(T0 + 10)) == 6
        assert writer.segment_path.name == "events-00000000000000000006.jsonl.open"

    closed = path.with_name("events-00000000000000000001.jsonl")
    assert not path.exists() and closed.read_bytes() == before
    problems: list = []
    assert [e["seq"] for e in read_events(tmp_path, NS, problems)] == [1, 2, 3, 4, 5, 6]
    assert [(p.file, p.line, p.raw) for p in problems] == [(closed, 6, b'{"v":1,"ns":"ns-a","seq":6,"ts":17952')]
    assert problems[0].reason.startswith("cut short")


def test_a_leftover_holding_only_a_cut_line_is_kept_and_its_seq_is_skipped(tmp_path):
    write(tmp_path, [stop(T0)])  # seq 1, closed
    leftover = tmp_path / NS / "2026-11-21" / segment_name(2, "open")
    leftover.write_bytes(b'{"v":1,"ns":"ns-a","seq":2,"ts"')

    with EventLogWriter(tmp_path, NS, NONE) as writer:
        assert writer.append(stop(T0 + 1)) == 3  # a new name; seq 2 was lost in the crash

    assert (tmp_path / NS / "2026-11-21" / segment_name(2, "closed")).read_bytes() == b'{"v":1,"ns":"ns-a","seq":2,"ts"'
    assert [s.first_seq for s in list_segments(tmp_path, NS)] == [1, 2, 3]


def test_an_empty_leftover_open_segment_is_removed(tmp_path):
    write(tmp_path, [stop(T0)])
    leftover = tmp_path / NS / "2026-11-21" / segment_name(2, "open")
    leftover.touch()
    assert write(tmp_path, [stop(T0 + 1)]) == [2]
    assert [s.state for s in list_segments(tmp_path, NS)] == ["closed", "closed"]


def test_a_compression_cut_short_is_finished_on_open(tmp_path):
    write(tmp_path, [stop(T0)])
    write(tmp_path, [stop(T0 + 1)])
    day = tmp_path / NS / "2026-11-21"
    one, two = day / segment_name(1, "closed"), day / segment_name(2, "closed")
    (day / (one.name + ".gz.tmp")).write_bytes(b"\x1f\x8b half")  # died while compressing
    two_gz = day / (two.name + ".gz")
    two_gz.write_bytes(gzip.compress(two.read_bytes()))  # died before removing the plain file

    assert [e["seq"] for e in events_of(tmp_path)] == [1, 2]  # readers see no duplicate
    write(tmp_path, [stop(T0 + 2)], EventLogConfig(durability="fsync", gzip_closed=True))

    assert sorted(p.name for p in day.iterdir()) == [segment_name(s, "gzip") for s in (1, 2, 3)]
    assert [e["seq"] for e in events_of(tmp_path)] == [1, 2, 3]


# ----------------------------------------------------------------------------------- durability


@pytest.fixture
def fsyncs(monkeypatch):
    """Record every fsync: (thread id, descriptor's inode)."""
    calls: list[tuple[int, int]] = []
    real = os.fsync

    def recording_fsync(fd):
        calls.append((threading.get_ident(), os.fstat(fd).st_ino))
        real(fd)

    monkeypatch.setattr(eventlog.os, "fsync", recording_fsync)
    return calls


def test_fsync_durability_fsyncs_every_append_before_it_returns(tmp_path, fsyncs):
    with EventLogWriter(tmp_path, NS, EventLogConfig(durability="fsync")) as writer:
        for i in range(5):
            before = len(fsyncs)
            seq = writer.append(register(T0 + i, kind="heartbeat"))
            assert writer.durable_seq == seq
            inode = writer.segment_path.stat().st_ino
            assert (threading.get_ident(), inode) in fsyncs[before:]


def test_group_durability_hands_lines_to_the_os_and_fsyncs_on_sync(tmp_path, fsyncs):
    with EventLogWriter(tmp_path, NS, EventLogConfig(durability="group")) as writer:
        fsyncs.clear()  # open() made the new ns folder durable
        seqs = [writer.append(register(T0 + i, kind="heartbeat")) for i in range(5)]
        assert writer.durable_seq == 0 and fsyncs == []
        assert writer.segment_path.read_bytes().count(b"\n") == 5  # visible to other processes

        assert writer.sync() == seqs[-1] == writer.durable_seq
        assert writer.segment_path.stat().st_ino in [ino for _, ino in fsyncs]
        assert len(fsyncs) >= 2  # the segment and the folder holding its new name

        calls = len(fsyncs)
        assert writer.sync() == seqs[-1] and len(fsyncs) == calls  # nothing new: no fsync


def test_none_durability_never_fsyncs(tmp_path, monkeypatch):
    def no_fsync(fd):
        raise AssertionError("durability none must not fsync")

    monkeypatch.setattr(eventlog.os, "fsync", no_fsync)
    config = EventLogConfig(durability="none", segment_max_bytes=1500, gzip_closed=True)
    with EventLogWriter(tmp_path, NS, config) as writer:
        seqs = [writer.append(register(T0 + i, kind="heartbeat")) for i in range(20)]
        assert writer.sync() == seqs[-1] == writer.durable_seq
    assert [e["seq"] for e in events_of(tmp_path)] == seqs


def test_a_segment_close_makes_everything_before_it_durable(tmp_path):
    config = EventLogConfig(durability="group", segment_max_bytes=1)
    with EventLogWriter(tmp_path, NS, config) as writer:
        writer.append(stop(T0))
        assert writer.durable_seq == 1 and writer.segment_path is None


def test_a_failed_fsync_is_raised_and_stops_the_writer(tmp_path, monkeypatch):
    writer = EventLogWriter(tmp_path, NS, EventLogConfig(durability="group")).open()
    writer.append(stop(T0))

    def failing_fsync(fd):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(eventlog.os, "fsync", failing_fsync)
    with pytest.raises(EventLogError):
        writer.sync()
    assert writer.durable_seq == 0
    with pytest.raises(EventLogError):
        writer.append(stop(T0 + 1))
    monkeypatch.undo()
    writer.close()
    assert [e["seq"] for e in events_of(tmp_path)] == [1]  # the written line is kept


def test_append_before_open_or_after_close_is_refused(tmp_path):
    writer = EventLogWriter(tmp_path, NS, NONE)
    with pytest.raises(EventLogError):
        writer.append(stop(T0))
    writer.open()
    writer.close()
    writer.close()  # twice is fine
    with pytest.raises(EventLogError):
        writer.append(stop(T0))


# ------------------------------------------------------------------------------ group commit


def test_async_group_commit_batches_a_windows_waiters_into_one_fsync_off_the_loop(tmp_path, fsyncs):
    writer = EventLogWriter(tmp_path, NS, EventLogConfig(durability="group")).open()
    fsyncs.clear()  # open() made the new ns folder durable, on this thread
    sync_calls = []
    real_sync = writer.sync

    def counting_sync():
        sync_calls.append(threading.get_ident())
        return real_sync()

    writer.sync = counting_sync

    async def main():
        commit = AsyncGroupCommit(writer, window_ms=20)
        loop_thread = threading.get_ident()

        async def producer(i):
            seq = writer.append(register(T0 + i, kind="heartbeat"))
            await commit.wait_durable(seq)
            assert writer.durable_seq >= seq
            return seq

        seqs = await asyncio.gather(*(producer(i) for i in range(100)))
        await commit.drain()
        return loop_thread, seqs

    loop_thread, seqs = asyncio.run(main())
    assert sorted(seqs) == list(range(1, 101))
    assert len(sync_calls) == 1  # all 100 appended within the window
    assert loop_thread not in sync_calls + [t for t, _ in fsyncs]
    writer.close()


def test_async_group_commit_serves_waiters_arriving_during_an_fsync(tmp_path):
    writer = EventLogWriter(tmp_path, NS, EventLogConfig(durability="group")).open()

    async def main():
        commit = AsyncGroupCommit(writer, window_ms=0)
        done = []
        for i in range(20):
            seq = writer.append(stop(T0 + i))
            waiter = asyncio.ensure_future(commit.wait_durable(seq))
            waiter.add_done_callback(lambda _, s=seq: done.append(s))
            await asyncio.sleep(0.001 * (i % 3))
        await commit.drain()
        await asyncio.sleep(0)
        return done

    done = asyncio.run(main())
    assert sorted(done) == list(range(1, 21)) and writer.durable_seq == 20
    writer.close()


def test_async_group_commit_a_waiter_back_for_events_appended_during_the_fsync_gets_no_new_window(
    tmp_path, monkeypatch
):
    """The server's answer queue waits for one seq at a time: when it comes back for the events
    appended while the last fsync ran, the next fsync starts at once, not after a fresh window."""
    writer = EventLogWriter(tmp_path, NS, EventLogConfig(durability="group")).open()
    real_sync = writer.sync
    later: list[int] = []
    syncs: list[int] = []
    windows: list[float] = []  # every wait of the committer longer than a loop turn
    real_sleep = asyncio.sleep

    async def recording_sleep(delay, *args, **kwargs):
        if delay > 0:
            windows.append(delay)
        return await real_sleep(delay, *args, **kwargs)

    monkeypatch.setattr(group_commit, "asyncio", SimpleNamespace(**{**vars(asyncio), "sleep": recording_sleep}))

    async def main():
        loop = asyncio.get_running_loop()

        def slow_sync():
            durable = real_sync()
            syncs.append(durable)
            if not later:  # an event appended on the loop while this fsync is still running
                loop.call_soon_threadsafe(lambda: later.append(writer.append(stop(T0 + 1))))
                time.sleep(0.1)
            return durable

        writer.sync = slow_sync
        commit = AsyncGroupCommit(writer, window_ms=600)
        await commit.wait_durable(writer.append(stop(T0)))
        assert later and writer.durable_seq < later[0]
        await commit.wait_durable(later[0])

    asyncio.run(main())
    assert windows == [0.6]  # the first waiter's window only: no fresh one for the second fsync
    assert syncs == [1, 2]
    assert writer.durable_seq == 2
    writer.close()


def test_async_group_commit_passes_an_fsync_failure_to_every_waiter(tmp_path, monkeypatch):
    writer = EventLogWriter(tmp_path, NS, EventLogConfig(durability="group")).open()

    def failing_fsync(fd):
        raise OSError(errno.EIO, "I/O error")

    monkeypatch.setattr(eventlog.os, "fsync", failing_fsync)

    async def main():
        commit = AsyncGroupCommit(writer, window_ms=1)
        seqs = [writer.append(stop(T0 + i)) for i in range(3)]
        return await asyncio.gather(*(commit.wait_durable(s) for s in seqs), return_exceptions=True)

    results = asyncio.run(main())
    assert [type(r) for r in results] == [EventLogError] * 3
    monkeypatch.undo()
    writer.close()


def test_wait_durable_returns_at_once_for_fsync_durability(tmp_path):
    writer = EventLogWriter(tmp_path, NS, EventLogConfig(durability="fsync")).open()

    async def main():
        commit = AsyncGroupCommit(writer)
        await commit.wait_durable(writer.append(stop(T0)))
        return commit.running

    assert asyncio.run(main()) is False  # no commit run was needed
    writer.close()


# --------------------------------------------------------------------------------------- readers


def test_read_events_reports_bad_lines_and_keeps_the_rest(tmp_path):
    write(tmp_path, [stop(T0), stop(T0 + 1)])
    seg = list_segments(tmp_path, NS)[0]
    with open(seg.path, "ab") as f:
        f.write(
            b"not json\n[1,2]\n"
            + orjson.dumps({"v": 1, "ns": NS, "seq": 3, "ts": T0 + 2, "type": "ns_stop", "reason": "x"})
            + b'\n{"v":1'
        )

    problems: list = []
    assert [e["seq"] for e in read_events(tmp_path, None, problems)] == [1, 2, 3]
    assert [(p.line, p.reason.split(":")[0]) for p in problems] == [
        (3, "not JSON"),
        (4, "not a JSON object"),
        (6, "cut short"),
    ]


def test_read_events_of_every_name_server_goes_by_ns_id(tmp_path):
    for ns in ("ns-b", "ns-a"):
        with EventLogWriter(tmp_path, ns, NONE) as writer:
            writer.append(stop(T0))
            writer.append(stop(T0 + 1))
    assert [(e["ns"], e["seq"]) for e in read_events(tmp_path)] == [("ns-a", 1), ("ns-a", 2), ("ns-b", 1), ("ns-b", 2)]


def test_iter_segment_lines_reads_a_truncated_gzip_as_far_as_it_goes(tmp_path):
    body = b"".join(orjson.dumps({"seq": i, "pad": "x" * 50}) + b"\n" for i in range(1, 2001))
    path = tmp_path / "events-00000000000000000001.jsonl.gz"
    path.write_bytes(gzip.compress(body)[:-2000])

    lines = list(iter_segment_lines(path))
    complete = [entry for entry in lines if entry.complete]
    assert 0 < len(complete) < 2000
    assert [entry.raw for entry in complete] == body.split(b"\n")[: len(complete)]
    assert [entry.line for entry in lines] == list(range(1, len(lines) + 1))


def test_iter_segment_lines_refuses_a_gz_that_is_not_gzip(tmp_path):
    path = tmp_path / "events-00000000000000000001.jsonl.gz"
    path.write_bytes(b"plain text\n")
    with pytest.raises(EventLogError):
        list(iter_segment_lines(path))
