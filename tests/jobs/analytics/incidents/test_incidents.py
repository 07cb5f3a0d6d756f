"""Incidents: the day's findings grouped by root cause (``jobs.analytics.incidents``).

Hand-built findings of one day, as the stages write them, for a wipe on one server, a lost
unregister, a server restart, a layout mismatch, a finding without span or detail, and the
grouping's time edge; then the stage on a lake, and the fault-free simulated day through the
whole audit.
"""

from __future__ import annotations

import datetime as dt
import json

import pytest
from pyspark.sql import functions as F

from common.config import Config
from common.timeutil import DAY_MS, day_start_ms
from jobs import lake
from jobs.analytics import incidents as I
from jobs.lake.findings import write_findings
from jobs.lake.tables import read_table, write_table
from schemas.findings import FINDINGS_SCHEMA
from schemas.incidents import INCIDENTS_SCHEMA
from schemas.routes import BROKER_ADDR_HISTORY_SCHEMA
from tests.jobs.fault_free import fault_free_day  # noqa: F401  (the shared fault-free day, a fixture)
from tests.jobs.inputs import frame

pytestmark = pytest.mark.spark

DAY = dt.date(2026, 11, 21)
T0 = day_start_ms(DAY)
H = 3_600_000
STEP = 300_000
GAP = I.INCIDENT_GAP_MS
CATEGORY = {
    "broker_expired": "liveness",
    "broker_unregistered": "liveness",
    "ns_restart": "liveness",
    "ns_divergence": "consistency",
    "seq_gap": "telemetry",
    "duplicate_events": "telemetry",
}


def ts(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp((T0 + ms) / 1000, tz=dt.UTC)


def finding(fid, finding_kind, severity, subject, ns, start, end, /, **detail):
    """A ``findings`` row of ``DAY``; times in ms after 00:00."""
    return (
        DAY,
        CATEGORY.get(finding_kind, "distribution"),
        finding_kind,
        severity,
        subject,
        ns,
        ts(start),
        ts(end),
        json.dumps(detail),
        fid,
        None,
    )


def ms(collected: dt.datetime) -> int:
    """Milliseconds after 00:00 of a collected timestamp (naive, in the machine's time zone)."""
    return round(collected.timestamp() * 1000) - T0


def views(wrong: str, odd: str, usual: str) -> dict:
    """An episode's views: ``wrong`` holds ``odd``, the other servers ``usual`` (the majority)."""
    return {"ns_views": {ns: odd if ns == wrong else usual for ns in ("ns-a", "ns-b", "ns-c")}, "majority": usual}


WIPED = [
    {
        "broker_name": "broker-004",
        "cluster": "C1",
        "perm": 4,
        "read_queue_nums": 8,
        "write_queue_nums": 8,
        "has_master": True,
    }
]
ROWS = [
    # a wipe of broker-004's write perm on ns-c at 10:00:01, added back at 10:20
    finding("w1", "write_perm_wiped", "warning", "broker-004", "ns-c", 10 * H + 1_000, 10 * H + 20 * 60_000, topics=2),
    *[
        finding(
            f"w{i}",
            "ns_divergence",
            "warning",
            t,
            None,
            10 * H + 1_000,
            10 * H + 19 * 60_000,
            kind="queue_data_mismatch",
            key={"topic": t, "broker_name": "broker-004"},
            **views("ns-c", "8/8/4/0", "8/8/6/0"),
        )
        for i, t in ((2, "t1"), (3, "t2"))
    ],
    finding(
        "w4",
        "no_writable_queue",
        "critical",
        "t1",
        "ns-c",
        10 * H + 1_000,
        10 * H + 20 * 60_000,
        write_queues=8,
        queue_datas=WIPED,
    ),
    # 10.0.3.1 (broker-003's master) unregisters at 12:00; ns-c lost the request and expires it
    *[
        finding(
            f"u{ns}",
            "broker_unregistered",
            "info",
            "10.0.3.1:10911",
            ns,
            0,
            12 * H,
            broker_name="broker-003",
            broker_id=0,
        )
        for ns in ("ns-a", "ns-b")
    ],
    finding(
        "u3",
        "broker_expired",
        "warning",
        "10.0.3.1:10911",
        "ns-c",
        12 * H - 5_000,
        12 * H + 125_000,
        broker_name="broker-003",
        broker_id=0,
    ),
    finding(
        "u4",
        "ns_divergence",
        "warning",
        "10.0.3.1:10911",
        None,
        12 * H + 1_000,
        12 * H + 125_000,
        kind="broker_missing",
        key={"broker_addr": "10.0.3.1:10911"},
        **views("ns-c", "live", "absent"),
    ),
    # ns-c restarts at 15:00 after a crash and lost events
    finding("r1", "ns_restart", "critical", "ns-c", "ns-c", 15 * H - 9_000, 15 * H),
    finding("r2", "seq_gap", "warning", "ns-c", "ns-c", 15 * H - 9_000, 15 * H),
    # a topic laid out with fewer read than write queues, on every server all day
    *[
        finding(f"m{ns}", "read_write_mismatch", "warning", "topic-9", ns, 0, DAY_MS, unread_write_queues=4)
        for ns in ("ns-a", "ns-b", "ns-c")
    ],
    # null row: a finding without span, ns or detail fields
    finding("n1", "duplicate_events", "info", "ns-b", None, None, None),
    # edge: two expiries of broker-007 exactly the gap apart are one incident; one a millisecond later, another
    finding(
        "e1",
        "broker_expired",
        "warning",
        "10.0.7.1:10911",
        "ns-a",
        20 * H,
        20 * H + 1_000,
        broker_name="broker-007",
        broker_id=1,
    ),
    finding(
        "e2",
        "broker_expired",
        "warning",
        "10.0.7.1:10911",
        "ns-b",
        20 * H + 1_000 + GAP,
        20 * H + 2_000 + GAP,
        broker_name="broker-007",
        broker_id=1,
    ),
    finding(
        "e3",
        "broker_expired",
        "warning",
        "10.0.7.1:10911",
        "ns-c",
        20 * H + 2_001 + 2 * GAP,
        21 * H,
        broker_name="broker-007",
        broker_id=1,
    ),
    # edge: no queue of any group's doing (write perm, a master, 0 write queues)
    finding(
        "z1",
        "no_writable_queue",
        "critical",
        "t0",
        "ns-a",
        3 * H,
        3 * H + 60_000,
        write_queues=0,
        queue_datas=[{**WIPED[0], "perm": 6, "write_queue_nums": 0}],
    ),
]
ADDR_ROWS = [("ns-a", "C1", "broker-003", 0, "10.0.3.1:10911", ts(0), None, 1, None, DAY)]


def linked(spark):
    findings_df = frame(spark, ROWS, FINDINGS_SCHEMA)
    addr_df = I.agg_addr_names(frame(spark, ADDR_ROWS, BROKER_ADDR_HISTORY_SCHEMA))
    return I.link_findings(findings_df, addr_df, DAY, STEP)


def test_findings_sharing_a_root_cause_make_one_incident(spark):
    linked_df = linked(spark)
    servers_df = frame(spark, [(3,)], "n_servers int")
    got = {r["incident_id"]: r.asDict() for r in I.agg_incidents(linked_df, servers_df, DAY).collect()}
    by_finding = {r["finding_id"]: r["incident_id"] for r in linked_df.select("finding_id", "incident_id").collect()}
    # every finding is in exactly one incident, and the incident lists it
    assert sorted(by_finding) == sorted(row[-2] for row in ROWS)
    assert sorted(f for inc in got.values() for f in inc["finding_ids"]) == sorted(by_finding)
    assert all(by_finding[f] == i for i, inc in got.items() for f in inc["finding_ids"])

    def incident(fid):
        inc = got[by_finding[fid]]
        return (inc["root_cause"], inc["subject"], inc["servers"], inc["severity"], sorted(inc["finding_ids"]))

    assert incident("w1") == ("write_perm_wiped", "broker-004", ["ns-c"], "critical", ["w1", "w2", "w3", "w4"])
    wipe = got[by_finding["w1"]]
    # starts at the wipe (10:00:01), ends at the add
    assert (ms(wipe["start_ts"]), ms(wipe["end_ts"])) == (10 * H + 1_000, 10 * H + 20 * 60_000)
    assert (wipe["topics_unwritable"], wipe["write_queues_unwritable"], wipe["topics_unroutable"]) == (1, 8, 0)
    assert wipe["client_share"] == pytest.approx(1 / 3)
    assert incident("u3") == (
        "lost_unregister",
        "broker-003",
        ["ns-a", "ns-b", "ns-c"],
        "warning",
        ["u3", "u4", "uns-a", "uns-b"],
    )
    assert got[by_finding["u3"]]["client_share"] == 1.0
    assert incident("r1") == ("server_restart", "ns-c", ["ns-c"], "critical", ["r1", "r2"])
    assert incident("mns-a") == (
        "read_lt_write",
        "topic-9",
        ["ns-a", "ns-b", "ns-c"],
        "warning",
        ["mns-a", "mns-b", "mns-c"],
    )
    assert incident("n1") == ("telemetry", "ns-b", [], "info", ["n1"])
    assert ms(got[by_finding["n1"]]["start_ts"]) == 0
    assert incident("e1")[4] == ["e1", "e2"] and incident("e3")[4] == ["e3"]
    assert incident("e1")[0] == "broker_cut_off"  # expired on two of three servers
    assert incident("z1") == ("no_writable_queue", "t0", ["ns-a"], "critical", ["z1"])
    assert len(got) == 8


def test_what_a_server_lacks_just_after_its_restart_is_the_restarts_impact(spark):
    rows = [
        finding("r1", "ns_restart", "warning", "ns-c", "ns-c", 15 * H - 60_000, 15 * H),
        # from ns-c's start until midnight t1 is missing on ns-c alone: its group's master was gone
        finding(
            "r2",
            "ns_divergence",
            "warning",
            "t1",
            None,
            15 * H,
            DAY_MS,
            kind="route_missing",
            key={"topic": "t1"},
            **views("ns-c", "absent", "present"),
        ),
        # the same on ns-b, which did not restart; and on ns-c beyond the gap after its start
        finding(
            "t2",
            "ns_divergence",
            "warning",
            "t2",
            None,
            15 * H,
            DAY_MS,
            kind="route_missing",
            key={"topic": "t2"},
            **views("ns-b", "absent", "present"),
        ),
        finding(
            "t3",
            "ns_divergence",
            "warning",
            "t3",
            None,
            15 * H + GAP + 1,
            DAY_MS,
            kind="route_missing",
            key={"topic": "t3"},
            **views("ns-c", "absent", "present"),
        ),
        # broker-003 registers with ns-c again 40 s after its start: the restart's too, as the shadow
        # saw it and as the servers disagreed
        finding(
            "r3",
            "ns_divergence",
            "warning",
            "10.0.3.1:10911",
            None,
            15 * H,
            15 * H + 40_000,
            kind="broker_missing",
            key={"broker_addr": "10.0.3.1:10911"},
            **views("ns-c", "absent", "live"),
        ),
        finding(
            "r4",
            "observed_broker_missing",
            "warning",
            "broker-003",
            "ns-c",
            15 * H,
            15 * H + 40_000,
            broker_addr="10.0.3.1:10911",
            broker_name="broker-003",
        ),
        # back, ns-c shows t6's QueueData of broker-003 before the group's BrokerData: its start too
        finding(
            "r5",
            "no_writable_queue",
            "critical",
            "t6",
            "ns-c",
            15 * H,
            15 * H + 2_000,
            write_queues=8,
            queue_datas=[{"broker_name": "broker-003", "perm": 6, "has_master": False}],
        ),
        # t4 was missing on ns-c already when it stopped (a partition) and still is after: its own
        *[
            finding(
                f"t4{part}",
                "ns_divergence",
                "warning",
                "t4",
                None,
                start,
                end,
                kind="route_missing",
                key={"topic": "t4"},
                **views("ns-c", "absent", "present"),
            )
            for part, start, end in (("a", 14 * H, 15 * H - 60_000), ("b", 15 * H, DAY_MS))
        ],
        # ns-b restarts at 16:00 and 18:00; t5 is missing there from the first start on: both
        # episodes are the restarts'
        finding("q1", "ns_restart", "warning", "ns-b", "ns-b", 16 * H - 60_000, 16 * H),
        finding("q3", "ns_restart", "warning", "ns-b", "ns-b", 18 * H - 60_000, 18 * H),
        *[
            finding(
                f"q{n}",
                "ns_divergence",
                "warning",
                "t5",
                None,
                start,
                end,
                kind="route_missing",
                key={"topic": "t5"},
                **views("ns-b", "absent", "present"),
            )
            for n, start, end in ((2, 16 * H, 18 * H - 60_000), (4, 18 * H, DAY_MS))
        ],
    ]
    addr_df = I.agg_addr_names(frame(spark, ADDR_ROWS, BROKER_ADDR_HISTORY_SCHEMA))
    linked_df = I.link_findings(frame(spark, rows, FINDINGS_SCHEMA), addr_df, DAY, STEP)
    got = sorted(
        (r["root_cause"], r["subject"], r["servers"], sorted(r["finding_ids"]), r["topics_unroutable"])
        for r in I.agg_incidents(linked_df, frame(spark, [(3,)], "n_servers int"), DAY).collect()
    )
    assert got == [
        ("server_restart", "ns-b", ["ns-b"], ["q1", "q2", "q3", "q4"], 1),
        ("server_restart", "ns-c", ["ns-c"], ["r1", "r2", "r3", "r4", "r5"], 1),
        ("topic_divergence", "t2", ["ns-b"], ["t2"], 1),
        ("topic_divergence", "t3", ["ns-c"], ["t3"], 1),
        ("topic_divergence", "t4", ["ns-c"], ["t4a", "t4b"], 1),
    ]


def test_the_stage_links_every_finding_of_the_day_and_replaces_the_day(spark, tmp_path):
    findings_df = frame(spark, ROWS, FINDINGS_SCHEMA)
    for category in sorted({row[1] for row in ROWS}):
        write_findings(
            findings_df.where(F.col("category") == category).drop("finding_id", "incident_id"), tmp_path, DAY, category
        )
    write_table(
        frame(spark, ADDR_ROWS, BROKER_ADDR_HISTORY_SCHEMA),
        lake.table_path(tmp_path, lake.BROKER_ADDR_HISTORY),
        mode="overwrite",
        partition_by=["date"],
        replace_where={"date": DAY},
        schema=BROKER_ADDR_HISTORY_SCHEMA,
    )
    for _ in range(2):  # a rerun gives the same rows
        result = I.run_incidents(spark, str(tmp_path), DAY, Config())
    assert result.findings == len(ROWS)
    assert result.incidents_by_severity == {"info": 1, "warning": 4, "critical": 3}
    stored = read_table(spark, lake.table_path(tmp_path, lake.FINDINGS), FINDINGS_SCHEMA, where={"date": DAY}).collect()
    incidents = read_table(
        spark, lake.table_path(tmp_path, lake.INCIDENTS), INCIDENTS_SCHEMA, where={"date": DAY}
    ).collect()
    assert len(stored) == len(ROWS) and len(incidents) == 8
    # ids written by write_findings: content hashes, unique; each in the incident that names it
    assert len({r["finding_id"] for r in stored}) == len(ROWS)
    named = {f: inc["incident_id"] for inc in incidents for f in inc["finding_ids"]}
    assert {r["finding_id"]: r["incident_id"] for r in stored} == named


@pytest.mark.slow
def test_a_fault_free_day_has_no_incident_above_info(spark, fault_free_day):  # noqa: F811  (fixture)
    found = read_table(
        spark,
        lake.table_path(str(fault_free_day.lake), lake.FINDINGS),
        FINDINGS_SCHEMA,
        where={"date": fault_free_day.day},
    ).collect()
    incidents = read_table(
        spark,
        lake.table_path(str(fault_free_day.lake), lake.INCIDENTS),
        INCIDENTS_SCHEMA,
        where={"date": fault_free_day.day},
    ).collect()
    assert found and incidents
    serious = [(r["root_cause"], r["subject"], r["severity"]) for r in incidents if r["severity"] != "info"]
    assert not serious, serious
    assert sorted(f for inc in incidents for f in inc["finding_ids"]) == sorted(r["finding_id"] for r in found)
    assert {r["incident_id"] for r in found} == {inc["incident_id"] for inc in incidents}
    assert fault_free_day.outcome.incidents_by_severity == {"info": len(incidents), "warning": 0, "critical": 0}
