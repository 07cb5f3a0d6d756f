"""Security findings (``jobs.analytics.security``): hand-built logs in the ``events`` layout, then live
servers with a rogue broker, ingested and audited end to end.

Times are ms after 00:00 of ``DAY``. Peers log as ``host:port``; a broker's peer host is its
advertised host unless a test says otherwise.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import json
import time
from pathlib import Path

import pytest
from chispa import assert_df_equality
from pyspark.sql import functions as F

from common.config import Config, EventLogConfig, NameServerConfig
from common.timeutil import day_start_ms
from jobs import lake
from jobs.analytics import security as S
from jobs.ingest.stage import run_ingest
from jobs.lake.tables import read_table
from nameserver.acl import AccessController, Credentials, SecretStore
from nameserver.client import RemotingClient
from nameserver.model import DataVersion, TopicConfig
from nameserver.server.controller import NameServerController
from schemas.events import EVENTS_TABLE_SCHEMA
from schemas.findings import FINDINGS_SCHEMA
from tests.jobs.inputs import frame

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 21)
T0 = day_start_ms(DAY)
A, B, R = "10.0.0.5:10911", "10.0.0.6:10911", "10.9.9.9:10911"  # master, slave, rogue
PARAMS = S.SecurityParams(admin_burst_changes=3, admin_burst_window_ms=10_000, refused_requests_min=1)


def at(ms: int | None) -> dt.datetime | None:
    """``ms`` after 00:00 of DAY as a UTC datetime."""
    return None if ms is None else dt.datetime.fromtimestamp((T0 + ms) / 1000, tz=dt.UTC)


def peer(addr: str, port: int = 50112) -> str:
    return f"{addr.rsplit(':', 1)[0]}:{port}"


class Log:
    """One name server's events in the ``events`` table layout; seq counts up; methods chain."""

    def __init__(self, ns: str = "ns-a", seq: int = 1, day: dt.date = DAY) -> None:
        self.ns, self.seq, self.day, self.rows = ns, seq, day, []

    def add(self, t: int, type_: str, **keys) -> Log:
        row = dict.fromkeys(EVENTS_TABLE_SCHEMA.names)
        base = day_start_ms(self.day)
        row.update(
            v=1,
            ns=self.ns,
            seq=self.seq,
            ts=dt.datetime.fromtimestamp((base + t) / 1000, dt.UTC),
            ts_ms=base + t,
            type=type_,
            date=self.day,
            file=f"{self.ns}/x",
            line=self.seq,
            **keys,
        )
        self.rows.append(row)
        self.seq += 1
        return self

    def start(self, t: int) -> Log:
        return self.add(t, "ns_start", broker_expiry_ms=120_000, scan_interval_ms=10_000)

    def reg(
        self,
        t: int,
        addr: str,
        bid: int = 0,
        name: str = "broker-a",
        cluster: str = "C1",
        remote: str | None = "",
        type_: str = "register",
    ) -> Log:
        remote = peer(addr) if remote == "" else remote
        return self.add(
            t,
            type_,
            request_code=103,
            channel="c1",
            remote=remote,
            cluster=cluster,
            broker_name=name,
            broker_id=bid,
            broker_addr=addr,
        )

    def hb(self, t: int, addr: str, bid: int = 0, **keys) -> Log:
        return self.reg(t, addr, bid, type_="heartbeat", **keys)

    def close(self, t: int, addr: str) -> Log:
        return self.add(t, "channel_close", channel="c1", remote=peer(addr), broker_addr=addr)

    def expire(self, t: int, addr: str) -> Log:
        return self.add(t, "expire", broker_addr=addr, last_update_ts=at(t - 120_000))

    def admin(self, t: int, remote: str | None, code: int = 205, name: str = "broker-a") -> Log:
        kind = {104: "unregister", 205: "wipe_write_perm", 216: "delete_topic", 327: "add_write_perm"}[code]
        keys = {"topic": "T"} if code == 216 else {"broker_name": name, "topic_count": 1}
        if code == 104:
            keys = {"broker_name": name, "cluster": "C1", "broker_id": 0, "broker_addr": A}
        return self.add(t, kind, request_code=code, channel="c9", remote=remote, **keys)

    def refused(
        self,
        t: int,
        remote: str | None,
        detail: str = "unsigned",
        access_key: str | None = None,
        code: int = 103,
        reason: str = "no_permission",
    ) -> Log:
        return self.add(
            t,
            "rejected",
            request_code=code,
            channel="c8",
            remote=remote,
            reason=reason,
            detail=detail,
            access_key=access_key,
        )


def events_df(spark, *logs: Log):
    return frame(spark, [row for log in logs for row in log.rows], EVENTS_TABLE_SCHEMA)


def known(spark, *names: tuple[str, str]):
    return frame(spark, list(names), "kind string, name string")


def history(spark, has: bool):
    return frame(spark, [(has,)], "has_history boolean")


def findings(spark, *logs: Log, known_names=(), has_history=False, params=PARAMS, carried=None) -> list[dict]:
    """build_security's rows as dicts (detail parsed), sorted by kind, subject, ns, start."""
    carried_df = events_df(spark, carried) if carried is not None else None
    frames = S.build_security(
        events_df(spark, *logs), known(spark, *known_names), history(spark, has_history), params, carried_df
    )
    rows = frames.findings_df.collect()
    frames.release()
    out = [as_finding(r) for r in rows]
    return sorted(out, key=lambda f: (f["kind"], f["subject"], f["ns"] or "", f["start_ts"]))


def as_finding(row) -> dict:
    """A collected finding row: detail parsed, times as aware UTC (the session zone is UTC)."""
    out = {**row.asDict(), "detail": json.loads(row["detail"])}
    for key in ("start_ts", "end_ts"):
        if out[key] is not None:
            out[key] = out[key].replace(tzinfo=dt.UTC)
    return out


def of_kind(rows: list[dict], kind: str) -> list[dict]:
    return [r for r in rows if r["kind"] == kind]


ALL_KNOWN = (("cluster", "C1"), ("broker_name", "broker-a"), ("broker_name", "broker-b"))


# ------------------------------------------------------------------------------ host_of


def test_host_of_handles_v4_v6_mapped_names_and_nulls(spark):
    rows = [
        ("10.0.0.5:50112", "10.0.0.5"),
        ("[::1]:5000", "::1"),
        ("::1:5000", "::1"),
        ("[::FFFF:10.0.0.5]:1", "10.0.0.5"),
        ("::ffff:10.0.0.5:1", "10.0.0.5"),
        ("Broker.Example:10911", "broker.example"),
        ("no-port", None),
        ("", None),
        (None, None),
    ]
    schema = "address string, expected string"
    df = frame(spark, rows, schema)
    actual = df.select("address", S.host_of(F.col("address")).alias("expected"))
    assert_df_equality(actual, df, ignore_nullable=True)


# --------------------------------------------------------------------- addr_host_mismatch


def test_addr_host_mismatch_one_finding_per_address_and_peer(spark):
    log = (
        Log()
        .start(0)
        .reg(1000, A)  # advertised host = peer host: fine
        .reg(2000, R, name="broker-r", remote="10.0.0.66:40000")
        .hb(32000, R, name="broker-r", remote="10.0.0.66:40001")
        .reg(3000, B, bid=1, remote=None)  # no peer: nothing to compare
        .reg(4000, "broker-host:10911", name="broker-h", remote="10.0.0.7:1")
    )  # a name is not the peer
    rows = of_kind(
        findings(spark, log, known_names=ALL_KNOWN + (("broker_name", "broker-r"), ("broker_name", "broker-h"))),
        "addr_host_mismatch",
    )
    assert [(r["subject"], r["severity"], r["ns"], r["start_ts"], r["end_ts"]) for r in rows] == [
        (R, "warning", "ns-a", at(2000), at(32000)),
        ("broker-host:10911", "warning", "ns-a", at(4000), at(4000)),
    ]
    assert rows[0]["detail"] == {
        "broker_addr": R,
        "addr_host": "10.9.9.9",
        "remote_host": "10.0.0.66",
        "cluster": "C1",
        "broker_name": "broker-r",
        "broker_id": 0,
        "registrations": 2,
    }


# ------------------------------------------------------------------- broker_name_takeover


def test_takeover_while_the_old_holder_is_live_flips_counted_once(spark):
    log = (
        Log()
        .start(0)
        .reg(1000, A)
        .reg(1500, B, bid=1)
        .reg(5000, R, remote="10.9.9.9:40000")  # rogue takes broker-a/0, A still live
        .hb(31000, A)  # A re-registers: the slot flips back (same incident)
        .hb(35000, R, remote="10.9.9.9:40000")
    )
    rows = of_kind(findings(spark, log, known_names=ALL_KNOWN), "broker_name_takeover")
    assert len(rows) == 1
    row = rows[0]
    assert (row["subject"], row["severity"], row["ns"], row["start_ts"], row["end_ts"]) == (
        "broker-a",
        "critical",
        "ns-a",
        at(5000),
        at(35000),
    )
    assert row["detail"] == {
        "broker_id": 0,
        "old_addr": A,
        "new_addr": R,
        "remote": "10.9.9.9:40000",
        "cluster": "C1",
        "channel": "c1",
        "flips": 3,
    }


def test_no_takeover_when_the_old_holder_was_gone_or_it_is_a_role_switch(spark):
    logs = [
        Log("ns-close").start(0).reg(1000, A).reg(1500, B, bid=1).close(2000, A).reg(3000, B),  # master crashed
        Log("ns-expire").start(0).reg(1000, A).reg(1500, B, bid=1).expire(2000, A).reg(3000, B),
        Log("ns-restart").start(0).reg(1000, A).start(2000).reg(3000, R, remote="10.9.9.9:1"),
        Log("ns-unreg").start(0).reg(1000, A).admin(2000, peer(A), code=104).reg(3000, R, remote="10.9.9.9:1"),
        # DLedger-style switch, both up: B becomes 0, then A becomes 1; then a rogue takes 0
        Log("ns-switch")
        .start(0)
        .reg(1000, A)
        .reg(1500, B, bid=1)
        .hb(2000, B, bid=0)
        .hb(2500, A, bid=1)
        .reg(3000, R, remote="10.9.9.9:1"),
    ]
    rows = of_kind(findings(spark, *logs, known_names=ALL_KNOWN), "broker_name_takeover")
    assert [(r["ns"], r["detail"]["old_addr"], r["detail"]["new_addr"], r["start_ts"]) for r in rows] == [
        ("ns-switch", B, R, at(3000))
    ]


def test_takeover_of_a_holder_registered_before_midnight(spark):
    yesterday = Log("ns-a", day=DAY - dt.timedelta(days=1)).start(0).reg(86_400_000 - 20_000, A)
    today = Log("ns-a", seq=3).reg(1000, R, remote="10.9.9.9:1").hb(2000, A)
    rows = of_kind(findings(spark, today, known_names=ALL_KNOWN, carried=yesterday), "broker_name_takeover")
    assert [
        (r["subject"], r["start_ts"], r["detail"]["old_addr"], r["detail"]["new_addr"], r["detail"]["flips"])
        for r in rows
    ] == [("broker-a", at(1000), A, R, 2)]
    gone = Log("ns-a", day=DAY - dt.timedelta(days=1)).start(0).reg(86_400_000 - 20_000, A).close(86_400_000 - 1, A)
    assert (
        of_kind(
            findings(spark, Log("ns-a", seq=4).reg(1000, R), known_names=ALL_KNOWN, carried=gone),
            "broker_name_takeover",
        )
        == []
    )


def test_takeover_is_per_server_and_ignores_rows_without_slot(spark):
    ns_a = Log("ns-a").start(0).reg(1000, A).reg(2000, R, remote="10.9.9.9:1")
    ns_b = Log("ns-b").start(0).reg(1000, A).close(1500, A).reg(2000, R, remote="10.9.9.9:1")
    ns_c = (
        Log("ns-c")
        .start(0)
        .add(1000, "heartbeat", request_code=904, cluster="C1", broker_name="broker-a", broker_addr=R)
        .reg(1100, A)
        .add(
            1200,
            "register",
            request_code=103,
            cluster="C1",
            broker_name="broker-a",
            broker_id=None,
            broker_addr=R,
            remote="10.9.9.9:1",
        )
    )
    rows = of_kind(findings(spark, ns_a, ns_b, ns_c, known_names=ALL_KNOWN), "broker_name_takeover")
    assert [(r["ns"], r["subject"]) for r in rows] == [("ns-a", "broker-a")]


# ---------------------------------------------------------------------------- new names


def test_new_names_are_info_without_history(spark):
    log = Log().start(0).reg(1000, A).reg(2000, R, cluster="Evil", remote="10.9.9.9:1")
    rows = findings(spark, log, known_names=(), has_history=False)
    new = [(r["kind"], r["subject"], r["severity"]) for r in rows if r["kind"].startswith("new_")]
    assert new == [
        ("new_broker_name", "broker-a", "info"),
        ("new_cluster", "C1", "info"),
        ("new_cluster", "Evil", "info"),
    ]


def test_new_names_with_a_takeover_are_warnings_when_the_lake_has_history(spark):
    log = (
        Log()
        .start(0)
        .reg(1000, A)
        .reg(2000, R, cluster="Evil", remote="10.9.9.9:1")  # takeover of broker-a from a new cluster
        .reg(3000, "10.9.9.9:20911", name="broker-x", cluster="C1", remote="10.9.9.9:2")  # same host
        .reg(4000, "10.0.0.8:10911", name="broker-new", cluster=None)
    )  # benign new name, null cluster
    rows = findings(spark, log, known_names=ALL_KNOWN, has_history=True)
    new = {(r["kind"], r["subject"]): r for r in rows if r["kind"].startswith("new_")}
    assert {k: r["severity"] for k, r in new.items()} == {
        ("new_cluster", "Evil"): "warning",
        ("new_broker_name", "broker-x"): "warning",
        ("new_broker_name", "broker-new"): "info",
    }
    evil = new[("new_cluster", "Evil")]
    assert (evil["start_ts"], evil["ns"]) == (at(2000), "ns-a")
    assert evil["detail"] == {
        "first_broker_addr": R,
        "first_remote_host": "10.9.9.9",
        "registrations": 1,
        "lake_has_history": True,
        "with_takeover": True,
    }


# ---------------------------------------------------------------------------- admin_burst


def test_admin_burst_more_than_n_in_a_window_per_host(spark):
    log = Log().start(0)
    for t in (1000, 2000, 3000, 4000, 5000):  # 5 changes in 4 s from 10.0.0.99: over 3
        log.admin(t, "10.0.0.99:1", code=(205, 327, 216, 104, 205)[t // 1000 - 1])
    for t in (40_000, 41_000, 42_000):  # exactly 3: not more than 3
        log.admin(t, "10.0.0.99:2")
    for t in (60_000, 60_000, 60_000, 60_000):  # 4 at the same instant: a burst
        log.admin(t, "10.0.0.98:1")
    for t in (1000, 1000, 1000, 1000):  # no peer: no source to blame
        log.admin(t, None)
    rows = of_kind(findings(spark, log, known_names=ALL_KNOWN), "admin_burst")
    assert [(r["subject"], r["ns"], r["start_ts"], r["end_ts"], r["detail"]["changes"]) for r in rows] == [
        ("10.0.0.98", "ns-a", at(60_000), at(60_000), 4),
        ("10.0.0.99", "ns-a", at(1000), at(5000), 5),
    ]
    assert rows[1]["detail"] == {
        "changes": 5,
        "max_in_window": 5,
        "window_ms": 10_000,
        "threshold": 3,
        "request_codes": [104, 205, 216, 327],
    }


def test_admin_bursts_apart_are_separate_findings(spark):
    log = Log().start(0)
    for t in (0, 1, 2, 3, 50_000, 50_001, 50_002, 50_003):
        log.admin(1000 + t, "10.0.0.99:1")
    rows = of_kind(findings(spark, log, known_names=ALL_KNOWN), "admin_burst")
    assert [(r["start_ts"], r["end_ts"]) for r in rows] == [(at(1000), at(1003)), (at(51_000), at(51_003))]


# ----------------------------------------------------------------------- refused_requests


def test_refused_requests_grouped_by_source_host_across_servers(spark):
    ns_a = (
        Log("ns-a")
        .start(0)
        .refused(1000, "10.9.9.9:1", "unsigned")
        .refused(2000, "10.9.9.9:2", "bad signature", access_key="ak1", code=205)
        .refused(3000, None, "unsigned")
        .refused(4000, "10.0.0.1:1", "crc32 not match", reason="crc_mismatch")
    )  # not an ACL refusal
    ns_b = Log("ns-b").start(0).refused(5000, "10.9.9.9:3", "address 10.9.9.9 not allowed", access_key="ak1")
    rows = of_kind(findings(spark, ns_a, ns_b, known_names=ALL_KNOWN), "refused_requests")
    assert [(r["subject"], r["severity"], r["ns"], r["start_ts"], r["end_ts"]) for r in rows] == [
        ("10.9.9.9", "warning", None, at(1000), at(5000)),
        ("unknown", "warning", None, at(3000), at(3000)),
    ]
    assert rows[0]["detail"] == {
        "refused": 3,
        "ns_ids": ["ns-a", "ns-b"],
        "request_codes": [103, 205],
        "details": ["address 10.9.9.9 not allowed", "bad signature", "unsigned"],
        "access_keys": ["ak1"],
    }


def test_refused_requests_threshold(spark):
    log = Log().start(0).refused(1000, "10.9.9.9:1").refused(2000, "10.9.9.9:1").refused(3000, "10.0.0.1:1")
    params = S.SecurityParams(refused_requests_min=2)
    rows = of_kind(findings(spark, log, known_names=ALL_KNOWN, params=params), "refused_requests")
    assert [r["subject"] for r in rows] == ["10.9.9.9"]


def test_a_quiet_day_has_no_findings_and_the_schema(spark):
    log = Log().start(0).reg(1000, A).reg(1500, B, bid=1).hb(31000, A).hb(31500, B, bid=1)
    frames = S.build_security(events_df(spark, log), known(spark, *ALL_KNOWN), history(spark, True), PARAMS)
    assert frames.findings_df.columns == list(S.FINDING_COLUMNS)
    assert frames.findings_df.count() == 0
    frames.release()


# --------------------------------------------------------------------------- run_security


def test_run_security_reads_history_from_the_lake_and_reruns_the_same(spark, tmp_path):
    from jobs.lake.tables import write_table

    lake_dir = str(tmp_path / "lake")
    day_before = DAY - dt.timedelta(days=1)
    before = Log("ns-a", day=day_before).start(0).reg(1000, B, name="broker-b").reg(86_400_000 - 30_000, A)
    today = Log("ns-a", seq=4).reg(1000, R, cluster="Evil", remote="10.9.9.9:1")  # A still live: takeover
    today.hb(2000, A)
    write_table(
        events_df(spark, before, today),
        lake.table_path(lake_dir, lake.EVENTS),
        mode="append",
        partition_by=["date", "ns"],
        schema=EVENTS_TABLE_SCHEMA,
    )
    result = S.run_security(spark, lake_dir, DAY, Config())
    # A registered 30 s before midnight (inside the carried tail); the names come from the lake,
    # so Evil is new, and a warning because the takeover brought it
    written = read_table(
        spark, lake.table_path(lake_dir, lake.FINDINGS), FINDINGS_SCHEMA, where={"date": DAY, "category": "security"}
    )
    kinds = sorted((r["kind"], r["subject"], r["severity"]) for r in written.collect())
    assert kinds == [("broker_name_takeover", "broker-a", "critical"), ("new_cluster", "Evil", "warning")]
    assert result.findings == 2 and result.findings_by_kind["new_cluster"] == 1
    S.run_security(spark, lake_dir, DAY, Config())
    again = read_table(
        spark, lake.table_path(lake_dir, lake.FINDINGS), FINDINGS_SCHEMA, where={"date": DAY, "category": "security"}
    )
    assert_df_equality(again, written, ignore_row_order=True)


# ---------------------------------------------------------------------- live, end to end

TOPICS = [TopicConfig("TopicTest", 8, 8)]
SECRET = "live-secret-Zq9"


def day_clock():
    """An epoch-ms clock that runs from 01:00 of DAY."""
    origin = time.monotonic_ns() // 1_000_000
    return lambda: T0 + 3_600_000 + time.monotonic_ns() // 1_000_000 - origin


@contextlib.asynccontextmanager
async def live_server(events_dir: Path, access: AccessController | None = None, clock=None):
    """A real server on 127.0.0.1:0 whose clock (``day_clock`` by default) runs in DAY, so the log
    is DAY's."""
    controller = NameServerController(
        "ns-live",
        events_dir,
        NameServerConfig(listen="127.0.0.1:0"),
        EventLogConfig(durability="none"),
        clock=clock or day_clock(),
        access=access,
    )
    await controller.start()
    try:
        yield controller
    finally:
        await controller.shutdown("test end")


def logged(events_dir: Path) -> list[dict]:
    lines = []
    for path in sorted(events_dir.rglob("events-*")):
        lines += [json.loads(line) for line in path.read_text().splitlines()]
    return lines


def audit(spark, events_dir: Path, lake_dir: Path) -> list[dict]:
    run_ingest(spark, str(events_dir), str(lake_dir), DAY)
    S.run_security(spark, str(lake_dir), DAY, Config())
    written = read_table(
        spark, lake.table_path(lake_dir, lake.FINDINGS), FINDINGS_SCHEMA, where={"date": DAY, "category": "security"}
    )
    return [as_finding(r) for r in written.collect()]


def test_live_rogue_takes_over_a_live_broker_name(spark, tmp_path):
    events_dir, lake_dir = tmp_path / "events", tmp_path / "lake"

    async def scenario():
        async with live_server(events_dir) as ctl:
            broker = await RemotingClient.connect(ctl.host, ctl.port)
            rogue = await RemotingClient.connect(ctl.host, ctl.port)
            ok = await broker.register_broker(
                "DefaultCluster", "127.0.0.1:10911", "broker-a", 0, "127.0.0.1:10912", DataVersion(100, 1), TOPICS
            )
            hijack = await rogue.register_broker(
                "DefaultCluster", R, "broker-a", 0, "10.9.9.9:10912", DataVersion(100, 1), TOPICS
            )
            route = await broker.route("TopicTest")  # what producers now get: the rogue's address
            await rogue.close()
            await broker.close()
            return ok.code, hijack.code, route, rogue.local_address

    ok, hijack, route, rogue_peer = asyncio.run(scenario())
    assert (ok, hijack) == (0, 0) and route["broker_datas"][0]["broker_addrs"] == {0: R}
    rogue_event = next(e for e in logged(events_dir) if e["type"] == "register" and e["broker_addr"] == R)
    rows = audit(spark, events_dir, lake_dir)
    takeover = [r for r in rows if r["kind"] == "broker_name_takeover"]
    assert len(takeover) == 1
    assert takeover[0]["subject"] == "broker-a" and takeover[0]["severity"] == "critical"
    assert takeover[0]["start_ts"] == dt.datetime.fromtimestamp(rogue_event["ts"] / 1000, dt.UTC)
    assert takeover[0]["detail"]["old_addr"] == "127.0.0.1:10911" and takeover[0]["detail"]["new_addr"] == R
    assert takeover[0]["detail"]["remote"] == rogue_peer == rogue_event["remote"]
    mismatch = [r["subject"] for r in rows if r["kind"] == "addr_host_mismatch"]
    assert mismatch == [R]  # the real broker advertised its peer host; the rogue did not


def test_live_with_access_control_refuses_the_rogue_and_keeps_secrets_out(spark, tmp_path):
    events_dir, lake_dir = tmp_path / "events", tmp_path / "lake"
    access = AccessController(SecretStore({"broker": SECRET}), ["127.0.0.0/8"], ["DefaultCluster"])

    clock = day_clock()  # signatures are stamped with the server's (DAY's) time, or they would be stale

    async def scenario():
        async with live_server(events_dir, access, clock) as ctl:
            broker = await RemotingClient.connect(
                ctl.host, ctl.port, credentials=Credentials("broker", SECRET), clock=clock
            )
            rogue = await RemotingClient.connect(ctl.host, ctl.port)
            forger = await RemotingClient.connect(
                ctl.host, ctl.port, credentials=Credentials("broker", "guess"), clock=clock
            )
            codes = [
                (
                    await broker.register_broker(
                        "DefaultCluster",
                        "127.0.0.1:10911",
                        "broker-a",
                        0,
                        "127.0.0.1:10912",
                        DataVersion(100, 1),
                        TOPICS,
                    )
                ).code,
                (
                    await rogue.register_broker(
                        "DefaultCluster",
                        "127.0.0.1:20911",
                        "broker-a",
                        0,
                        "127.0.0.1:20912",
                        DataVersion(100, 1),
                        TOPICS,
                    )
                ).code,
                (
                    await forger.register_broker(
                        "DefaultCluster",
                        "127.0.0.1:20911",
                        "broker-a",
                        0,
                        "127.0.0.1:20912",
                        DataVersion(100, 1),
                        TOPICS,
                    )
                ).code,
            ]
            route = await rogue.route("TopicTest")  # lookups stay open
            for client in (broker, rogue, forger):
                await client.close()
            return codes, route

    codes, route = asyncio.run(scenario())
    assert codes == [0, 16, 16] and route["broker_datas"][0]["broker_addrs"] == {0: "127.0.0.1:10911"}
    rows = audit(spark, events_dir, lake_dir)
    assert [r["kind"] for r in rows if r["kind"] not in ("new_cluster", "new_broker_name")] == ["refused_requests"]
    refused = next(r for r in rows if r["kind"] == "refused_requests")
    assert refused["subject"] == "127.0.0.1"
    assert refused["detail"]["refused"] == 2 and refused["detail"]["details"] == ["bad signature", "unsigned"]
    assert refused["detail"]["access_keys"] == ["broker"]
    from jobs.report import data as report_data

    # the day's report, as the nightly audit writes it from these tables
    html, summary = report_data.write_day_report(
        str(lake_dir), report_data.collect_report_data(spark, str(lake_dir), DAY)
    )
    assert "refused_requests" in Path(html).read_text()
    everything = "\n".join(p.read_text() for p in events_dir.rglob("events-*"))
    everything += "\n".join(str(r) for r in rows)
    everything += Path(html).read_text() + Path(summary).read_text()
    assert SECRET not in everything and "guess" not in everything
