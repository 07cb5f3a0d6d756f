"""Lookup latency while oversized registrations arrive, for ``bench_server.py --caps``.

A client asks for a route every millisecond, whether or not earlier answers have come (as a
fleet of clients does: a stalled server delays every lookup that arrives meanwhile), and records
each answer's latency from the moment the request was due; meanwhile another process sends
registrations over a cap of
``[nameserver]``, each answered before the next is sent, at a steady pace and then back to back
(the most one connection can make the server refuse):

* **over the topic cap**: a compressed REGISTER_BROKER of 300,000 topics (about 0.8 MB on the wire,
  9.6 MB inflated), the shape of the oversized registrations the caps exist for;
* **over the byte cap**: a compressed body of one topic whose filter list inflates to 32 MiB
  (32 KB on the wire), refused once inflation reaches the cap (16 MiB by default);
* **the same 0.8 MB frame under a request code no server handles**: read whole and answered
  REQUEST_CODE_NOT_SUPPORTED, what receiving that many bytes costs whatever the frame says.

For each phase with registrations it also gives the server's CPU per registration answered, on
its loop and on its other threads, beyond what the lookups alone cost it.

As a reference, the same 300,000-topic registration, each time with another topic list (new
DataVersion and digest, so its topics are applied and logged), is sent a few times to a server
whose caps are raised to the codec's maximum: what the caps now refuse.

Last, the server's frame decoder alone (:func:`decode_figures`) on the 300,000-topic frame, back to
back and with a pause between frames: what one such frame costs the loop when its memory is warm
in the caches and when it is not.
"""

from __future__ import annotations

import asyncio
import multiprocessing as mp
import resource
import socket
import statistics
import time
import zlib
from pathlib import Path

from loopback import NameServerProcess  # bench/, beside this script

from nameserver.client import RemotingClient, register_broker_request, route_request
from nameserver.codec import FrameDecoder, body_crc32, encode_frame, encode_register_body
from nameserver.model import DataVersion, TopicConfig

BIG_TOPICS = 300_000
# a request code no name server handles: its frame is read whole, then answered
# REQUEST_CODE_NOT_SUPPORTED (3), what reading 0.8 MB costs whatever the frame says
UNKNOWN_CODE = 9999
BOMB_BYTES = 32 << 20
UNCAPPED = "max_register_topics = 1000000000\nmax_register_body_bytes = 268435456\n"


def big_registration(counter: int = 1, variant: str = "a", code: int | None = None) -> bytes:
    """A compressed registration of :data:`BIG_TOPICS` topics, one frame (with ``code``: the same
    frame under another request code)."""
    topics = [TopicConfig(f"Big{variant}-{i:06d}", 8, 8) for i in range(BIG_TOPICS)]
    request = register_broker_request(
        "BenchCluster",
        "10.9.0.1:10911",
        "broker-big",
        0,
        "10.9.0.1:10912",
        DataVersion(1_700_000_000_000, counter),
        topics,
        compressed=True,
    )
    if code is not None:
        request.code = code
    return encode_frame(request)


def inflation_bomb() -> bytes:
    """A compressed registration of one topic whose filter list inflates to :data:`BOMB_BYTES`."""
    inflated = zlib.decompress(encode_register_body(DataVersion(1, 1), [TopicConfig("T", 8, 8)], [], compressed=True))
    filters = b"[" + b" " * (BOMB_BYTES - 2) + b"]"
    body = zlib.compress(inflated[:-6] + len(filters).to_bytes(4, "big") + filters, 9)
    request = register_broker_request(
        "BenchCluster", "10.9.0.2:10911", "broker-bomb", 0, "10.9.0.2:10912", DataVersion(1, 1), [], compressed=True
    )
    request.body = body
    request.ext_fields = dict(request.ext_fields, compressed="true", bodyCrc32=str(body_crc32(body)))
    return encode_frame(request)


def sender_main(port: int, frames: list[bytes], pause_s: float, once: bool, stop, out) -> None:
    """Child process: send ``frames`` in turn, one in flight and ``pause_s`` after each answer,
    until ``stop`` (with ``once``: each frame once)."""
    sock = socket.create_connection(("127.0.0.1", port))
    decoder, sent, codes = FrameDecoder(), 0, []
    while not stop.is_set() and not (once and sent == len(frames)):
        sock.sendall(frames[sent % len(frames)])
        sent += 1
        while (answer := decoder.next_command()) is None:
            decoder.feed(sock.recv(1 << 16))
        codes.append(answer.code)
        if pause_s:
            time.sleep(pause_s)
    sock.close()
    out.send(codes)


LOOKUPS_PER_S = 1000


def lookup_latencies(port: int, seconds: float) -> list[float]:
    """Latencies (ms) of GET_ROUTEINFO_BY_TOPIC sent at :data:`LOOKUPS_PER_S` for ``seconds``,
    each from the instant it was due (open loop: a stall delays every request due meanwhile)."""

    async def run() -> list[float]:
        client = await RemotingClient.connect("127.0.0.1", port)
        out: list[float] = []

        async def one(due: float) -> None:
            answer = await client.request(route_request("BenchTopic-00001"), timeout=60)
            out.append((time.perf_counter() - due) * 1000)
            assert answer.code == 0, answer

        tasks, start, sent = [], time.perf_counter(), 0
        while (now := time.perf_counter()) < start + seconds:
            due = start + sent / LOOKUPS_PER_S
            if now < due:
                await asyncio.sleep(due - now)
                continue
            tasks.append(asyncio.ensure_future(one(due)))
            sent += 1
        await asyncio.gather(*tasks)
        await client.close()
        return out

    return asyncio.run(run())


def seed(port: int) -> socket.socket:
    """One broker with one topic, so lookups answer a route; its connection stays open."""
    sock = socket.create_connection(("127.0.0.1", port))
    request = register_broker_request(
        "BenchCluster",
        "10.8.0.1:10911",
        "broker-seed",
        0,
        "10.8.0.1:10912",
        DataVersion(1, 1),
        [TopicConfig("BenchTopic-00001", 8, 8)],
    )
    sock.sendall(encode_frame(request))
    decoder = FrameDecoder()
    while (answer := decoder.next_command()) is None:
        decoder.feed(sock.recv(1 << 16))
    assert answer.code == 0, answer
    return sock


def phase(
    port: int, frames: list[bytes] | None, seconds: float, pause_s: float = 0.0, once: bool = False
) -> tuple[list[float], list[int]]:
    """Lookup latencies while a sender process sends ``frames`` (None: nothing); and its answers' codes."""
    if frames is None:
        return lookup_latencies(port, seconds), []
    stop, (parent, child) = mp.Event(), mp.Pipe()
    sender = mp.Process(target=sender_main, args=(port, frames, pause_s, once, stop, child))
    sender.start()
    time.sleep(0.3)
    latencies = lookup_latencies(port, seconds)
    stop.set()
    codes = parent.recv()
    sender.join(60)
    return latencies, codes


def decode_figures(frames: int = 30, pause_s: float = 0.1) -> dict[str, tuple[float, float]]:
    """The server's frame decoder alone on one topic-cap registration, fed in 256 KiB reads as
    asyncio reads a socket: median milliseconds per frame and page faults per frame, back to back
    and with ``pause_s`` between frames (busy-waiting, so the CPU never idles)."""
    frame = big_registration()
    reads = [frame[i : i + (256 << 10)] for i in range(0, len(frame), 256 << 10)]
    decoder = FrameDecoder()
    figures = {}
    for label, pause in (("back to back", 0.0), (f"{pause_s * 1000:.0f} ms apart", pause_s)):
        times, faults = [], []
        for _ in range(frames):
            before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
            start = time.perf_counter()
            for piece in reads:
                decoder.feed(piece)
                command = decoder.next_command()
            times.append((time.perf_counter() - start) * 1000)
            faults.append(resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
            assert command is not None and command.body
            del command
            until = time.perf_counter() + pause
            while time.perf_counter() < until:
                pass
        figures[label] = (statistics.median(times), statistics.median(faults))
    return figures


def thread_seconds(pid: int) -> tuple[float, float]:
    """CPU seconds so far of a process's main thread (the server's loop) and of its other threads
    (``/proc/PID/task/TID/schedstat``: nanoseconds, where ``ps`` counts clock ticks of 10 ms)."""
    main, others = 0.0, 0.0
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            seconds = int((task / "schedstat").read_text().split()[0]) / 1e9
        except (FileNotFoundError, ProcessLookupError):  # a thread that ended meanwhile
            continue
        if task.name == str(pid):
            main = seconds
        else:
            others += seconds
    return main, others


def summary(latencies: list[float]) -> tuple[float, float, float]:
    """p50, p99 and max (ms)."""
    ordered = sorted(latencies)
    return statistics.median(ordered), ordered[int(0.99 * (len(ordered) - 1))], ordered[-1]


Phase = tuple[tuple[float, float, float], int, str, tuple[float, float] | None]


def run_caps(seconds: float) -> dict[str, Phase]:
    """Each phase once: ``{label: ((p50, p99, max), lookups, what the sender's answers were,
    the server's CPU ms per registration on its loop and on its other threads)}``.

    The CPU per registration is the server's CPU during the phase less what the lookups alone
    cost it (the first phase's CPU a second), over the registrations answered."""
    big, bomb = big_registration(), inflation_bomb()
    unknown = big_registration(code=UNKNOWN_CODE)
    out: dict[str, Phase] = {}
    server = NameServerProcess()
    try:
        keep = seed(server.port)
        idle = (0.0, 0.0)  # CPU seconds a second of the loop and the other threads, lookups only
        for label, frames, pause_s in (
            ("no registrations", None, 0.0),
            ("over the topic cap, 10 a second", [big], 0.1),
            ("the same frame, a code unhandled, 10 a second", [unknown], 0.1),
            ("over the byte cap, 1 a second", [bomb], 1.0),
            ("over the topic cap, back to back", [big], 0.0),
            ("over the byte cap, back to back", [bomb], 0.0),
        ):
            before, start = thread_seconds(server.proc.pid), time.perf_counter()
            latencies, codes = phase(server.port, frames, seconds, pause_s)
            after, elapsed = thread_seconds(server.proc.pid), time.perf_counter() - start
            used = (after[0] - before[0], after[1] - before[1])
            cpu = None
            if codes:
                loop, others = (max(0.0, u - rate * elapsed) for u, rate in zip(used, idle, strict=True))
                cpu = (loop / len(codes) * 1000, others / len(codes) * 1000)
            else:
                idle = (used[0] / elapsed, used[1] / elapsed)
            refused = f"{sum(c in (1, 3) for c in codes)} of {len(codes)} refused" if codes else "-"
            out[label] = (summary(latencies), len(latencies), refused, cpu)
        keep.close()
    finally:
        server.stop()
    server = NameServerProcess(UNCAPPED)
    try:
        keep = seed(server.port)
        reference = [big_registration(n, variant) for n, variant in ((2, "b"), (3, "c"), (4, "d"))]
        latencies, codes = phase(server.port, reference, seconds, pause_s=0.5, once=True)
        out["reference: 3 of them applied, caps raised"] = (
            summary(latencies),
            len(latencies),
            f"{codes.count(0)} of {len(codes)} applied",
            None,
        )
        keep.close()
    finally:
        server.stop()
    return out
