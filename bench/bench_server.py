"""Name-server throughput and memory on loopback, against a bare asyncio echo server's ceiling.

Measures, in one run:

* **echo ceiling**: a bare asyncio server that splits frames by the same length prefix and writes
  back every complete frame of a read, driven by the same clients (the most any asyncio server on
  this machine could answer with this framing);
* **route lookups/s** (GET_ROUTEINFO_BY_TOPIC) against ``python -m nameserver``, with one request
  in flight per connection (RocketMQ clients invoke synchronously) and pipelined;
* **REGISTER_BROKER/s**, durable under the default group commit (every answer waits for the fsync
  of its event), for brokers with 10 topics and with 2,000 topics: periodic re-registrations (the
  same body, as every broker sends every 30 s) and ones with a new DataVersion every time;
* **RSS of the tables** for 1,000 brokers x 2,000 topics (every broker registers all topics).

With ``--caps`` it measures instead the latency of route lookups (p50, p99, max; 1,000 a second,
sent whether or not earlier ones were answered) while registrations over ``[nameserver] max_register_topics`` or
``max_register_body_bytes`` arrive at a steady pace and back to back, against the same lookups
alone and against a few such registrations applied by a server whose caps are raised; and the
server's CPU per registration it refuses, on its loop and on its other threads (``capped.py``).

Clients run in separate processes (asyncio, frames encoded once, answers counted by their length
prefix). Besides throughput, each figure reports the server process's CPU time per answer, which
depends far less than throughput on what else the machine runs (not at all only on an idle
machine: cache and scheduler contention still show). Every figure is the median of ``--runs``
runs; the load average is printed at the start and at the end.
This is a benchmark, not a test: it prints figures and asserts nothing.

Usage:
    .venv/bin/python bench/bench_server.py [--runs 3] [--seconds 3] [--procs 2] [--conns 32] [--depth 8]
        [--lookups-only]
    .venv/bin/python bench/bench_server.py --caps [--runs 3] [--seconds 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import sys
import time

from capped import decode_figures, run_caps  # bench/, beside this script
from loopback import EchoProcess, NameServerProcess, drive

from nameserver.client import RemotingClient, register_broker_request, route_request
from nameserver.codec import FrameDecoder, body_crc32, encode_frame
from nameserver.model import DataVersion, TopicConfig

LOOKUP_BROKERS = 100
LOOKUP_TOPICS = 500

# ---------------------------------------------------------------------- workloads


def topics(n: int, prefix: str = "BenchTopic") -> list[TopicConfig]:
    return [TopicConfig(f"{prefix}-{i:05d}", 8, 8) for i in range(n)]


def broker_request(n: int, topic_list: list[TopicConfig], compressed: bool = False, counter: int = 1):
    addr = f"10.{n // 65536 % 256}.{n // 256 % 256}.{n % 256}:10911"
    return register_broker_request(
        "BenchCluster",
        addr,
        f"broker-{n:05d}",
        0,
        addr.replace("10911", "10912"),
        DataVersion(1_700_000_000_000, counter),
        topic_list,
        compressed=compressed,
    )


def seed_lookup_tables(port: int) -> socket.socket:
    """100 brokers, 500 topics, each topic on 2 brokers (routes of ~400 bytes).

    Returns:
        The brokers' connection: it must stay open, or its brokers leave (docs/nameserver-semantics.md §2.4).
    """
    sock = socket.create_connection(("127.0.0.1", port))
    decoder = FrameDecoder()
    all_topics = topics(LOOKUP_TOPICS)
    for n in range(LOOKUP_BROKERS):
        mine = [t for i, t in enumerate(all_topics) if i % LOOKUP_BROKERS in (n, (n + 1) % LOOKUP_BROKERS)]
        sock.sendall(encode_frame(broker_request(n, mine)))
        while (answer := decoder.next_command()) is None:
            decoder.feed(sock.recv(1 << 16))
        assert answer.code == 0, answer
    return sock


def lookup_frames(conns: int) -> list[list[bytes]]:
    names = [t.topic for t in topics(LOOKUP_TOPICS)]
    return [[encode_frame(route_request(names[(c * 37 + i) % len(names)])) for i in range(64)] for c in range(conns)]


def register_frames(conns: int, n_topics: int, base: int, distinct: int = 1) -> list[list[bytes]]:
    """One broker per connection. ``distinct`` = 1: the same body every time, as a periodic
    re-registration; more: a new DataVersion per request, cycling through more bodies than the
    server's decoded-body cache holds, so every body is decoded afresh (topic changes).

    The body does not name its broker, so with ``distinct`` > 1 every connection counts from its
    own offset: ``conns * distinct`` bodies in all (with one shared set of counters, 80 bodies
    of 10 topics would all stay in the cache and nothing would be decoded afresh)."""
    topic_list = topics(n_topics)
    offset = distinct if distinct > 1 else 0
    return [
        [encode_frame(broker_request(base + c, topic_list, counter=1 + c * offset + k)) for k in range(distinct)]
        for c in range(conns)
    ]


def measure_rss(brokers: int = 1000, n_topics: int = 2000) -> tuple[int, int]:
    """RSS before and after ``brokers`` masters each register the same ``n_topics`` topics.

    Every broker sends its own DataVersion, so every body is distinct (as in a real fleet) and
    the server's decoded-body cache fills to its bound; it is part of the figure.
    """
    server = NameServerProcess()
    try:
        time.sleep(0.5)
        before = server.rss()
        template = broker_request(0, topics(n_topics), counter=1)
        assert template.body.count(b'"counter":1,') == 1

        def request(n: int):
            req = broker_request(n, [], counter=1)
            req.body = template.body.replace(b'"counter":1,', b'"counter":%d,' % (n + 1))
            req.ext_fields = dict(req.ext_fields, bodyCrc32=str(body_crc32(req.body)))
            return req

        async def fill_and_hold():
            client = await RemotingClient.connect("127.0.0.1", server.port)
            for n in range(brokers):
                answer = await client.request(request(n), timeout=60)
                assert answer.code == 0, answer
            await asyncio.sleep(1.0)
            after = server.rss()
            await client.close()
            return after

        return before, asyncio.run(fill_and_hold())
    finally:
        server.stop()


# ---------------------------------------------------------------------- main


FIGURES = (
    # key, label, baseline key for the ratio, target note
    ("echo1", "echo ceiling, 1 request in flight per connection", "echo1", ""),
    ("lookup1", "GET_ROUTEINFO_BY_TOPIC, 1 in flight per connection", "echo1", "target >= 0.50 x echo"),
    ("echoN", "echo ceiling, DEPTH in flight per connection", "echoN", ""),
    ("lookupN", "GET_ROUTEINFO_BY_TOPIC, DEPTH in flight per connection", "echoN", "target >= 0.50 x echo"),
    ("reg10", "REGISTER_BROKER durable, 10 topics, periodic", "echo1", "target >= 5,000/s"),
    ("reg10new", "REGISTER_BROKER durable, 10 topics, new DataVersion each", "echo1", ""),
    ("reg2000", "REGISTER_BROKER durable, 2,000 topics, periodic", "echo1", ""),
    ("reg2000new", "REGISTER_BROKER durable, 2,000 topics, new DataVersion each", "echo1", ""),
)


def one_run(args) -> dict[str, tuple[float, float]]:
    """Every figure once: the echo server first, then one name server for the rest.

    Lookups run twice: with one request in flight per connection, as RocketMQ clients invoke
    synchronously (many connections), and pipelined (``--depth`` in flight), where the echo
    server's per-frame cost all but vanishes. Registering brokers keep one request in flight each.
    """
    out = {}
    echo = EchoProcess()
    try:
        for key, depth in (("echo1", 1), ("echoN", args.depth)):
            out[key] = drive(
                echo.port, lookup_frames(args.conns), args.procs, depth, args.seconds, echo.proc.pid, check=False
            )
    finally:
        echo.stop()
    server = NameServerProcess()
    try:
        brokers = seed_lookup_tables(server.port)
        pid = server.proc.pid
        for key, depth in (("lookup1", 1), ("lookupN", args.depth)):
            out[key] = drive(server.port, lookup_frames(args.conns), args.procs, depth, args.seconds, pid)
        if args.lookups_only:
            brokers.close()
            return out
        out["reg10"] = drive(server.port, register_frames(args.brokers, 10, 10_000), args.procs, 1, args.seconds, pid)
        out["reg10new"] = drive(
            server.port, register_frames(args.brokers, 10, 20_000, distinct=80), args.procs, 1, args.seconds, pid
        )
        out["reg2000"] = drive(server.port, register_frames(16, 2000, 30_000), args.procs, 1, args.seconds, pid)
        out["reg2000new"] = drive(
            server.port, register_frames(16, 2000, 40_000, distinct=8), args.procs, 1, args.seconds, pid
        )
        brokers.close()
    finally:
        server.stop()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per figure; medians are printed (default 3)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per figure (default 3)")
    parser.add_argument("--procs", type=int, default=2, help="client processes (default 2)")
    parser.add_argument("--conns", type=int, default=32, help="lookup/echo connections (default 32)")
    parser.add_argument(
        "--depth", type=int, default=8, help="lookups in flight per connection for the pipelined figures (default 8)"
    )
    parser.add_argument(
        "--brokers",
        type=int,
        default=256,
        help="registering brokers (connections) for the 10-topic figures (default 256)",
    )
    parser.add_argument("--skip-rss", action="store_true", help="skip the 1000 x 2000 memory figure")
    parser.add_argument(
        "--lookups-only", action="store_true", help="only the echo and lookup figures (implies --skip-rss)"
    )
    parser.add_argument(
        "--caps", action="store_true", help="only lookup latency while registrations over the caps arrive (capped.py)"
    )
    args = parser.parse_args(argv)
    if args.caps:
        return caps_main(args)
    load = os.getloadavg()[0]
    print(
        f"machine: {os.cpu_count()} CPUs, load average {load:.1f}, Python {sys.version.split()[0]}; "
        f"{args.procs} client processes; lookups over {args.conns} connections; "
        f"{args.runs} runs of {args.seconds:g} s per figure"
    )
    runs = []
    for run in range(args.runs):
        runs.append(one_run(args))
        print(f"run {run + 1}: " + ", ".join(f"{k} {v[0]:,.0f}/s" for k, v in runs[-1].items()), flush=True)
    med = {
        key: (statistics.median(r[key][0] for r in runs), statistics.median(r[key][1] for r in runs))
        for key, _, _, _ in FIGURES
        if key in runs[0]
    }
    print()
    print(f"{'figure (medians)':<60}{'per s':>10}{'x echo':>8}{'server CPU':>13}{'CPU x echo':>12}")
    for key, label, base, note in FIGURES:
        if key not in med:
            continue
        rate, cpu = med[key]
        base_rate, base_cpu = med[base]
        print(
            f"{label.replace('DEPTH', str(args.depth)):<60}{rate:>10,.0f}{rate / base_rate:>8.2f}"
            f"{cpu:>10,.1f} us{base_cpu / cpu:>12.2f}" + (f"   {note}" if note else "")
        )
    print(
        "('x echo' = throughput / the echo figure with the same requests in flight; 'server CPU' = the server"
        " process's CPU time per answer; 'CPU x echo' = echo's CPU per answer / ours, the ratio the"
        " throughputs would have if the server had a CPU to itself)"
    )
    if not (args.skip_rss or args.lookups_only):
        before, after = measure_rss()
        mib = 1024 * 1024
        print(
            f"RSS for 1,000 brokers x 2,000 topics: {after / mib:,.0f} MiB total, "
            f"{(after - before) / mib:,.0f} MiB for the tables (idle server {before / mib:,.0f} MiB); "
            f"target < 256 MiB"
        )
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


def caps_main(args) -> int:
    """``--caps``: lookup latency per phase, medians over ``--runs`` runs of ``--seconds`` each."""
    print(
        f"machine: {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, Python {sys.version.split()[0]}; "
        f"{args.runs} runs of {args.seconds:g} s per phase"
    )
    runs = []
    for run in range(args.runs):
        runs.append(run_caps(args.seconds))
        print(
            f"run {run + 1}: " + ", ".join(f"{label}: p99 {v[0][1]:.2f} ms" for label, v in runs[-1].items()),
            flush=True,
        )
    print()
    print(
        f"{'route lookups, 1,000 a second (medians)':<48}{'p50 ms':>9}{'p99 ms':>9}{'max ms':>9}{'lookups':>9}"
        "   sender's answers (last run)"
    )
    for label in runs[0]:
        p50, p99, top = (statistics.median(r[label][0][k] for r in runs) for k in range(3))
        count = statistics.median(r[label][1] for r in runs)
        print(f"{label:<48}{p50:>9.2f}{p99:>9.2f}{top:>9.1f}{count:>9,.0f}   {runs[-1][label][2]}")
    print()
    print("the server's CPU per registration refused, beyond what the lookups cost it (medians):")
    for label in runs[0]:
        cpus = [r[label][3] for r in runs if r[label][3] is not None]
        if cpus:
            loop, others = (statistics.median(c[k] for c in cpus) for k in range(2))
            print(f"  {label:<46}loop {loop:>6.3f} ms   other threads {others:>6.3f} ms")
    print()
    print("the frame decoder alone on one topic-cap registration (0.8 MB, read 256 KiB at a time), medians:")
    for label, (ms, faults) in decode_figures().items():
        print(f"  {label:<20}{ms:>8.3f} ms a frame{faults:>6.0f} page faults a frame")
    print(f"load average at the end {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
