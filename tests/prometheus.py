"""A real Prometheus (Debian's ``prometheus`` package, installed by ``.ci/setup.sh``) for the tests:
started on 127.0.0.1 with a scrape config of the test's targets and, optionally, the shipped alert
rules with shorter ``for:`` (templated from ``deploy/prometheus/alerts.yml`` itself).
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ALERTS = ROOT / "deploy" / "prometheus" / "alerts.yml"


def binary(name: str) -> str:
    """The path of ``prometheus`` or ``promtool``; a clear failure when set-up did not install it."""
    found = shutil.which(name)
    assert found, f"{name} not found: run bash .ci/setup.sh (it installs Debian's prometheus package)"
    return found


def rules_with_for(for_s: float, path: Path = ALERTS) -> str:
    """The shipped rules with every ``for:`` set to ``for_s`` seconds (the test's poll interval
    stands for the default one)."""
    text = path.read_text(encoding="utf-8")
    templated, count = re.subn(r"(?m)^(\s+for: )\S+$", lambda m: f"{m[1]}{for_s:g}s", text)
    assert count > 0, "no for: in the rules"
    return templated


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Prometheus:
    """One Prometheus server scraping ``targets`` (``host:port`` of /metrics endpoints).

    Args:
        workdir: its config, rules and storage.
        targets: the endpoints, one job ``nsaudit``.
        scrape_interval_s: scrape and rule evaluation interval.
        rules: the text of a rule file, or None.
    """

    def __init__(self, workdir: Path, targets: list[str], scrape_interval_s: float = 1.0, rules: str | None = None):
        self.workdir = workdir
        self.port = _free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        workdir.mkdir(parents=True, exist_ok=True)
        rule_files = ""
        if rules is not None:
            (workdir / "rules.yml").write_text(rules, encoding="utf-8")
            rule_files = "rule_files: [rules.yml]\n"
        (workdir / "prometheus.yml").write_text(
            f"global:\n  scrape_interval: {scrape_interval_s:g}s\n  evaluation_interval: {scrape_interval_s:g}s\n"
            f"{rule_files}scrape_configs:\n  - job_name: nsaudit\n    static_configs:\n"
            f"      - targets: {json.dumps(targets)}\n",
            encoding="utf-8",
        )
        self.log = workdir / "prometheus.log"
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> Prometheus:
        with open(self.log, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    binary("prometheus"),
                    f"--config.file={self.workdir / 'prometheus.yml'}",
                    f"--storage.tsdb.path={self.workdir / 'data'}",
                    f"--web.listen-address=127.0.0.1:{self.port}",
                ],
                cwd=self.workdir,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.wait(lambda: self._ready(), 30, "Prometheus ready")
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL after 10 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()

    def _ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/-/ready", timeout=2) as answer:
                return answer.status == 200
        except OSError:
            assert self.proc.poll() is None, self.log.read_text()[-3000:]
            return False

    def api(self, path: str, **params: str) -> dict:
        """The ``data`` of an HTTP API answer."""
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.url}/api/v1/{path}{query}", timeout=5) as answer:
            body = json.loads(answer.read())
        assert body["status"] == "success", body
        return body["data"]

    def query(self, expr: str) -> list[dict]:
        """The instant vector of ``expr`` now."""
        return self.api("query", query=expr)["result"]

    def alerts(self) -> list[dict]:
        """``/api/v1/alerts``: the alerts pending or firing now."""
        return self.api("alerts")["alerts"]

    def wait(self, test, timeout: float, what: str, every: float = 0.2):
        """Poll ``test()`` until it returns something true; its value."""
        deadline = time.monotonic() + timeout
        while True:
            value = test()
            if value:
                return value
            assert time.monotonic() < deadline, (
                f"{what}: not within {timeout} s; log: {self.log.read_text()[-2000:] if self.log.exists() else ''}"
            )
            time.sleep(every)
