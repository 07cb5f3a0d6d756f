"""``nsaudit collect`` against three loaded name servers on loopback: how fast a round goes.

Starts ``--servers`` ``python -m nameserver`` processes (``loopback.NameServerProcess``) and loads
each with ``--brokers`` master brokers and ``--topics`` topics, every topic on ``--per-topic``
brokers (so each broker registers ``topics * per_topic / brokers`` topics). Then runs the
collector (``nameserver.collect.Collector``, in this process, its streams in a temporary folder
with durability ``none``) for ``--rounds`` rounds of every server with ``--interval-ms`` (default 1:
rounds back to back, the route requests unpaced), and prints per round:

* the wall time of a full round of every server (the slowest server's round: the shortest
  interval the collector sustains for these servers);
* route requests per second over all servers;
* CPU seconds of the collector's process (one thread: the asyncio loop does all the work) and of
  each server per round.

The first round writes the full snapshot (``--topics`` route events per server); later ones find no
change. The collector judges every round live, as ``nsaudit collect`` does (``--no-live``: it does
not, for the comparison of CPU per round). ``--scrape-every S`` also serves its metrics and scrapes
them from another thread every S seconds while the rounds run, and prints how long each scrape
took (a real HTTP GET of ``/metrics``, answered by the collector's event loop between its route
requests) and the body's size. The load average is printed at the start and the end. A benchmark,
not a test: it prints figures and asserts nothing.

Usage:
    .venv/bin/python bench/bench_collect.py [--servers 3] [--brokers 1000] [--topics 10000] [--per-topic 4]
        [--rounds 3] [--concurrency 16] [--interval-ms 1] [--no-live] [--scrape-every S]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

import psutil
from loopback import NameServerProcess  # bench/, beside this script

from common.config import CollectConfig, EventLogConfig
from nameserver.client import RemotingClient, register_broker_request
from nameserver.collect.collector import Collector
from nameserver.collect.live.judge import LiveJudge
from nameserver.collect.targets import Target
from nameserver.metrics.endpoint import EndpointThread, MetricsEndpoint
from nameserver.model import DataVersion, TopicConfig

_OK = re.compile(r"^collect (\S+) .* round (\d+): ok, .* (\d+) requests in ([0-9.]+) s")


def placement(brokers: int, topics: int, per_topic: int) -> list[list[TopicConfig]]:
    """Each broker's topics: topic i on brokers i, i+1, ... (mod brokers), ``per_topic`` of them."""
    table: list[list[TopicConfig]] = [[] for _ in range(brokers)]
    for i in range(topics):
        for k in range(per_topic):
            table[(i + k) % brokers].append(TopicConfig(f"BenchTopic-{i:05d}", 8, 8))
    return table


async def load(port: int, table: list[list[TopicConfig]]) -> RemotingClient:
    """Register every broker of ``table`` with the server on ``port``; returns the connection, which
    must stay open (its close unregisters the brokers, as RocketMQ's onChannelDestroy does)."""
    client = await RemotingClient.connect("127.0.0.1", port)
    for n, topic_list in enumerate(table):
        addr = f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}:10911"
        answer = await client.request(
            register_broker_request(
                "BenchCluster",
                addr,
                f"broker-{n:05d}",
                0,
                addr.replace("10911", "10912"),
                DataVersion(1_700_000_000_000, 1),
                topic_list,
            ),
            timeout=60,
        )
        assert answer.code == 0, answer
    return client


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and print its figures."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--servers", type=int, default=3)
    parser.add_argument("--brokers", type=int, default=1000)
    parser.add_argument("--topics", type=int, default=10_000)
    parser.add_argument("--per-topic", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--interval-ms", type=int, default=1)
    parser.add_argument("--no-live", action="store_true", help="no live judgement (the collector of before)")
    parser.add_argument(
        "--scrape-every",
        type=float,
        default=0.0,
        metavar="S",
        help="serve the metrics and scrape them every S seconds (0: no endpoint)",
    )
    args = parser.parse_args(argv)
    print(f"load average at start: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {os.cpu_count()} cores")
    servers = [NameServerProcess() for _ in range(args.servers)]
    try:
        table = placement(args.brokers, args.topics, args.per_topic)
        procs = [psutil.Process(s.proc.pid) for s in servers]
        targets = [Target(f"bench-{i}", "127.0.0.1", s.port) for i, s in enumerate(servers)]
        config = CollectConfig(interval_ms=args.interval_ms, concurrency=args.concurrency, timeout_ms=60_000)
        lines: list[tuple[float, float, list[float], str]] = []  # (wall, own cpu, servers' cpu, line)

        def report(line: str) -> None:
            if line.startswith("collect live:"):
                return
            lines.append((time.perf_counter(), time.process_time(), [sum(p.cpu_times()[:2]) for p in procs], line))

        scrapes: list[tuple[float, int, float]] = []  # (seconds, body bytes, when it began)
        judged: list[float] = []  # CPU seconds of each round's live judgement (its own thread)

        nonlocal_start = [0.0]
        with tempfile.TemporaryDirectory(prefix="nscollect-") as out:

            async def run() -> tuple:
                started = time.perf_counter()
                brokers = [await load(server.port, table) for server in servers]
                print(
                    f"loaded {args.servers} servers with {args.brokers} brokers x {args.topics} topics "
                    f"({args.per_topic} brokers per topic) in {time.perf_counter() - started:.1f} s"
                )
                judge = None if args.no_live else LiveJudge(52_000)
                collector = Collector(targets, out, config, EventLogConfig(durability="none"), report, judge=judge)
                judge_round = collector._judge_round

                def timed_judge_round(*args):  # on the judge's thread: its CPU alone
                    started = time.thread_time()
                    try:
                        return judge_round(*args)
                    finally:
                        judged.append(time.thread_time() - started)

                collector._judge_round = timed_judge_round
                collector.start()
                endpoint = stop = None
                if args.scrape_every:  # served as nsaudit collect serves it, on a thread of its own
                    endpoint = EndpointThread(MetricsEndpoint("127.0.0.1:0", collector.metrics_body))
                    _, port = endpoint.start()
                    stop = threading.Event()
                    threading.Thread(target=scrape, args=(port, args.scrape_every, stop, scrapes), daemon=True).start()
                before = (time.perf_counter(), time.process_time(), [sum(p.cpu_times()[:2]) for p in procs])
                nonlocal_start[0] = before[0]
                await collector.run(args.rounds)
                if endpoint is not None:
                    stop.set()
                    endpoint.stop()
                for client in brokers:
                    await client.close()
                return before

            before = asyncio.run(run())
        started_at = nonlocal_start[0]
        print_rounds(args, before, lines)
        if judged:
            print(
                f"live judgement: {len(judged)} judged rounds, {sum(judged):.3f} CPU s in all: the first "
                f"{args.servers} (full state) {sum(judged[: args.servers]):.3f} s, the others "
                f"{sum(judged[args.servers :]):.4f} s"
            )
        if scrapes:
            times = sorted(t for t, _, _ in scrapes)
            for took, _, at in scrapes:
                if took >= 0.1:
                    print(f"  a scrape of {took * 1000:.0f} ms, begun {at - started_at:.1f} s after the rounds began")
            slow = sum(t >= 0.1 for t in times)
            print(
                f"scrapes during the rounds: {len(times)}, median {statistics.median(times) * 1000:.1f} ms, "
                f"95th percentile {times[int(0.95 * (len(times) - 1))] * 1000:.1f} ms, max {times[-1] * 1000:.1f} ms, "
                f"{slow} of 100 ms or more; body {max(b for _, b, _ in scrapes):,} bytes"
            )
    finally:
        for server in servers:
            server.stop()
    print(f"load average at end: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    return 0


def scrape(port: int, every: float, stop: threading.Event, out: list) -> None:
    """GET /metrics every ``every`` seconds until ``stop``; (seconds, bytes) of each into ``out``."""
    while not stop.wait(every):
        started = time.perf_counter()
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
                body = answer.read()
        except OSError:
            continue
        out.append((time.perf_counter() - started, len(body), started))


def print_rounds(args, before, lines) -> None:
    """Per round of every server: wall time, route requests/s, CPU of the collector and the servers."""
    done: dict[int, list] = {}
    for wall, cpu, server_cpu, line in lines:
        match = _OK.match(line)
        if match is None:
            print(f"not ok: {line}")
            continue
        done.setdefault(int(match[2]), []).append((wall, cpu, server_cpu, int(match[3]), float(match[4])))
    previous = before
    walls = []
    print(
        f"{'round':>5} {'wall s':>8} {'slowest server s':>17} {'requests/s':>11} {'collector cpu s':>16} "
        f"{'servers cpu s':>14}"
    )
    for number in sorted(done):
        entries = done[number]
        if len(entries) < args.servers:
            continue
        end = max(e[0] for e in entries)
        last = max(entries, key=lambda e: e[0])
        wall = end - previous[0]
        requests = sum(e[3] for e in entries)
        cpu = last[1] - previous[1]
        server_cpu = [a - b for a, b in zip(last[2], previous[2], strict=True)]
        walls.append(wall)
        print(
            f"{number:>5} {wall:>8.2f} {max(e[4] for e in entries):>17.2f} {requests / wall:>11,.0f} "
            f"{cpu:>16.2f} {sum(server_cpu) / len(server_cpu):>14.2f}"
        )
        previous = (end, last[1], last[2])
    if len(walls) > 1:
        print(
            f"median of rounds after the first (no change to log): {statistics.median(walls[1:]):.2f} s "
            f"for {args.servers} x {args.topics} topics (target: within 30 s on one core)"
        )


if __name__ == "__main__":
    sys.exit(main())
