"""A network cut in the middle of an audit into a bucket: the S3 server is killed while the rebuild
runs. The audit stops with one line naming the store (exit 1); every table is at a version some
commit completed (the rebuild's tables never got one); with the server back, the rerun completes.

The server is this test's own (``S3ProxyServer``), so the session's stays up.
"""

from __future__ import annotations

import datetime as dt
import subprocess
import sys
import time
from pathlib import Path

import pytest

from common.timeutil import day_start_ms
from jobs.nightly_audit import STAGES
from jobs.storage.s3proxy import S3ProxyServer
from tests.jobs.buckets import BUCKET, config_file, on_s3, subprocess_env, upload

pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

DAY = dt.date(2026, 11, 21)
REPO = Path(__file__).resolve().parents[3]


def test_a_network_cut_mid_stage_leaves_committed_versions_and_the_rerun_completes(tmp_path):
    from jobs.backfill import audited_ok
    from jobs.lake.delta.arrow import is_table, read_table_arrow
    from nameserver.sim.run import FAULTS, SimOptions, simulate

    simulate(
        SimOptions(
            events_dir=tmp_path / "events",
            ns=2,
            brokers=2,
            slaves=1,
            topics=3,
            start_ms=day_start_ms(DAY),
            hours=0.2,
            seed=11,
            faults=FAULTS,
            quiet=True,
        )
    )
    server = S3ProxyServer(tmp_path / "s3", buckets=(BUCKET,))
    server.start()
    try:
        events = upload(server, tmp_path / "events", "cut/events")
        lake = f"s3a://{BUCKET}/cut/lake"
        config = config_file(server, tmp_path / "audit.toml")
        argv = [
            sys.executable,
            "-m",
            "nsaudit.cli",
            "audit",
            "--events",
            events,
            "--lake",
            lake,
            "--date",
            DAY.isoformat(),
            "--config",
            str(config),
        ]
        proc = subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=subprocess_env(), cwd=REPO
        )
        seen = []
        for line in proc.stderr:
            seen.append(line)
            if line.startswith(f"audit {DAY}: [2/{len(STAGES)}] rebuild ..."):
                server.stop(kill=True)  # the cut: connections refused from here on
                break
        rest = proc.stderr.read()
        code = proc.wait(600)
        errors = [line for line in seen + rest.splitlines() if "error:" in line]
        assert code == 1, "".join(seen) + rest
        assert len(errors) == 1 and "failed in stage rebuild" in errors[0], errors
        assert f"cannot reach the object store at {server.endpoint}" in errors[0], errors
        assert server.secret_key not in "".join(seen) + rest

        server.start()  # the network is back
        with on_s3(server):
            assert is_table(f"{lake}/events") and not is_table(f"{lake}/topic_route_history")
            assert read_table_arrow(f"{lake}/events").num_rows > 0  # ingest's commit, whole
            assert audited_ok(lake) == set()  # running (or failed): not ok
            started = time.monotonic()
            rerun = subprocess.run(argv, capture_output=True, text=True, env=subprocess_env(), cwd=REPO, timeout=900)
            assert rerun.returncode == 0, rerun.stderr[-3000:]
            assert audited_ok(lake) == {DAY}
            assert read_table_arrow(f"{lake}/topic_route_history").num_rows > 0
            assert time.monotonic() - started < 900
    finally:
        server.stop()
