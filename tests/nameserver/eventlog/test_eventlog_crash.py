"""SIGKILL a writing process: what it reported durable is in the log, and the log stays readable."""

from __future__ import annotations

import datetime as dt
import os
import random
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

import orjson
import pytest

from common.config import EventLogConfig
from nameserver.eventlog.writer import EventLogWriter, iter_segment_lines, list_segments, read_events

NS = "ns-crash"
REPO = Path(__file__).resolve().parents[3]

# The child appends until killed and prints each seq once it is durable. ts advances 5 s per
# seq from 20 minutes before midnight, so runs cross a UTC day boundary; small segments rotate
# often; register heartbeats alternate digests so the topics rule is exercised too.
CHILD = textwrap.dedent(
    """
    import asyncio, sys
    from common.config import EventLogConfig
    from nameserver.eventlog.writer import AsyncGroupCommit, EventLogWriter
    from nameserver.model import DataVersion, TopicConfig, topics_digest

    events_dir, mode, gz = sys.argv[1], sys.argv[2], sys.argv[3] == "1"
    config = EventLogConfig(durability=mode, segment_max_bytes=8192, group_commit_ms=2, gzip_closed=gz)
    writer = EventLogWriter(events_dir, "ns-crash", config).open()
    T = 1795219200000 - 1_200_000
    TOPICS = [tuple(TopicConfig(f"topic-{i}-{k}", 8, 8) for i in range(3)) for k in range(2)]

    def event():
        seq = writer.last_seq + 1
        topics = TOPICS[(seq // 50) % 2]
        if seq % 3:
            return {"ts": T + seq * 5000, "type": "heartbeat", "request_code": 904, "channel": "c1",
                    "remote": "10.0.0.5:50112", "cluster": "C", "broker_name": "b", "broker_id": None,
                    "broker_addr": "10.0.0.5:10911", "ha_addr": None}
        return {"ts": T + seq * 5000, "type": "heartbeat", "request_code": 103, "channel": "c1",
                "remote": "10.0.0.5:50112", "cluster": "C", "broker_name": "b", "broker_id": 0,
                "broker_addr": "10.0.0.5:10911", "ha_addr": "10.0.0.5:10912",
                "data_version": DataVersion(1, seq // 50), "topics_digest": topics_digest(topics),
                "topics": topics, "filter_servers": [], "request_version": 401}

    def report(seq):
        sys.stdout.write(f"{seq}\\n")
        sys.stdout.flush()

    async def producer(commit):
        while True:
            seq = writer.append(event())
            await commit.wait_durable(seq)
            report(seq)

    async def main():
        commit = AsyncGroupCommit(writer)
        await asyncio.gather(*(producer(commit) for _ in range(8)))

    if mode == "group":
        asyncio.run(main())
    else:
        while True:
            report(writer.append(event()))
    """
)


def run_and_kill(events_dir: Path, mode: str, gz: bool, reports: int) -> list[int]:
    """Start the child, read ``reports`` durable seqs, SIGKILL it; return every seq it reported."""
    script = events_dir.parent / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, PYTHONPATH=str(REPO))
    proc = subprocess.Popen(
        [sys.executable, str(script), str(events_dir), mode, "1" if gz else "0"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    reported = []
    try:
        while len(reported) < reports:
            line = proc.stdout.readline()
            if not line:
                pytest.fail(f"child ended early: {proc.wait()} {proc.stderr.read().decode()}")
            reported.append(int(line))
        assert proc.poll() is None, "the child must still be writing when it is killed"
        proc.send_signal(signal.SIGKILL)
        rest = proc.stdout.read()
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()
        proc.stderr.close()
    assert proc.returncode == -signal.SIGKILL
    # A report cut by the kill was not fully printed, so it does not count.
    reported += [int(x) for x in rest.split(b"\n")[:-1]]
    return reported


def open_segment_seqs(events_dir: Path) -> set[int]:
    """First seq of the segment a killed child left open, the one that may end cut short (none
    when the kill fell between a size close and the next append)."""
    seqs = {s.first_seq for s in list_segments(events_dir, NS) if s.state == "open"}
    assert len(seqs) <= 1, "at most one segment is ever open"
    return seqs


def check_log(events_dir: Path, killed_segments: set[int]) -> list[int]:
    """The invariants a crash must not break; returns the logged seqs in read order.

    Args:
        killed_segments: first seqs of the segments that were open when a child was killed;
            only their last line may be cut short.
    """
    problems: list = []
    events = list(read_events(events_dir, NS, problems))
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)), "seqs must strictly increase"
    segments = {s.path: s for s in list_segments(events_dir, NS)}
    assert len(segments) > 1
    for problem in problems:
        assert problem.reason.startswith("cut short"), problem
        assert segments[problem.file].first_seq in killed_segments, problem
        assert problem.line == sum(1 for _ in iter_segment_lines(problem.file)), "only a last line"
    for seg in segments.values():  # every event lies in its segment's UTC day
        for line in iter_segment_lines(seg.path):
            if line.complete:
                assert seg.date == _date(orjson.loads(line.raw)["ts"])
    return seqs


def _date(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms / 1000, dt.UTC).date().isoformat()


@pytest.mark.slow
@pytest.mark.parametrize(
    "mode, gz, round_",
    [("group", False, 1), ("group", False, 2), ("group", True, 3), ("fsync", False, 4), ("fsync", True, 5)],
)
def test_what_was_reported_durable_survives_sigkill_and_the_log_continues(tmp_path, mode, gz, round_):
    events_dir = tmp_path / "events"
    rng = random.Random(round_)
    reported = run_and_kill(events_dir, mode, gz, reports=rng.randint(300, 1200))
    killed = open_segment_seqs(events_dir)

    seqs = check_log(events_dir, killed)
    assert set(reported) <= set(seqs), f"reported durable but missing: {sorted(set(reported) - set(seqs))[:10]}"
    assert seqs == list(range(1, len(seqs) + 1)), "no seq is lost while the process runs"

    # A second run that is killed too, then a clean one: both continue after the last complete seq.
    again = run_and_kill(events_dir, mode, gz, reports=50)
    killed |= open_segment_seqs(events_dir)
    seqs_2 = check_log(events_dir, killed)
    assert set(again) <= set(seqs_2) and min(again) > seqs[-1]
    assert seqs_2[: len(seqs)] == seqs

    config = EventLogConfig(durability=mode, gzip_closed=gz)
    with EventLogWriter(events_dir, NS, config) as writer:
        assert writer.last_seq == seqs_2[-1]
        seq = writer.append({"ts": 1795219200000 + 10 * 86_400_000, "type": "ns_stop", "reason": "test"})
    assert seq == seqs_2[-1] + 1
    assert not list(events_dir.rglob("*.open")) and not list(events_dir.rglob("*.tmp"))
    assert check_log(events_dir, killed) == seqs_2 + [seq]
