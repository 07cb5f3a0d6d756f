"""A real ``python -m nameserver`` process under hostile conditions: connection churn, a full disk,
a memory attack and a crash with ``durability = "none"``. Every loop is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import socket
import subprocess
import time
from pathlib import Path

import pytest

from nameserver.client import RemotingClient
from nameserver.codec import ResponseCode
from nameserver.eventlog.writer import read_events
from nameserver.model import DataVersion
from tests.nameserver.server.test_server import A, arun, events_of, register, start_server, stop_server


def wait_until(check, what: str, timeout: float = 10) -> None:
    """Poll ``check`` until it holds; fail naming ``what`` was awaited after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"waited {timeout} s for {what}"
        time.sleep(0.02)


def log_bytes(events_dir: Path) -> int:
    """Bytes of every segment under ``events_dir`` (open or closed)."""
    return sum(p.stat().st_size for p in events_dir.rglob("events-*"))


@pytest.mark.slow
def test_connection_churn_writes_nothing(tmp_path):
    proc, host, port = start_server(tmp_path, "ns-churn")
    try:

        def churn(count: int, budget_s: float) -> int:
            deadline = time.monotonic() + budget_s
            done = 0
            while done < count and time.monotonic() < deadline:
                with socket.create_connection((host, port), timeout=5):
                    pass
                done += 1
            return done

        wait_until(lambda: [e["type"] for e in events_of(tmp_path, "ns-churn")] == ["ns_start"], "the ns_start event")
        before = log_bytes(tmp_path)
        done = churn(5000, 30)
        assert done >= 1000
        time.sleep(0.3)  # the server handles the last closes
        grown = log_bytes(tmp_path) - before

        async def broker():
            client = await RemotingClient.connect(host, port)
            await register(client)
            client.abort()  # a broker's channel: its close matters to the tables

        arun(broker())
        wait_until(
            lambda: "channel_close" in [e["type"] for e in events_of(tmp_path, "ns-churn")],
            "the broker's channel_close",
        )
    finally:
        assert stop_server(proc) == 0
    assert grown == 0, f"{grown} bytes logged for {done} connections that sent nothing"
    events = events_of(tmp_path, "ns-churn")
    assert [e["type"] for e in events] == ["ns_start", "register", "channel_close", "ns_stop"]
    assert events[2]["broker_addr"] == "10.0.0.1:10911"
    # each connection that was admitted and closed; the server may accept a burst of closed
    # connections at once, and those over max_connections_per_host are refused, not counted
    assert 0 < events[-1]["silent_closes"] <= done


@pytest.mark.slow
def test_durability_none_warns_and_a_crash_leaves_a_visible_seq_gap(tmp_path):
    config = tmp_path / "ns.toml"
    config.write_text('[eventlog]\ndurability = "none"\n')
    events_dir = tmp_path / "ev"
    proc, host, port = start_server(events_dir, "ns-none", config=config)
    count = 300

    async def register_many():
        client = await RemotingClient.connect(host, port)
        for i in range(count):  # each answered SUCCESS: acknowledged
            await register(client, addr=f"10.0.{i // 200}.{i % 200}:10911", name=f"broker-{i}", topics=(A,))
        client.abort()

    try:
        arun(register_many())
    finally:
        proc.kill()  # SIGKILL: buffered lines are lost
        proc.wait(10)
    warning = proc.stderr.read()
    assert 'durability = "none"' in warning and "Traceback" not in warning
    handed_out = 1 + count  # ns_start, then one register per broker
    on_disk = [e["seq"] for e in events_of(events_dir, "ns-none")]
    proc2, _, _ = start_server(events_dir, "ns-none", config=config)
    assert stop_server(proc2) == 0
    events = events_of(events_dir, "ns-none")
    restart = next(e for e in events if e["type"] == "ns_start" and e["seq"] > (max(on_disk) if on_disk else 0))
    assert restart["seq"] > handed_out, (restart["seq"], handed_out, len(on_disk))
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(seqs) and len(seqs) < seqs[-1]  # the gap a seq_gap finding reports


@contextlib.contextmanager
def small_tmpfs(path: Path, size: str):
    """A tmpfs of ``size`` mounted at ``path`` for the test; skipped when mounting is not permitted."""
    path.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(path)], capture_output=True, text=True
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs (needs root or CAP_SYS_ADMIN): {result.stderr.strip()}")
    try:
        yield path
    finally:
        subprocess.run(["umount", "-l", str(path)], capture_output=True)


def fill(path: Path) -> Path:
    """Write zeros into ``path/filler`` until the filesystem is full."""
    filler = path / "filler"
    chunk = bytes(64 * 1024)
    with open(filler, "wb", buffering=0) as f:
        try:
            for _ in range(100_000):  # bounded: far more than any small tmpfs holds
                f.write(chunk)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC
    return filler


@pytest.mark.slow
def test_full_disk_keeps_lookups_refuses_changes_and_resumes(tmp_path):
    with small_tmpfs(tmp_path / "ev", "2m") as events_dir:
        proc, host, port = start_server(events_dir, "ns-full")
        try:
            refused, answered = arun(_fill_and_recover(events_dir, host, port))
        finally:
            code = stop_server(proc)
            stderr = proc.stderr.read()
        assert code == 0, stderr
        problems: list = []
        events = list(read_events(events_dir, "ns-full", problems))
    assert problems == []  # no line was left cut short
    seqs = [e["seq"] for e in events]
    assert seqs == list(range(1, len(seqs) + 1))
    gap = [e for e in events if e["type"] == "rejected" and e["reason"] == "log_unavailable"]
    assert len(gap) == 1 and gap[0]["refused_count"] >= refused and gap[0]["outage_ms"] > 0
    assert "No space left" in gap[0]["detail"]
    after = events[events.index(gap[0]) + 1 :]
    assert [(e["type"], e.get("broker_addr")) for e in after][0] == ("register", "10.0.2.1:10911")
    assert after[-1]["type"] == "ns_stop"
    assert answered >= 50 and "Traceback" not in stderr


async def _fill_and_recover(events_dir: Path, host: str, port: int) -> tuple[int, int]:
    """Register, fill the disk, check lookups and refusals, free the disk, register again."""
    broker = await RemotingClient.connect(host, port)
    reader = await RemotingClient.connect(host, port)
    await register(broker)
    filler = fill(events_dir)
    refused = 0
    for i in range(200):  # the segment's last page may take a few lines before a write fails
        answer = await broker.register_broker(
            "C1", f"10.0.1.{i}:10911", f"broker-f{i}", 0, "10.0.1.1:10912", DataVersion(1, i), [A]
        )
        if answer.code == ResponseCode.SYSTEM_ERROR:
            refused += 1
            assert "event log" in answer.remark
            if refused >= 3:
                break
    assert refused >= 3, "no registration was refused on a full disk"
    answered = 0
    deadline = time.monotonic() + 1.0
    while time.monotonic() < deadline:
        route = await reader.route("TopicA")
        assert route is not None and route["queue_datas"]
        answered += 1
    filler.unlink()
    for _ in range(100):  # the server retries the log about every second
        answer = await broker.register_broker(
            "C1", "10.0.2.1:10911", "broker-back", 0, "10.0.2.1:10912", DataVersion(1, 1), [A]
        )
        if answer.code == ResponseCode.SUCCESS:
            break
        await asyncio.sleep(0.1)
    assert answer.code == ResponseCode.SUCCESS, answer.remark
    await broker.close()
    await reader.close()
    return refused, answered


# A frame of the largest allowed length whose first 15 MiB arrive, and never the rest.
ATTACK_FRAME_LENGTH = 16 * 1024 * 1024 - 4
ATTACK_SENT_BYTES = 15 * 1024 * 1024
RSS_BOUND = 320 * 1024 * 1024  # default buffer budget (128 MiB) + the server's own + slack


@pytest.mark.slow
def test_partial_frames_on_many_connections_stay_within_the_memory_budget(tmp_path):
    psutil = pytest.importorskip("psutil")
    config = tmp_path / "ns.toml"
    config.write_text("[nameserver]\nmax_connections_per_host = 64\n")
    proc, host, port = start_server(tmp_path / "ev", "ns-mem", config=config)
    server = psutil.Process(proc.pid)
    try:
        peak, lookups, attack = arun(_attack(host, port, server), timeout=120)
    finally:
        code = stop_server(proc)
        stderr = proc.stderr.read()
    assert code == 0 and "Traceback" not in stderr
    assert peak < RSS_BOUND, f"peak RSS {peak / 2**20:.0f} MiB"
    assert lookups >= 10  # the well-behaved client was answered throughout
    assert attack["refused_or_cut"] > 0
    warnings = [line for line in stderr.splitlines() if "buffered" in line or "per host" in line]
    assert 1 <= len(warnings) <= 3, stderr  # rate-limited, not one line per connection


async def _attack(host: str, port: int, server) -> tuple[int, int, dict]:
    client = await RemotingClient.connect(host, port)
    await register(client)
    peak = server.memory_info().rss
    stop = asyncio.Event()

    async def watch():
        nonlocal peak
        while not stop.is_set():
            peak = max(peak, server.memory_info().rss)
            await asyncio.sleep(0.02)

    lookups = 0

    async def look():
        nonlocal lookups
        while not stop.is_set():
            route = await client.route("TopicA")
            assert route is not None and route["queue_datas"]
            lookups += 1
            await asyncio.sleep(0.05)

    attack = {"refused_or_cut": 0}
    chunk = bytes(1024 * 1024)

    async def one_connection():
        try:
            reader, writer = await asyncio.open_connection(host, port)
            writer.write(ATTACK_FRAME_LENGTH.to_bytes(4, "big") + (100).to_bytes(4, "big"))
            for _ in range(ATTACK_SENT_BYTES // len(chunk)):
                writer.write(chunk)
                await writer.drain()
            return writer
        except (ConnectionError, OSError):
            attack["refused_or_cut"] += 1
            return None

    tasks = [asyncio.create_task(watch()), asyncio.create_task(look())]
    try:
        writers = await asyncio.wait_for(asyncio.gather(*[one_connection() for _ in range(100)]), 60)
        await asyncio.sleep(0.5)
        peak = max(peak, server.memory_info().rss)
        for writer in writers:
            if writer is not None:
                writer.transport.abort()
    finally:
        stop.set()
        await asyncio.gather(*tasks)
    assert (await client.route("TopicA")) is not None
    await client.close()
    return peak, lookups, attack
