"""Real Apache RocketMQ processes for the interop tests: name servers, brokers and a client JVM.

The jars come from ``jars/`` (``bash jars/fetch.sh``, run by ``.ci/setup.sh``). Every process runs
on ``127.0.0.1`` with free ports and a small heap, writes its output to ``<run_dir>/<name>.log``
(kept after the run: the conftest shows their tails when a test fails), and is stopped by its pid.

- :class:`Release`: where one RocketMQ version's jars are.
- :class:`JavaProcess`: one JVM (or our name server) started, waited for, paused, killed, stopped.
- :func:`start_java_namesrv`, :func:`start_broker`, :func:`start_nsaudit_nameserver`.
- :class:`Driver`: one long-running JVM (``java/RocketDriver.java``) that plays mqadmin, producer
  and consumer with the real ``rocketmq-tools`` and ``rocketmq-client`` of a release.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nameserver.codec import fastjson

REPO = Path(__file__).resolve().parents[2]
JARS = REPO / "jars"
DRIVER_SOURCE = Path(__file__).with_name("java") / "RocketDriver.java"
START_TIMEOUT_S = 90.0

# A broker on JDK 17 reaches into the JDK's internals (RocketMQ's own start scripts pass these).
JDK17_OPENS = [
    "--add-exports",
    "java.base/jdk.internal.ref=ALL-UNNAMED",
    "--add-opens",
    "java.base/java.nio=ALL-UNNAMED",
    "--add-opens",
    "java.base/sun.nio.ch=ALL-UNNAMED",
]


@dataclass(frozen=True)
class Release:
    """One Apache RocketMQ version line: the classpath of its servers and of its client and tools."""

    name: str
    server_lib: Path
    client_lib: Path
    label: str

    def check(self) -> None:
        """Fail with the command that fetches the jars when they are missing."""
        for lib in (self.server_lib, self.client_lib):
            if not (lib / ".fetched").exists():
                raise RuntimeError(f"RocketMQ {self.label} jars missing in {lib}: run bash jars/fetch.sh")


RELEASES = {
    # Maven Central as served here lacks 4.9.8's namesrv and broker jars: 4.9.7 servers, 4.9.8 clients
    "4.9": Release(
        "4.9",
        JARS / "rocketmq-4.9-server" / "lib",
        JARS / "rocketmq-4.9-client" / "lib",
        "4.9.7 servers, 4.9.8 client and tools",
    ),
    "5": Release("5", JARS / "rocketmq-5" / "lib", JARS / "rocketmq-5" / "lib", "5.3.3"),
}


def run_async(coro):
    """Run ``coro`` to its end on a new event loop in a thread of its own, so a loop another test
    left running in this thread (playwright's, nbclient's) cannot get in the way."""

    def target():
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(coro)
        finally:
            loop.close()

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(target).result()


def free_port(around: tuple[int, ...] = (0,)) -> int:
    """A port P such that P+d is free on 127.0.0.1 for every d in ``around`` (a broker also binds
    P-2, its fast channel, and P+1, its HA port).

    Chosen below the kernel's ephemeral range, so that no outgoing connection's source port takes
    it in the seconds before the server's JVM binds it (a loaded run lost a broker to "Address
    already in use" that way), and never handed out twice in this process (the two releases'
    scenarios start their servers at once, on threads)."""
    ephemeral_low = _ephemeral_low()
    with _PORTS_LOCK:
        for _ in range(500):
            port = _PORT_CHOICE.randrange(10_000, ephemeral_low - max(around) - 1)
            span = {port + d for d in around}
            if span & _HANDED_OUT or not all(_is_free(p) for p in span):
                continue
            _HANDED_OUT.update(span)
            return port
    raise RuntimeError("no free port range found")


_PORTS_LOCK = threading.Lock()
_HANDED_OUT: set[int] = set()
_PORT_CHOICE = random.Random()


def _ephemeral_low() -> int:
    """The first port of the kernel's ephemeral range (32768 when it cannot be read)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def _is_free(port: int) -> bool:
    with socket.socket() as probe:
        try:
            probe.bind(("127.0.0.1", port))
        except OSError:
            return False
    return True


@dataclass
class JavaProcess:
    """One started process: its pid, log file and the line that says it is ready."""

    name: str
    argv: list[str]
    log: Path
    ready: str
    cwd: Path
    proc: subprocess.Popen | None = None

    def start(self) -> JavaProcess:
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log, "ab") as out:
            self.proc = subprocess.Popen(
                self.argv, stdout=out, stderr=subprocess.STDOUT, cwd=self.cwd, stdin=subprocess.DEVNULL
            )
        return self

    def wait_ready(self, timeout_s: float = START_TIMEOUT_S) -> JavaProcess:
        """Wait for the ready line in the log; raise with the log's tail if the process ends first."""
        wait_for(
            lambda: self.ready in self.log.read_text(errors="replace"),
            timeout_s,
            f"{self.name} to print {self.ready!r}",
            alive=self,
        )
        return self

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def tail(self, lines: int = 40) -> str:
        if not self.log.exists():
            return ""
        # without 5.x's logback start-up chatter ("12:00:00,000 |-INFO in ...")
        kept = [line for line in self.log.read_text(errors="replace").splitlines() if " |-" not in line[:16]]
        return "\n".join(kept[-lines:])

    def signal(self, sig: int) -> None:
        if self.running():
            os.kill(self.pid, sig)

    def kill(self) -> None:
        """``kill -9``: no shutdown hook runs, the kernel closes the sockets."""
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=30)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        """SIGTERM (shutdown hooks run), then SIGKILL if it has not ended in ``timeout_s``."""
        if self.proc is None:
            return None
        self.signal(signal.SIGCONT)
        self.signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=30)


def wait_for(
    check: Callable[[], object], timeout_s: float, what: str, *, alive: JavaProcess | None = None, every_s: float = 0.2
):
    """Poll ``check`` until it returns something truthy; raise naming ``what`` on timeout."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = check()
        if value:
            return value
        if alive is not None and not alive.running():
            raise RuntimeError(
                f"{alive.name} ended (exit {alive.proc.returncode}) while waiting for {what}; "
                f"log {alive.log}:\n{alive.tail()}"
            )
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout_s:.0f} s waiting for {what}")
        time.sleep(every_s)


# ---------------------------------------------------------------------------- RocketMQ's servers


_LOGBACK = """<configuration>
  <appender name="FILE" class="ch.qos.logback.core.FileAppender">
    <file>{log}</file>
    <encoder><pattern>%d{{HH:mm:ss.SSS}} %-5level %logger{{0}} - %msg%n</pattern></encoder>
  </appender>
  <root level="INFO"><appender-ref ref="FILE"/></root>
</configuration>
"""


def rocketmq_home(run_dir: Path) -> Path:
    """A ``ROCKETMQ_HOME`` with the ``conf/logback_*.xml`` 4.9 reads at start (5.x carries its own)."""
    home = run_dir / "rocketmq-home"
    (home / "conf").mkdir(parents=True, exist_ok=True)
    for part in ("namesrv", "broker", "tools"):
        path = home / "conf" / f"logback_{part}.xml"
        if not path.exists():
            path.write_text(_LOGBACK.format(log=run_dir / "logs" / f"rocketmq_{part}.log"))
    return home


def _java(
    release_lib: Path, run_dir: Path, main: str, *args: str, heap: str = "256m", opens: bool = False
) -> list[str]:
    home = rocketmq_home(run_dir)
    argv = [
        "java",
        f"-Xmx{heap}",
        "-Xms64m",
        "-XX:+UseSerialGC",
        "-XX:TieredStopAtLevel=1",
        "-XX:MaxDirectMemorySize=256m",
        f"-Duser.home={run_dir}",
        f"-Drocketmq.home.dir={home}",
        f"-Drocketmq.client.logRoot={run_dir / 'logs'}",
        "-Drocketmq.client.logUseSlf4j=false",
    ]
    if opens:
        argv += JDK17_OPENS
    return argv + ["-cp", f"{release_lib}/*", main, *args]


def start_java_namesrv(release: Release, run_dir: Path, name: str = "java-namesrv") -> tuple[JavaProcess, str]:
    """Start Apache RocketMQ's own name server; returns it and its address (not yet ready)."""
    port = free_port()
    conf = run_dir / f"{name}.properties"
    conf.write_text(f"listenPort={port}\n")
    proc = JavaProcess(
        name,
        _java(release.server_lib, run_dir, "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(conf)),
        run_dir / f"{name}.log",
        "boot success",
        run_dir,
    ).start()
    return proc, f"127.0.0.1:{port}"


@dataclass
class Broker:
    """A started broker: its process and identity."""

    process: JavaProcess
    name: str
    cluster: str
    addr: str
    conf: Path


def start_broker(
    release: Release, run_dir: Path, name: str, cluster: str, namesrv_addr: str, **settings: object
) -> Broker:
    """Start a master broker (``BrokerStartup``) with its own store under ``run_dir``; not yet ready.

    ``settings`` are extra ``broker.conf`` lines (``registerNameServerPeriod=10000`` and so on).
    """
    port = free_port((-2, 0, 1))
    store = run_dir / f"store-{name}"
    lines = {
        "brokerClusterName": cluster,
        "brokerName": name,
        "brokerId": 0,
        "brokerIP1": "127.0.0.1",
        "brokerIP2": "127.0.0.1",
        "listenPort": port,
        "namesrvAddr": namesrv_addr,
        "storePathRootDir": store,
        "storePathCommitLog": store / "commitlog",
        "autoCreateTopicEnable": "true",
        "mappedFileSizeCommitLog": 16 * 1024 * 1024,
        "mappedFileSizeConsumeQueue": 60000,
        "registerNameServerPeriod": 10000,
        "diskMaxUsedSpaceRatio": 99,
        "flushDiskType": "ASYNC_FLUSH",
    }
    lines.update(settings)
    conf = run_dir / f"{name}.conf"
    conf.write_text("".join(f"{key}={value}\n" for key, value in lines.items()))
    proc = JavaProcess(
        name,
        _java(release.server_lib, run_dir, "org.apache.rocketmq.broker.BrokerStartup", "-c", str(conf), opens=True),
        run_dir / f"{name}.log",
        "boot success",
        run_dir,
    ).start()
    return Broker(proc, name, cluster, f"127.0.0.1:{port}", conf)


def start_nsaudit_nameserver(
    run_dir: Path,
    ns_id: str,
    events: Path,
    *,
    expiry_ms: int,
    scan_ms: int = 1000,
    rocketmq_version: str = "4.9",
    port: int | None = None,
) -> tuple[JavaProcess, str]:
    """Start ``python -m nameserver`` on ``port`` (a free one by default), answering as
    ``rocketmq_version``'s name server (``[nameserver] rocketmq_version``); returns it (ready) and
    its address."""
    port = port or free_port()
    config = run_dir / f"{ns_id}.toml"
    config.write_text(f'[nameserver]\nrocketmq_version = "{rocketmq_version}"\n')
    argv = [
        sys.executable,
        "-m",
        "nameserver",
        "--ns-id",
        ns_id,
        "--listen",
        f"127.0.0.1:{port}",
        "--events",
        str(events),
        "--broker-expiry-ms",
        str(expiry_ms),
        "--scan-interval-ms",
        str(scan_ms),
        "--config",
        str(config),
    ]
    proc = JavaProcess(ns_id, argv, run_dir / f"{ns_id}.log", "listening on", REPO).start()
    proc.wait_ready(30)
    return proc, f"127.0.0.1:{port}"


# ---------------------------------------------------------------------------- the client JVM


class DriverError(RuntimeError):
    """The client JVM answered a command with an exception."""


@dataclass
class Driver:
    """A RocketDriver JVM: real mqadmin commands, producers and consumers, one method call each."""

    release: Release
    run_dir: Path
    proc: subprocess.Popen | None = None
    log: Path = field(init=False)

    def __post_init__(self) -> None:
        self.log = self.run_dir / "driver.log"

    def start(self) -> Driver:
        classes = self.run_dir / "driver-classes"
        classes.mkdir(parents=True, exist_ok=True)
        subprocess.run(
            ["javac", "-nowarn", "-cp", f"{self.release.client_lib}/*", "-d", str(classes), str(DRIVER_SOURCE)],
            check=True,
            capture_output=True,
            text=True,
        )
        argv = _java(self.release.client_lib, self.run_dir, "RocketDriver", heap="192m")
        argv[argv.index("-cp") + 1] = f"{classes}:{self.release.client_lib}/*"
        self.proc = subprocess.Popen(
            argv,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(self.log, "ab"),
            text=True,
            cwd=self.run_dir,
        )
        self._answer()  # the READY line
        return self

    def _answer(self) -> tuple[int, str]:
        assert self.proc is not None and self.proc.stdout is not None
        lines = []
        while True:
            line = self.proc.stdout.readline()
            if not line:
                raise RuntimeError(f"the client JVM ended; its log {self.log}")
            if line.startswith("\0READY"):
                return 0, ""
            if line.startswith("\0END"):
                return int(line.split()[1]), "".join(lines)
            lines.append(line)

    def call(self, *words: object) -> str:
        """Run one command; its output, or :class:`DriverError` with the exception's text."""
        assert self.proc is not None and self.proc.stdin is not None
        self.proc.stdin.write("\t".join(str(w) for w in words) + "\n")
        self.proc.stdin.flush()
        status, text = self._answer()
        if status:
            raise DriverError(text.strip())
        return text

    def admin(self, *args: object) -> str:
        """``mqadmin ARGS``: what it printed."""
        return self.call("admin", *args)

    def produce(self, namesrv: str, topic: str, count: int) -> tuple[list[tuple[str, int, str]], list[str]]:
        """Send ``count`` messages through a producer that asks ``namesrv`` for routes:
        ``([(broker_name, queue_id, body)], [failure])``."""
        sent, failed = [], []
        for line in self.call("produce", namesrv, topic, count).splitlines():
            kind, _, rest = line.partition(" ")
            if kind == "sent":
                broker, queue, body = rest.split(" ", 2)
                sent.append((broker, int(queue), body))
            else:
                failed.append(rest)
        return sent, failed

    def consume(self, namesrv: str, topic: str, group: str, count: int, timeout_ms: int = 30000) -> set[str]:
        """Bodies a new consumer group received from the first offset (stops at ``count``)."""
        text = self.call("consume", namesrv, topic, group, count, timeout_ms)
        return {line[4:] for line in text.splitlines() if line.startswith("got ")}

    def route(self, namesrv: str, topic: str) -> tuple[int, dict]:
        """``(ms, TopicRouteData)``: the route the client decoded from ``namesrv``, and when."""
        at, _, body = self.call("route", namesrv, topic).strip().partition(" ")
        return int(at), fastjson.loads(body.encode())

    def kv_get(self, namesrv: str, namespace: str, key: str) -> str | None:
        value = self.call("kvget", namesrv, namespace, key).strip()
        return None if value == "null" else value

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.stdin.close()
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=20)
