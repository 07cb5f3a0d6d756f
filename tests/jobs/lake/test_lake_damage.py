"""A lake table whose ``_delta_log`` cannot be read, and a version whose files ``vacuum`` removed, as
a user meets them through the command line: every ``nsaudit lake`` command and every query says in
one line which table is damaged and how, exits 1, and changes nothing; ``route --version V`` of a
vacuumed version says so.

The lake is written with ``deltalake`` alone (the columns the commands read, two days, two commits
per day), so no Spark is needed.
"""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake

from common.timeutil import day_start_ms, iso
from nsaudit.cli import main

DAYS = (dt.date(2026, 11, 20), dt.date(2026, 11, 21))
NS = "ns-a"


def _ts(ms: int | None) -> dt.datetime | None:
    return None if ms is None else dt.datetime.fromtimestamp(ms / 1000, dt.UTC)


def _tables(day: dt.date, perm: int) -> dict[str, pa.Table]:
    """One day of the tables the commands read: broker-a with topic T on ``ns-a`` all day."""
    start = day_start_ms(day)
    ts = pa.timestamp("us", tz="UTC")
    interval = {
        "valid_from_ts": pa.array([_ts(start)], ts),
        "valid_to_ts": pa.array([None], ts),
        "ns": [NS],
        "date": pa.array([day]),
    }
    return {
        "audit_runs": pa.table({"date": pa.array([day]), "status": ["ok"]}),
        "ns_state": pa.table(
            {
                "date": pa.array([day]),
                "ns": [NS],
                "up": [True],
                "up_at_start": [True],
                "observed": pa.array([False]),
                "resolution_ms": pa.array([None], pa.int64()),
            }
        ),
        "ns_runs": pa.table(
            {
                "ns": [NS],
                "start_ts": pa.array([_ts(start)], ts),
                "stop_ts": pa.array([None], ts),
                "start_seq": pa.array([1], pa.int64()),
                "stop_seq": pa.array([None], pa.int64()),
                "stop_reason": ["open"],
                "date": pa.array([day]),
            }
        ),
        "topic_route_history": pa.table(
            {
                "topic": ["T"],
                "broker_name": ["broker-a"],
                "read_queue_nums": pa.array([4], pa.int32()),
                "write_queue_nums": pa.array([4], pa.int32()),
                "perm": pa.array([perm], pa.int32()),
                "topic_sys_flag": pa.array([0], pa.int32()),
                **interval,
            }
        ),
        "broker_addr_history": pa.table(
            {
                "broker_name": ["broker-a"],
                "broker_id": pa.array([0], pa.int64()),
                "cluster": ["C"],
                "broker_addr": ["10.0.0.1:10911"],
                **interval,
            }
        ),
        "cluster_history": pa.table({"cluster": ["C"], "broker_name": ["broker-a"], **interval}),
        "filter_server_history": pa.table(
            {
                "broker_addr": pa.array([], pa.string()),
                "filter_servers": pa.array([], pa.list_(pa.string())),
                "valid_from_ts": pa.array([], ts),
                "valid_to_ts": pa.array([], ts),
                "ns": pa.array([], pa.string()),
                "date": pa.array([], pa.date32()),
            }
        ),
        "incidents": pa.table(
            {
                "date": pa.array([day]),
                "incident_id": ["inc-000000000001"],
                "root_cause": ["write_perm_wiped"],
                "subject": ["broker-a"],
                "servers": [[NS]],
                "start_ts": pa.array([_ts(start)], ts),
                "end_ts": pa.array([_ts(start + 60_000)], ts),
                "duration_ms": pa.array([60_000], pa.int64()),
                "severity": ["warning"],
                "findings": pa.array([1], pa.int32()),
                "kinds": [["write_perm_wiped"]],
                "topics_unwritable": pa.array([0], pa.int32()),
                "write_queues_unwritable": pa.array([0], pa.int64()),
                "topics_unroutable": pa.array([0], pa.int32()),
                "client_share": [1.0],
                "finding_ids": [["f1"]],
            }
        ),
    }


def _write_day(lake: Path, day: dt.date, perm: int) -> None:
    """The day's rows, replacing the day's partition: a commit per table (two files per partition
    for ``optimize`` to compact, on the first write of a day)."""
    for name, table in _tables(day, perm).items():
        path = str(lake / name)
        mode = "append" if not DeltaTable.is_deltatable(path) else "overwrite"
        predicate = None if mode == "append" else f"date = '{day.isoformat()}'"
        write_deltalake(path, table, partition_by=["date"], mode=mode, predicate=predicate)


@pytest.fixture
def lake(tmp_path) -> Path:
    """Two days, each written twice (the second write replaces the first: files for vacuum), and
    a report folder per day (for retention)."""
    lake = tmp_path / "lake"
    for day in DAYS:
        _write_day(lake, day, 6)
        _write_day(lake, day, 6)
        (lake / "reports" / day.isoformat()).mkdir(parents=True)
    return lake


@pytest.fixture
def config(tmp_path) -> Path:
    path = tmp_path / "lake.toml"
    path.write_text('[lake]\nwriter = "delta-rs"\nkeep_days = 1\n')
    return path


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def _corrupt(lake: Path, table: str) -> None:
    """The table's latest commit, overwritten with text that is not JSON (a half-written copy)."""
    log = lake / table / "_delta_log"
    latest = max(p for p in log.iterdir() if p.suffix == ".json")
    latest.write_text('{"add": {"path": "date=2026-11-2')


def _listing(lake: Path) -> dict[str, tuple[int, int]]:
    """Every file of the lake with its size and modification time."""
    return {str(p.relative_to(lake)): (p.stat().st_size, p.stat().st_mtime_ns) for p in lake.rglob("*") if p.is_file()}


def _one_damage_line(err: str, table: str) -> None:
    assert err.count("\n") == 1, err
    assert f"table {table}: its _delta_log cannot be read (" in err and "Traceback" not in err, err
    assert "at ./nptl" not in err and "   0: " not in err  # no Rust backtrace either


@pytest.mark.parametrize(
    "argv",
    [
        ("lake", "optimize"),
        ("lake", "vacuum", "--retain-hours", "0", "--force"),
        ("lake", "retention"),
        ("lake", "retention", "--keep-days", "1"),
    ],
)
def test_a_lake_command_stops_at_a_damaged_table_and_changes_nothing(lake, config, capsys, argv):
    # topic_route_history comes after most tables by name: nothing before it may be touched either
    _corrupt(lake, "topic_route_history")
    before = _listing(lake)
    code, out, err = run(capsys, *argv, "--lake", lake, "--config", config)
    assert (code, out) == (1, "")
    _one_damage_line(err, "topic_route_history")
    assert _listing(lake) == before


def test_retention_refuses_to_run_past_an_unreadable_audit_runs(lake, config, capsys):
    _corrupt(lake, "audit_runs")
    before = _listing(lake)
    code, out, err = run(capsys, "lake", "retention", "--lake", lake, "--config", config)
    assert (code, out) == (1, "")
    _one_damage_line(err, "audit_runs")
    assert _listing(lake) == before and (lake / "reports" / DAYS[0].isoformat()).is_dir()


def test_history_of_a_damaged_table_is_one_line_and_of_the_others_still_works(lake, capsys):
    _corrupt(lake, "ns_runs")
    code, out, err = run(capsys, "lake", "history", "ns_runs", "--lake", lake)
    assert (code, out) == (1, "")
    _one_damage_line(err, "ns_runs")
    code, out, err = run(capsys, "lake", "history", "ns_state", "--lake", lake)
    assert code == 0 and err == "" and len(out.splitlines()) == 4


def test_the_lake_commands_work_on_the_undamaged_lake(lake, config, capsys):
    """The fixture is a lake the commands accept: what the damage tests see is the damage."""
    code, out, err = run(capsys, "lake", "optimize", "--lake", lake, "--config", config)
    assert code == 0 and err == "", err
    code, out, err = run(capsys, "lake", "retention", "--lake", lake, "--config", config)
    assert code == 0 and err == "" and not (lake / "reports" / DAYS[0].isoformat()).exists()


AT = iso(day_start_ms(DAYS[1]) + 3_600_000)


@pytest.mark.parametrize("table", ["ns_state", "audit_runs", "topic_route_history", "broker_addr_history", "ns_runs"])
@pytest.mark.parametrize(
    "argv",
    [
        ("route", "--ns", NS, "--topic", "T", "--at", AT),
        ("cluster", "--ns", NS, "--at", AT),
        ("diff", "--ns", NS, "--from", iso(day_start_ms(DAYS[1])), "--to", AT),
    ],
)
def test_a_query_on_a_damaged_table_is_one_line_and_exit_1(lake, capsys, table, argv):
    code, out, err = run(capsys, *argv[:1], "--lake", lake, *argv[1:])
    assert code == 0, err  # answered before the damage
    _corrupt(lake, table)
    code, out, err = run(capsys, *argv[:1], "--lake", lake, *argv[1:])
    assert (code, out) == (1, "")
    _one_damage_line(err, table)


@pytest.mark.parametrize("table", ["audit_runs", "incidents"])
def test_incidents_of_a_damaged_lake_is_one_line_and_exit_1(lake, capsys, table):
    argv = ("incidents", "--lake", lake, "--date", DAYS[1].isoformat())
    code, out, err = run(capsys, *argv)
    assert code == 0 and "1 warning" in out, err
    _corrupt(lake, table)
    code, out, err = run(capsys, *argv)
    assert (code, out) == (1, "")
    _one_damage_line(err, table)


def test_a_version_vacuum_removed_says_so(lake, config, capsys):
    """A rerun of the last day changes a perm; after a vacuum of everything older, the version
    before the rerun can no longer be read, and route --version says it was vacuumed."""
    argv = ("route", "--lake", lake, "--ns", NS, "--topic", "T", "--at", AT)
    old = len(DeltaTable(str(lake / "audit_runs")).history()) - 1
    code, out, err = run(capsys, *argv, "--version", old)
    assert code == 0 and '"perm":6' in out, err
    _write_day(lake, DAYS[1], 4)  # the rerun
    code, out, err = run(capsys, "lake", "vacuum", "--lake", lake, "--config", config, "--retain-hours", "0", "--force")
    assert code == 0, err
    code, out, err = run(capsys, *argv, "--version", old)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
    assert f"--version {old}: audit_runs version {old} (" in err and "nsaudit lake vacuum removed its files" in err
    assert "no such name server" not in err
    code, out, err = run(capsys, *argv)
    assert code == 0 and '"perm":4' in out, err  # the latest version reads as before


def test_a_file_of_the_latest_version_gone_is_damage(lake, capsys):
    data = next(
        p
        for p in (lake / "topic_route_history" / f"date={DAYS[1]}").glob("*.parquet")
        if p.name in {os.path.basename(u) for u in DeltaTable(str(lake / "topic_route_history")).file_uris()}
    )
    data.unlink()
    code, out, err = run(capsys, "route", "--lake", lake, "--ns", NS, "--topic", "T", "--at", AT)
    assert (code, out) == (1, "") and err.count("\n") == 1, err
    assert "table topic_route_history: its latest version names data file" in err and "gone from disk" in err
