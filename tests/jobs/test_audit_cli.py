"""``nsaudit audit`` as a user runs it, in a subprocess: what it prints, its log file, and a rerun
killed part-way through.

One small day (two name servers, four brokers, an hour) is simulated twice, the second time with
other topics: the "changed input" of a rerun. The first input is audited to ok; a rerun over the
second is killed once its ingest has replaced the day's events, and queries and report must then
say the day is unfinished until a full rerun makes it ok again.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from jobs.nightly_audit import STAGES
from nsaudit.cli import main

ROOT = Path(__file__).resolve().parents[2]
DAY = "2026-11-21"
pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def root(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("audit-cli")
    for events, seed, topics in (("first", "1", "4"), ("changed", "2", "6")):
        assert (
            main(
                [
                    "simulate",
                    "--events",
                    str(root / events),
                    "--ns",
                    "2",
                    "--brokers",
                    "4",
                    "--topics",
                    topics,
                    "--hours",
                    "1",
                    "--start",
                    f"{DAY}T00:00:00Z",
                    "--seed",
                    seed,
                    "--quiet",
                ]
            )
            == 0
        )
    (root / "audit.toml").write_text(
        '[spark]\nmaster = "local[2]"\ndriver_memory = "1g"\nshuffle_partitions = 2\n'
        "[audit]\nsnapshot_interval_ms = 3600000\n"
    )
    return root


def _audit_argv(root: Path, events: str, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "nsaudit.cli",
        "audit",
        "--events",
        str(root / events),
        "--lake",
        str(root / "lake"),
        "--date",
        DAY,
        "--config",
        str(root / "audit.toml"),
        *extra,
    ]


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable}


@pytest.fixture(scope="module")
def first_audit(root) -> subprocess.CompletedProcess:
    return subprocess.run(_audit_argv(root, "first"), capture_output=True, text=True, timeout=900, env=_env())


@pytest.fixture(scope="module")
def killed_rerun(root, first_audit) -> list[str]:
    """A verbose rerun over the changed input, SIGKILLed (with its JVM) once stage 2 starts; its stderr lines."""
    assert first_audit.returncode == 0, first_audit.stderr
    proc = subprocess.Popen(
        _audit_argv(root, "changed", "--verbose"),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=_env(),
        start_new_session=True,
    )
    lines = []
    try:
        for line in proc.stderr:
            lines.append(line.rstrip("\n"))
            if line.startswith(f"audit {DAY}: [2/{len(STAGES)}] rebuild ..."):
                break
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
    assert lines[-1].endswith(f"[2/{len(STAGES)}] rebuild ..."), lines
    return lines


def _query(capsys, *argv: str) -> dict:
    code = main(list(argv))
    out, err = capsys.readouterr()
    assert (code, err) == (0, ""), err
    return orjson.loads(out)


def _route(root: Path, capsys) -> dict:
    return _query(
        capsys,
        "route",
        "--lake",
        str(root / "lake"),
        "--ns",
        "ns-a",
        "--topic",
        "topic-0000",
        "--at",
        f"{DAY}T00:30:00Z",
    )


def _summary(root: Path) -> dict:
    return json.loads((root / "lake" / "reports" / DAY / "summary.json").read_text())


def test_an_audit_prints_its_stages_and_summary_and_logs_the_rest(root, first_audit):
    assert first_audit.returncode == 0, first_audit.stderr
    shown = first_audit.stdout + first_audit.stderr
    assert "WARN" not in shown and " took " not in shown, shown
    assert all(line.startswith(f"audit {DAY}: [") for line in first_audit.stderr.splitlines()), first_audit.stderr
    summary = json.loads(first_audit.stdout)
    assert summary["date"] == DAY and set(summary["incidents"]) == {"info", "warning", "critical"}
    log = (root / "lake" / "_logs" / f"{DAY}.log").read_text()
    assert " WARN " in log  # Spark's
    assert "jobs.ingest.stage: ingest: sequence took" in log  # the stages'


def test_verbose_shows_spark_and_stage_logs(killed_rerun):
    assert any(" WARN " in line for line in killed_rerun), killed_rerun
    assert any(" took " in line for line in killed_rerun), killed_rerun


def test_a_killed_rerun_leaves_the_day_unfinished_until_a_rerun_finishes(root, killed_rerun, capsys):
    reason = f"the audit of {DAY} did not finish (status running); rerun nsaudit audit --date {DAY}"
    route = _route(root, capsys)
    assert (route["route"], route["up"], route["audited"], route["reason"]) == (None, None, False, reason)
    cluster = _query(capsys, "cluster", "--lake", str(root / "lake"), "--ns", "ns-b", "--at", f"{DAY}T00:30:00Z")
    assert (cluster["cluster_info"], cluster["audited"]) == (None, False)
    summary = _summary(root)
    assert summary["audited"] is False and f"The audit of {DAY} did not finish" in summary["reason"]
    assert 'id="audit-unfinished"' in (root / "lake" / "reports" / DAY / "index.html").read_text()

    rerun = subprocess.run(_audit_argv(root, "changed"), capture_output=True, text=True, timeout=900, env=_env())
    assert rerun.returncode == 0, rerun.stderr
    assert _route(root, capsys)["audited"] is True
    assert _summary(root)["audited"] is True
    assert 'id="audit-unfinished"' not in (root / "lake" / "reports" / DAY / "index.html").read_text()
