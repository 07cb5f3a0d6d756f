"""Metrics over HTTP (``nameserver.metrics``, ``--metrics-listen``): the exposition format, the
endpoint's answers to good and bad requests, its cost under a scrape storm and hostile scrapers
while the name server answers lookups, a real Prometheus scraping it, and ``promtool`` on what
is served and on the shipped alert rules.
"""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from common.config import EventLogConfig, NameServerConfig
from nameserver.client import RemotingClient
from nameserver.collect.collector import Collector
from nameserver.collect.live.judge import LiveJudge
from nameserver.metrics.endpoint import EndpointThread, MetricsEndpoint
from nameserver.metrics.exposition import Family, render
from nameserver.model import TopicConfig
from nameserver.server.controller import NameServerController
from nameserver.server.metrics import server_body
from tests.nameserver.collect.test_collect_servers import FAST, A, Lines, arun, register, target, wait_for
from tests.prometheus import ALERTS, Prometheus, binary, rules_with_for

ROOT = Path(__file__).resolve().parents[3]


def test_the_exposition_escapes_label_values_and_caps_families_that_name_subjects():
    family = Family("nsaudit_topic_missing", "gauge", "a topic\nmissing", max_series=2)
    for topic in ('a"b', "c\\d", "e\nf"):
        family.add(1, topic=topic, ns="ns-a")
    text = render([family]).decode()
    assert "# HELP nsaudit_topic_missing a topic missing\n" in text
    assert 'nsaudit_topic_missing{topic="a\\"b",ns="ns-a"} 1\n' in text
    assert 'nsaudit_topic_missing{topic="c\\\\d",ns="ns-a"} 1\n' in text
    assert "e\\nf" not in text  # the third was over the cap, and says so
    assert 'nsaudit_metrics_series_dropped{metric="nsaudit_topic_missing"} 1\n' in text
    with pytest.raises(ValueError):
        Family("nsaudit_rounds", "counter", "a counter must end in _total")
    with pytest.raises(ValueError):
        Family("bad-name", "gauge", "x")


def _request(port: int, head: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(head)
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    return b"".join(chunks)


async def _endpoint(render_fn, **kwargs) -> MetricsEndpoint:
    endpoint = MetricsEndpoint("127.0.0.1:0", render_fn, **kwargs)
    await endpoint.start()
    return endpoint


def test_only_get_of_the_path_is_answered_and_a_scrape_storm_renders_once():
    renders = []

    def body() -> bytes:
        renders.append(1)
        return b"# HELP x y\n# TYPE x gauge\nx 1\n"

    async def main():
        endpoint = await _endpoint(body, min_render_interval_s=60)
        loop = asyncio.get_running_loop()

        def ask(head):
            return loop.run_in_executor(None, _request, endpoint.port, head)

        ok = await ask(b"GET /metrics HTTP/1.1\r\nHost: x\r\nAccept-Encoding: gzip\r\n\r\n")
        assert ok.startswith(b"HTTP/1.1 200 OK\r\n") and b"text/plain; version=0.0.4" in ok and ok.endswith(b"x 1\n")
        assert (await ask(b"GET /metrics?x=1 HTTP/1.0\r\n\r\n")).startswith(b"HTTP/1.1 200")
        assert (await ask(b"GET / HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        assert (await ask(b"GET /metricsx HTTP/1.1\r\n\r\n")).startswith(b"HTTP/1.1 404")
        for method in (b"POST", b"PUT", b"DELETE", b"HEAD"):
            answer = await ask(method + b" /metrics HTTP/1.1\r\nContent-Length: 3\r\n\r\nabc")
            assert answer.startswith(b"HTTP/1.1 405") and b"Allow: GET\r\n" in answer, method
        assert (await ask(b"GARBAGE\r\n\r\n")).startswith(b"HTTP/1.1 400")
        assert (await ask(b"GET /metrics HTTP/1.1\r\nX: " + b"a" * 20_000 + b"\r\n\r\n")).startswith(b"HTTP/1.1 431")
        # a storm of 50 scrapes at once: one render, 50 answers
        answers = await asyncio.gather(*(ask(b"GET /metrics HTTP/1.1\r\n\r\n") for _ in range(50)))
        assert all(a.startswith(b"HTTP/1.1 200") for a in answers)
        await endpoint.close()
        return endpoint

    endpoint = arun(main())
    assert len(renders) == 1 and endpoint.scrapes == 52


class HostileScrapers:
    """Scrapers in a thread of their own: some send half a request head and stall, some send a whole
    request and never read the answer."""

    def __init__(self, port: int, count: int) -> None:
        self.port, self.count = port, count
        self.socks: list[socket.socket] = []

    def __enter__(self):
        for i in range(self.count):
            sock = socket.socket()
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
            sock.connect(("127.0.0.1", self.port))
            sock.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n" + (b"\r\n" if i % 2 else b""))
            self.socks.append(sock)
        return self

    def cut_off(self) -> int:
        """How many of them the endpoint has closed."""
        closed = 0
        for sock in self.socks:
            sock.setblocking(False)
            try:
                while chunk := sock.recv(65536):
                    pass
                closed += chunk == b""
            except BlockingIOError:
                pass
            except OSError:
                closed += 1
        return closed

    def __exit__(self, *exc):
        for sock in self.socks:
            sock.close()


def test_a_hundred_slow_scrapers_stall_neither_the_lookups_nor_the_endpoint_for_long(tmp_path):
    async def main():
        controller = NameServerController(
            "ns-m", tmp_path, NameServerConfig(listen="127.0.0.1:0"), EventLogConfig(durability="none")
        )
        await controller.start()
        # served as nsaudit nameserver serves it: on a loop of its own thread
        served = EndpointThread(
            MetricsEndpoint(
                "127.0.0.1:0",
                lambda: server_body(controller),
                head_timeout_s=1.5,
                write_timeout_s=1.5,
                min_render_interval_s=0,
            )
        )
        await asyncio.get_running_loop().run_in_executor(None, served.start)
        endpoint = served.endpoint
        broker = await register(controller, A, "broker-a", [TopicConfig(f"T{i}", 4, 4) for i in range(200)])
        client = await RemotingClient.connect(controller.host, controller.port)
        loop = asyncio.get_running_loop()
        hostile = await loop.run_in_executor(None, HostileScrapers(endpoint.port, 100).__enter__)
        try:
            slowest = 0.0
            for i in range(400):
                started = time.perf_counter()
                answer = await client.get_route_info(f"T{i % 200}")
                slowest = max(slowest, time.perf_counter() - started)
                assert answer.code == 0
            # every lookup answered at once while the scrapers hung on; they are cut off in time
            assert slowest < 0.25, slowest
            deadline = time.monotonic() + 10
            while (cut := await loop.run_in_executor(None, hostile.cut_off)) < 100 and time.monotonic() < deadline:
                await asyncio.sleep(0.1)
            assert cut == 100, f"waited 10 s for the endpoint to cut off the 100 hung scrapers: {cut} cut off"
            answer = await loop.run_in_executor(None, _request, endpoint.port, b"GET /metrics HTTP/1.1\r\n\r\n")
            assert answer.startswith(b"HTTP/1.1 200")
            body = answer.decode()
            assert (
                re.search(
                    r'nsaudit_nameserver_requests_total\{ns="ns-m",code="105",name="GET_ROUTEINFO_BY_TOPIC"\} '
                    r"(\d+)",
                    body,
                )[1]
                == "400"
            )
            assert 'nsaudit_nameserver_live_brokers{ns="ns-m"} 1\n' in body
        finally:
            hostile.__exit__()
            await broker.close()
            await client.close()
            served.stop()
            await controller.shutdown("test end")

    arun(main())


def _promtool(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([binary("promtool"), *args], input=stdin, capture_output=True, timeout=60)


def test_promtool_accepts_the_shipped_rules_and_their_templated_form(tmp_path):
    checked = _promtool("check", "rules", str(ALERTS))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert b"SUCCESS: 12 rules found" in checked.stdout
    short = tmp_path / "short.yml"
    short.write_text(rules_with_for(2), encoding="utf-8")
    checked = _promtool("check", "rules", str(short))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "for: 10s" not in short.read_text() and short.read_text().count("for: 2s") == 12


def test_a_real_prometheus_scrapes_the_collector_and_the_name_server_and_promtool_finds_no_lint(tmp_path):
    """The name server as a user starts it; the collector observing it and a dead address."""
    events = tmp_path / "events"
    server = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "nameserver",
            "--ns-id",
            "ns-p",
            "--events",
            str(events),
            "--listen",
            "127.0.0.1:0",
            "--metrics-listen",
            "127.0.0.1:0",
        ],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        metrics_line = server.stderr.readline()
        server_metrics = re.search(r"metrics on http://(\S+)/metrics", metrics_line)[1]
        server_addr = re.search(r"listening on (\S+)", server.stdout.readline())[1]

        async def collect_and_scrape():
            host, port = server_addr.rsplit(":", 1)
            controller = type("S", (), {"host": host, "port": int(port)})
            broker = await register(controller, A, "broker-a", [TopicConfig("TopicA", 8, 8)])
            lines = Lines()
            collector = Collector(
                [target(controller, "obs-p"), target(type("D", (), {"host": "127.0.0.1", "port": 1}), "obs-dead")],
                tmp_path / "obs",
                FAST,
                EventLogConfig(durability="none"),
                lines.append,
                judge=LiveJudge(300),
            )
            collector.start()
            endpoint = MetricsEndpoint("127.0.0.1:0", collector.metrics_body)
            await endpoint.start()
            run = asyncio.ensure_future(collector.run())
            await wait_for(
                lambda: len(lines.of("obs-p")) >= 2 and len(lines.of("obs-dead")) >= 2, "two rounds of each server"
            )
            loop = asyncio.get_running_loop()
            with Prometheus(tmp_path / "prom", [f"127.0.0.1:{endpoint.port}", server_metrics]) as prom:
                up = await loop.run_in_executor(
                    None,
                    prom.wait,
                    lambda: prom.query(
                        'nsaudit_observed_up{ns="obs-p"} == 1 and on() nsaudit_nameserver_live_brokers{ns="ns-p"} == 1'
                    ),
                    30,
                    "both endpoints scraped",
                )
                assert up
                targets = prom.api("targets")["activeTargets"]
                assert sorted(t["health"] for t in targets) == ["up", "up"], targets
                # the dead server never answered: no known period, so no incident, but it is down
                assert prom.query('nsaudit_observed_up{ns="obs-dead"}')[0]["value"][1] == "0"
                failures = prom.query('nsaudit_observed_round_failures_total{ns="obs-dead",reason="connect_failed"}')
                assert float(failures[0]["value"][1]) >= 1
            bodies = [collector.metrics_body()]
            collector.request_stop("SIGTERM")
            await run
            await endpoint.close()
            await broker.close()
            return bodies

        bodies = arun(collect_and_scrape(), 90)
        with urllib.request.urlopen(f"http://{server_metrics}/metrics", timeout=5) as answer:
            bodies.append(answer.read())
        for body in bodies:
            linted = _promtool("check", "metrics", stdin=body)
            assert linted.returncode == 0 and linted.stdout + linted.stderr == b"", linted.stdout + linted.stderr
    finally:
        server.terminate()
        server.wait(10)


def test_the_dashboard_and_the_alerts_ask_only_for_metrics_that_are_served(tmp_path):
    import json as json_lib

    async def bodies() -> bytes:
        controller = NameServerController(
            "ns-d", tmp_path / "ns", NameServerConfig(listen="127.0.0.1:0"), EventLogConfig(durability="none")
        )
        await controller.start()
        collector = Collector(
            [target(controller, "obs-d")],
            tmp_path / "obs",
            FAST,
            EventLogConfig(durability="none"),
            Lines().append,
            judge=LiveJudge(300),
        )
        collector.start()
        try:
            return server_body(controller) + collector.metrics_body()
        finally:
            collector.pollers[0].writer.close("test end")
            await controller.shutdown("test end")

    served = set(re.findall(r"(?m)^# TYPE (\S+) ", arun(bodies()).decode()))
    dashboard = json_lib.loads((ROOT / "deploy" / "grafana" / "nsaudit.json").read_text(encoding="utf-8"))
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += re.findall(r"(?m)^\s+expr: (.+)$", ALERTS.read_text(encoding="utf-8"))
    asked = {name for expr in exprs for name in re.findall(r"\b(nsaudit_[a-z_]+)", expr)}
    assert len(asked) > 20 and sorted(asked - served) == []


def _scrape(address: str) -> dict[str, float]:
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=5) as answer:
        text = answer.read().decode()
    return {m[1]: float(m[2]) for m in re.finditer(r"(?m)^(\w+)\{[^}]*\} (\S+)$", text)}


@pytest.mark.slow
def test_a_full_disk_shows_in_the_name_servers_metrics_and_its_end_too(tmp_path):
    from nameserver.codec import ResponseCode
    from nameserver.model import DataVersion
    from tests.nameserver.server.test_server import start_server, stop_server
    from tests.nameserver.server.test_server_reliability import fill, small_tmpfs

    with small_tmpfs(tmp_path / "ev", "2m") as events_dir:
        proc, host, port = start_server(events_dir, "ns-full", "--metrics-listen", "127.0.0.1:0")
        try:
            address = re.search(r"metrics on http://(\S+)/metrics", proc.stderr.readline())[1]

            async def fill_and_free():
                broker = await RemotingClient.connect(host, port)
                filler = fill(events_dir)
                codes = [
                    (
                        await broker.register_broker(
                            "C1",
                            f"10.0.1.{i}:10911",
                            f"b{i}",
                            0,
                            "10.0.1.1:10912",
                            DataVersion(1, i),
                            [TopicConfig("T", 4, 4)],
                        )
                    ).code
                    for i in range(60)
                ]
                assert codes.count(ResponseCode.SYSTEM_ERROR) >= 3, codes
                during = await asyncio.get_running_loop().run_in_executor(None, _scrape, address)
                filler.unlink()
                deadline = time.monotonic() + 10
                while (
                    await broker.register_broker(
                        "C1", "10.0.2.1:10911", "back", 0, "10.0.2.1:10912", DataVersion(1, 1), []
                    )
                ).code != ResponseCode.SUCCESS:
                    assert time.monotonic() < deadline, "the log never resumed"
                    await asyncio.sleep(0.1)
                await broker.close()
                return during, codes.count(ResponseCode.SYSTEM_ERROR)

            during, refused = arun(fill_and_free())
            # a body is rendered at most once a second: the next one shows the log back
            deadline = time.monotonic() + 5
            while (after := _scrape(address))["nsaudit_nameserver_event_log_writable"] != 1:
                assert time.monotonic() < deadline, after
                time.sleep(0.2)
        finally:
            assert stop_server(proc) == 0
    assert (during["nsaudit_nameserver_event_log_writable"], during["nsaudit_nameserver_event_log_outages_total"]) == (
        0,
        1,
    )
    assert during["nsaudit_nameserver_event_log_outage_seconds"] > 0
    assert during["nsaudit_nameserver_refused_while_log_unavailable_total"] >= refused
    assert (after["nsaudit_nameserver_event_log_writable"], after["nsaudit_nameserver_event_log_outage_seconds"]) == (
        1,
        0,
    )
    assert after["nsaudit_nameserver_refused_while_log_unavailable_total"] >= refused
