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
