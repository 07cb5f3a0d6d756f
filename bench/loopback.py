"""Loopback load for bench_server.py: the name server and an echo ceiling as processes, and client
processes that drive pre-encoded frames at them for a measured window.

A client counts an answer by its length prefix only, so the same clients drive both servers.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import os
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

# ---------------------------------------------------------------------- servers


# Echo server and load clients read like the name server's channel: into one receive buffer
# (asyncio.BufferedProtocol, recv_into). A plain Protocol gets a fresh bytes object from
# recv(256 KiB) per read, which glibc maps and unmaps: 10-20 us per read, more than the echo
# itself, which would make a poor ceiling.
RECV_BUFFER = memoryview(bytearray(256 * 1024))  # one per process; each process runs one loop


class EchoProtocol(asyncio.BufferedProtocol):
    """Echo whole frames (4-byte big-endian length prefix), nothing else."""

    def connection_made(self, transport):
        self.transport = transport
        self.buf = bytearray()

    def get_buffer(self, sizehint):
        return RECV_BUFFER

    def buffer_updated(self, nbytes):
        buf = self.buf
        buf += RECV_BUFFER[:nbytes]
        pos, end = 0, len(buf)
        while end - pos >= 4:
            length = int.from_bytes(buf[pos : pos + 4], "big")
            if end - pos < 4 + length:
                break
            pos += 4 + length
        if pos:
            self.transport.write(bytes(buf[:pos]))  # every complete frame of this read, one write
            del buf[:pos]


def echo_server_main(ready) -> None:
    """Child process: serve echo on 127.0.0.1:0 until SIGTERM."""

    async def main():
        server = await asyncio.get_running_loop().create_server(EchoProtocol, "127.0.0.1", 0, backlog=1024)
        ready.send(server.sockets[0].getsockname()[1])
        stop = asyncio.Event()
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, stop.set)
        await stop.wait()

    asyncio.run(main())


class NameServerProcess:
    """``python -m nameserver`` on 127.0.0.1:0 with long timers and the default group commit.

    Args:
        nameserver_keys: more ``[nameserver]`` lines of the config (TOML).
    """

    def __init__(self, nameserver_keys: str = "") -> None:
        self.dir = tempfile.TemporaryDirectory(prefix="nsbench-")
        config = Path(self.dir.name) / "bench.toml"
        config.write_text(
            "[nameserver]\nbroker_expiry_ms = 3600000\nmax_connections = 100000\n"
            + nameserver_keys
            + '[eventlog]\ndurability = "group"\n'
        )
        self.proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nameserver",
                "--ns-id",
                "bench",
                "--listen",
                "127.0.0.1:0",
                "--events",
                str(Path(self.dir.name) / "events"),
                "--config",
                str(config),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        if not select.select([self.proc.stdout], [], [], 30)[0]:
            raise RuntimeError("name server did not start")
        self.port = int(self.proc.stdout.readline().rsplit(":", 1)[1])

    def rss(self) -> int:
        return psutil.Process(self.proc.pid).memory_info().rss

    def stop(self) -> None:
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(60)
        self.dir.cleanup()


class EchoProcess:
    """The echo server in a child process."""

    def __init__(self) -> None:
        parent, child = mp.Pipe()
        self.proc = mp.Process(target=echo_server_main, args=(child,), daemon=True)
        self.proc.start()
        self.port = parent.recv()

    def stop(self) -> None:
        os.kill(self.proc.pid, signal.SIGTERM)
        self.proc.join(10)


# ---------------------------------------------------------------------- load generator


class LoadProtocol(asyncio.BufferedProtocol):
    """Keeps ``depth`` requests in flight; counts answers; checks the first answer's code is 0."""

    def __init__(self, frames: list[bytes], depth: int, state: dict, check: bool) -> None:
        self.frames, self.depth, self.state = frames, depth, state
        self.buf = bytearray()
        self.next = 0
        self.checked = not check

    def connection_made(self, transport):
        self.transport = transport

    def start(self):
        self._send(self.depth)

    def _send(self, count: int):
        frames, n = self.frames, len(self.frames)
        out = [frames[(self.next + i) % n] for i in range(count)]
        self.next += count
        self.transport.write(b"".join(out))  # one write for every answer of this read

    def get_buffer(self, sizehint):
        return RECV_BUFFER

    def buffer_updated(self, nbytes):
        buf = self.buf
        buf += RECV_BUFFER[:nbytes]
        pos, end, done = 0, len(buf), 0
        while end - pos >= 4:
            length = int.from_bytes(buf[pos : pos + 4], "big")
            if end - pos < 4 + length:
                break
            if not self.checked:
                self.checked = True
                if not bytes(buf[pos + 8 : pos + 20]).startswith(b'{"code":0,'):
                    self.state["errors"] += 1
            pos += 4 + length
            done += 1
        del buf[:pos]
        state = self.state
        state["answers"] += done
        if state["running"] and done:
            self._send(done)


def client_main(
    port: int, frame_sets: list[list[bytes]], depth: int, window: tuple[float, float], check: bool, out
) -> None:
    """Child process: one connection per frame set; counts answers inside the wall-clock window."""

    async def main():
        state = {"answers": 0, "errors": 0, "running": True}
        loop = asyncio.get_running_loop()
        protocols = []
        for frames in frame_sets:
            _, proto = await loop.create_connection(
                lambda f=frames: LoadProtocol(f, depth, state, check), "127.0.0.1", port
            )
            protocols.append(proto)
        await asyncio.sleep(max(0.0, window[0] - WARMUP_S - time.time()))
        for proto in protocols:
            proto.start()
        await asyncio.sleep(max(0.0, window[0] - time.time()))
        counted = state["answers"]
        await asyncio.sleep(max(0.0, window[1] - time.time()))
        total = state["answers"] - counted
        state["running"] = False
        await asyncio.sleep(0.2)
        out.send((total, state["errors"]))

    asyncio.run(main())


WARMUP_S = 0.3


def drive(
    port: int,
    frame_sets: list[list[bytes]],
    procs: int,
    depth: int,
    seconds: float,
    server_pid: int,
    check: bool = True,
) -> tuple[float, float]:
    """Run ``procs`` client processes sharing ``frame_sets`` (one connection each).

    With ``check`` each connection's first answer must be SUCCESS (off for the echo server).

    Returns:
        Answers per second in the measured window, and the server's CPU microseconds per answer
        in that window (user + system), which does not depend on how busy the machine is.
    """
    begin = time.time() + 1.0 + 0.003 * len(frame_sets) + WARMUP_S
    window = (begin, begin + seconds)
    pipes, workers = [], []
    for p in range(procs):
        parent, child = mp.Pipe()
        worker = mp.Process(target=client_main, args=(port, frame_sets[p::procs], depth, window, check, child))
        worker.start()
        pipes.append(parent)
        workers.append(worker)
    server = psutil.Process(server_pid)
    time.sleep(max(0.0, window[0] - time.time()))
    cpu0 = sum(server.cpu_times()[:2])
    time.sleep(max(0.0, window[1] - time.time()))
    cpu1 = sum(server.cpu_times()[:2])
    results = [pipe.recv() for pipe in pipes]
    for worker in workers:
        worker.join(30)
    errors = sum(e for _, e in results)
    if errors:
        raise RuntimeError(f"{errors} connections got a non-SUCCESS answer")
    answers = sum(n for n, _ in results)
    return answers / seconds, (cpu1 - cpu0) * 1e6 / max(answers, 1)
