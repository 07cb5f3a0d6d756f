"""Auditing an existing cluster end to end, as a user does: three ``nsaudit nameserver`` instances
stand in for the real servers and a fourth is the shadow the broker also registers with;
``nsaudit collect`` polls the three; an admin wipes the broker's write perm on one server and
deletes a topic on another, and the broker's ``namesrvAddr`` lacks the third. Then ``nsaudit
audit`` runs over the one events folder and ``nsaudit route`` answers for an observed server.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import os
import subprocess
import sys
from pathlib import Path

import orjson

from common.config import EventLogConfig
from jobs import lake
from jobs.lake.delta.arrow import read_table_arrow
from nameserver.client import RemotingClient
from nameserver.codec import ResponseCode
from nameserver.collect.collector import Collector
from nameserver.model import TopicConfig
from nsaudit.cli import main
from tests.nameserver.collect.test_collect_servers import FAST, A, Lines, arun, name_server, register, target, wait_for

ROOT = Path(__file__).resolve().parents[2]
CONFIG = """
[spark]
master = "local[2]"
driver_memory = "1g"
shuffle_partitions = 2
[audit]
divergence_grace_ms = 300
snapshot_interval_ms = 500
"""


def test_a_day_of_observed_servers_and_a_shadow_is_audited_with_each_fault_on_its_server(tmp_path, capsys):
    events, lake_dir, config = tmp_path / "events", tmp_path / "lake", tmp_path / "audit.toml"
    config.write_text(CONFIG, encoding="utf-8")
    times: dict[str, int] = {}

    async def body():
        async with (
            name_server(tmp_path / "real", "ns-1") as (s1, _),
            name_server(tmp_path / "real", "ns-2") as (s2, _),
            name_server(tmp_path / "real", "ns-3") as (s3, _),
            name_server(events, "ns-shadow") as (shadow, _),
        ):
            topics = [TopicConfig("TopicA", 8, 8), TopicConfig("TopicB", 4, 4)]
            brokers = [await register(s, A, "broker-a", topics) for s in (s1, s2, shadow)]  # not s3
            lines = Lines()
            collector = Collector(
                [target(s, f"obs-{i}") for i, s in enumerate((s1, s2, s3), 1)],
                events,
                FAST,
                EventLogConfig(durability="none"),
                lines.append,
            )
            collector.start()
            run = asyncio.ensure_future(collector.run())
            await wait_for(
                lambda: all(len(lines.of(f"obs-{i}")) >= 3 for i in (1, 2, 3)), "three rounds of each server"
            )
            admin1 = await RemotingClient.connect(s1.host, s1.port)
            admin2 = await RemotingClient.connect(s2.host, s2.port)
            times["wipe"] = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
            assert (await admin1.wipe_write_perm("broker-a")).code == ResponseCode.SUCCESS
            assert (await admin2.delete_topic("TopicB")).code == ResponseCode.SUCCESS
            # rounds at least an interval (150 ms) apart: 12 more of each server observe the changes
            # for well past the grace (300 ms) and a snapshot instant (every 500 ms)
            seen = {ns: len(lines.of(ns)) for ns in ("obs-1", "obs-2", "obs-3")}
            await wait_for(
                lambda: all(len(lines.of(ns)) >= n + 12 for ns, n in seen.items()),
                "twelve rounds of each server after the changes",
            )
            times["stop"] = int(dt.datetime.now(dt.UTC).timestamp() * 1000)
            collector.request_stop("SIGTERM")
            await run
            for client in brokers + [admin1, admin2]:
                await client.close()

    arun(body())
    day = dt.datetime.fromtimestamp(times["wipe"] / 1000, dt.UTC).date()
    # the audit as a user runs it, in a process (and JVM) of its own
    audit = subprocess.run(
        [
            sys.executable,
            "-m",
            "nsaudit.cli",
            "audit",
            "--events",
            str(events),
            "--lake",
            str(lake_dir),
            "--date",
            day.isoformat(),
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=900,
        env={**os.environ, "PYTHONPATH": str(ROOT), "PYSPARK_PYTHON": sys.executable},
    )
    assert audit.returncode == 0, audit.stderr[-3000:]

    findings = read_table_arrow(str(lake.table_path(str(lake_dir), lake.FINDINGS))).to_pylist()
    divergences = [
        (json.loads(f["detail"])["kind"], f["subject"], json.loads(f["detail"])["ns_views"])
        for f in findings
        if f["kind"] == "ns_divergence"
    ]
    assert (
        "queue_data_mismatch",
        "TopicA",
        {"obs-1": "8/8/4/0", "obs-2": "8/8/6/0", "ns-shadow": "8/8/6/0"},
    ) in divergences, divergences
    assert any(k == "route_missing" and s == "TopicB" and v.get("obs-2") == "absent" for k, s, v in divergences)
    wiped = {(f["ns"], f["subject"]) for f in findings if f["kind"] == "write_perm_wiped"}
    assert wiped == {("obs-1", "broker-a")}
    missing = {(f["ns"], f["subject"]) for f in findings if f["kind"] == "observed_broker_missing"}
    assert missing == {("obs-3", "broker-a")}

    at = times["stop"] - 500
    assert main(["route", "--lake", str(lake_dir), "--ns", "obs-1", "--topic", "TopicA", "--at", str(at)]) == 0
    answer = orjson.loads(capsys.readouterr().out)
    assert answer["route"]["queueDatas"][0]["perm"] == 4 and answer["resolution_ms"] == FAST.interval_ms
    # the wipe was seen within one poll interval (and a round's spread) of when it was made
    assert times["wipe"] <= answer["observed_ts"] <= times["wipe"] + 2 * FAST.interval_ms + 500
