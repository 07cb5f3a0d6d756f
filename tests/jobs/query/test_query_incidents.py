"""``nsaudit incidents`` (``jobs.query.incidents``): a day's incidents from the lake, without Spark.

The lake is written with ``deltalake`` directly: an ``incidents`` partition of three incidents
(one with no server, an edge of the table's columns) and the ``audit_runs`` rows of an ok day and
of a day whose audit did not finish.
"""

from __future__ import annotations

import datetime as dt
import json

import pyarrow as pa
import pytest
from deltalake import write_deltalake
from pyspark.sql.pandas.types import to_arrow_schema

from jobs import lake
from nsaudit.cli import main
from schemas.incidents import INCIDENTS_SCHEMA

DAY = dt.date(2026, 11, 21)
UNFINISHED = dt.date(2026, 11, 22)


def _ts(h: int, m: int = 0) -> dt.datetime:
    return dt.datetime(2026, 11, 21, h, m, tzinfo=dt.UTC)


def _incident(iid, severity, cause, subject, servers, start, end, topics=0, share=1.0, unroutable=0):
    return {
        "date": DAY,
        "incident_id": iid,
        "root_cause": cause,
        "subject": subject,
        "servers": servers,
        "start_ts": start,
        "end_ts": end,
        "duration_ms": int((end - start).total_seconds() * 1000),
        "severity": severity,
        "findings": 3,
        "kinds": ["no_master"],
        "topics_unwritable": topics,
        "write_queues_unwritable": 8 * topics,
        "topics_unroutable": unroutable,
        "client_share": share,
        "finding_ids": ["f1", "f2", "f3"],
    }


@pytest.fixture(scope="module")
def lake_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("lake")
    rows = [
        _incident("inc-a", "warning", "write_perm_wiped", "broker-1", ["ns-c"], _ts(9), _ts(10), 2, 1 / 3),
        _incident("inc-b", "critical", "master_lost", "broker-2", ["ns-a", "ns-b", "ns-c"], _ts(12), _ts(12, 5), 9),
        _incident("inc-c", "info", "telemetry", "ns-b", [], _ts(0), _ts(0), share=0.0),  # no server, no span
        _incident("inc-d", "critical", "master_lost", "broker-3", ["ns-a", "ns-b", "ns-c"], _ts(1), _ts(2), 1),
        # its topics on no server at all: the widest impact, whatever it left unwritable
        _incident(
            "inc-e", "critical", "broker_shutdown", "broker-5", ["ns-a", "ns-b", "ns-c"], _ts(20), _ts(23), unroutable=3
        ),
    ]
    schema = to_arrow_schema(INCIDENTS_SCHEMA)
    write_deltalake(
        lake.table_path(root, lake.INCIDENTS), pa.Table.from_pylist(rows, schema=schema), partition_by=["date"]
    )
    runs = pa.table({"date": pa.array([DAY, UNFINISHED], pa.date32()), "status": ["ok", "running"]})
    write_deltalake(lake.table_path(root, lake.AUDIT_RUNS), runs, partition_by=["date"])
    return str(root)


def _run(capsys, *argv):
    code = main(["incidents", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def test_json_lists_the_days_incidents_worst_and_widest_first(lake_dir, capsys):
    code, out, err = _run(capsys, "--lake", lake_dir, "--date", DAY.isoformat(), "--format", "json")
    assert code == 0 and err == ""
    answer = json.loads(out)
    assert answer["audited"] is True and answer["counts"] == {"info": 1, "warning": 1, "critical": 3}
    # critical first: the one that left topics on no server, then the one that left more topics
    # unwritable before the other
    assert [i["incident_id"] for i in answer["incidents"]] == ["inc-e", "inc-b", "inc-d", "inc-a", "inc-c"]
    assert answer["incidents"][1]["start_ts"] == "2026-11-21T12:00:00.000Z"
    assert answer["incidents"][3]["client_share"] == pytest.approx(0.3333)


def test_min_severity_leaves_out_the_lesser_ones_but_counts_all(lake_dir, capsys):
    code, out, _ = _run(
        capsys, "--lake", lake_dir, "--date", DAY.isoformat(), "--min-severity", "critical", "--format", "json"
    )
    answer = json.loads(out)
    assert code == 0 and [i["severity"] for i in answer["incidents"]] == ["critical"] * 3
    assert sum(answer["counts"].values()) == 5


def test_table_names_each_incident_on_one_line(lake_dir, capsys):
    code, out, _ = _run(capsys, "--lake", lake_dir, "--date", DAY.isoformat())
    lines = out.splitlines()
    assert code == 0 and lines[0] == "2026-11-21: 3 critical, 1 warning, 1 info incidents"
    assert "unroutable" in lines[1].split() and "topics" in lines[1].split()
    assert len(lines) == 2 + 5 and "broker_shutdown" in lines[2] and lines[2].split()[6:8] == ["3", "0"]
    assert "master_lost" in lines[3] and "broker-2" in lines[3] and "inc-b" in lines[3]
    assert lines[3].split()[6:8] == ["0", "9"]
    assert "ns-c" in lines[5] and "33%" in lines[5]


def test_prometheus_exposes_the_counts(lake_dir, capsys):
    code, out, _ = _run(capsys, "--lake", lake_dir, "--date", DAY.isoformat(), "--format", "prometheus")
    assert code == 0
    assert 'nsaudit_incidents{date="2026-11-21",severity="critical"} 3' in out.splitlines()
    assert 'nsaudit_incidents_by_cause{date="2026-11-21",severity="critical",root_cause="master_lost"} 2' in out
    assert 'nsaudit_day_audited{date="2026-11-21"} 1' in out


def test_a_day_not_audited_ok_says_so(lake_dir, capsys):
    code, out, _ = _run(capsys, "--lake", lake_dir, "--date", UNFINISHED.isoformat(), "--format", "json")
    answer = json.loads(out)
    assert code == 0 and answer["audited"] is False and "did not finish" in answer["reason"]
    assert answer["incidents"] == [] and answer["counts"] == {"info": 0, "warning": 0, "critical": 0}
    code, out, _ = _run(capsys, "--lake", lake_dir, "--date", "2026-11-23")
    assert "not audited: 2026-11-23 has not been audited" in out


def test_bad_arguments_exit_2_with_one_line(lake_dir, capsys, tmp_path):
    code, _, err = _run(capsys, "--lake", str(tmp_path / "nowhere"), "--date", DAY.isoformat())
    assert code == 2 and len(err.strip().splitlines()) == 1
    code, _, err = _run(capsys, "--lake", lake_dir, "--date", "2026-13-01")
    assert code == 2 and len(err.strip().splitlines()) == 1
