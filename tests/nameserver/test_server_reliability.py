"""A real ``python -m nameserver`` process under hostile conditions: connection churn, a full disk,
a memory attack and a crash with ``durability = "none"``. Every loop is bounded in count and time.
"""

from __future__ import annotations

import asyncio
import socket
import time
from pathlib import Path

import pytest

from nameserver.client import RemotingClient
from nameserver.codec import ResponseCode
from tests.nameserver.test_server import A, arun, events_of, register, start_server, stop_server


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

        time.sleep(0.2)
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
        time.sleep(0.3)
    finally:
        assert stop_server(proc) == 0
    assert grown == 0, f"{grown} bytes logged for {done} connections that sent nothing"
    events = events_of(tmp_path, "ns-churn")
    assert [e["type"] for e in events] == ["ns_start", "register", "channel_close", "ns_stop"]
    assert events[2]["broker_addr"] == "10.0.0.1:10911"
    assert events[-1]["silent_closes"] == done


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
