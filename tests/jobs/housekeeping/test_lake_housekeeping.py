"""``nsaudit lake optimize | vacuum | retention | history`` and ``route --version``, run as a user runs
them on a small lake of four audited days, and the same operations through delta-spark.

``nsaudit route`` must answer the same before and after each operation for the days kept.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path

import pytest

from common.config import AuditConfig, Config
from common.timeutil import day_start_ms, iso
from jobs.housekeeping import native
from jobs.housekeeping.commands import ZORDER_BY, lake_tables
from jobs.housekeeping.engines import Engine
from jobs.housekeeping.files import table_files
from nsaudit.cli import main
from tests.jobs.lake_writers import writing_through

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1200)]  # builds four audited days first

DAYS = [dt.date(2026, 11, 18) + dt.timedelta(days=i) for i in range(4)]
SERVERS = ("ns-a", "ns-b")
TOPICS = ("topic-0000", "topic-0001", "topic-0002")
# instants whose answers must survive housekeeping: early and late on every day
INSTANTS = [day_start_ms(d) + offset for d in DAYS for offset in (3_600_000, 80_000_000)]


def _audit_days(spark, events: Path, lake: Path) -> None:
    """The stages ``nsaudit route`` reads (ingest, rebuild, snapshots), each day recorded ``ok``."""
    # hourly route snapshots: a small table with a file per write
    config = Config(audit=AuditConfig(snapshot_interval_ms=3_600_000))
    # Several files per partition, as a large day's shuffle writes them: something to compact
    # (the test session plans with as many shuffle partitions as cores).
    saved = spark.conf.get("spark.sql.shuffle.partitions")
    spark.conf.set("spark.sql.shuffle.partitions", "6")
    try:
        _audit(spark, events, lake, config)
    finally:
        spark.conf.set("spark.sql.shuffle.partitions", saved)


def _audit(spark, events: Path, lake: Path, config) -> None:
    from jobs import snapshots
    from jobs.ingest import stage as ingest
    from jobs.lake import audit_runs
    from jobs.rebuild import stage as rebuild

    for day in DAYS:
        audit_runs.record(spark, str(lake), day, "running", [], {})
        ingest.run_ingest(spark, str(events), str(lake), day, config)
        rebuild.run_rebuild(spark, str(lake), day, config)
        snapshots.run_snapshots(spark, str(lake), day, config)
        audit_runs.record(spark, str(lake), day, "ok", [], {})


@pytest.fixture(scope="module")
def built_lake(spark, tmp_path_factory) -> Path:
    """Four simulated days of a tiny fleet (two servers, one broker group, three topics), audited."""
    from nameserver.sim.run import SimOptions, simulate

    root = tmp_path_factory.mktemp("housekeeping")
    simulate(
        SimOptions(
            events_dir=root / "events",
            ns=len(SERVERS),
            brokers=2,
            slaves=1,
            topics=len(TOPICS),
            start_ms=day_start_ms(DAYS[0]),
            hours=24.0 * len(DAYS),
            seed=11,
            faults=("topic_change",),
            fault_rate=4.0,
            quiet=True,
        )
    )
    with writing_through(spark, "delta-rs"):
        _audit_days(spark, root / "events", root / "lake")
    return root / "lake"


@pytest.fixture
def lake(built_lake, tmp_path) -> Path:
    """A copy of the four-day lake that a test may change."""
    return Path(shutil.copytree(built_lake, tmp_path / "lake"))


@pytest.fixture
def config(tmp_path) -> Path:
    path = tmp_path / "lake.toml"
    path.write_text('[lake]\nwriter = "delta-rs"\nkeep_days = 2\n')
    return path


def run(capsys, *argv) -> tuple[int, str, str]:
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def answers(capsys, lake: Path, *extra) -> list[str]:
    """``nsaudit route`` for every server, topic and instant of :data:`INSTANTS`."""
    lines = []
    for ns in SERVERS:
        for topic in TOPICS:
            for at in INSTANTS:
                code, out, err = run(
                    capsys, "route", "--lake", lake, "--ns", ns, "--topic", topic, "--at", iso(at), *extra
                )
                assert (code, err) == (0, ""), err
                lines.append(out)
    return lines


def _most_files_per_partition(lake: Path, table: str) -> int:
    return max(table_files(str(lake / table)).per_partition.values())


def _parquet_on_disk(lake: Path, table: str) -> int:
    return sum(1 for _ in (lake / table).rglob("*.parquet"))


def test_optimize_leaves_one_file_per_partition_and_the_same_answers(lake, config, capsys):
    before = answers(capsys, lake)
    assert any('"route":{' in line for line in before)  # routes to compare, not only nulls
    files_before = {t: table_files(str(lake / t)).files for t in ("events", "route_snapshots")}
    assert max(_most_files_per_partition(lake, t) for t in files_before) > 1  # something to compact

    code, out, err = run(capsys, "lake", "optimize", "--lake", lake, "--config", config)

    assert (code, err) == (0, "")
    assert "optimize (delta-rs):" in out.splitlines()[-1]
    for table, n in files_before.items():
        assert _most_files_per_partition(lake, table) == 1
        assert table_files(str(lake / table)).files <= n
        assert f"{table} " in out
    assert answers(capsys, lake) == before
    # a second optimize finds nothing left to do and commits nothing
    code, out, _ = run(capsys, "lake", "optimize", "--lake", lake, "--config", config)
    assert code == 0 and ": 0 of " in out.splitlines()[-1]


def test_vacuum_refuses_a_short_retention_unless_forced_then_frees_the_replaced_files(lake, config, capsys):
    run(capsys, "lake", "optimize", "--lake", lake, "--config", config)
    before = answers(capsys, lake)
    on_disk = _parquet_on_disk(lake, "route_snapshots")
    assert on_disk > table_files(str(lake / "route_snapshots")).files  # the replaced files are still there

    code, out, err = run(capsys, "lake", "vacuum", "--lake", lake, "--config", config, "--retain-hours", "0")
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and "below Delta's safety default of 168 h" in err and "--force" in err
    assert _parquet_on_disk(lake, "route_snapshots") == on_disk

    code, out, err = run(capsys, "lake", "vacuum", "--lake", lake, "--config", config, "--retain-hours", "0", "--force")
    assert (code, err) == (0, "")
    line = next(line for line in out.splitlines() if line.startswith("route_snapshots "))
    assert f"deleted {on_disk - table_files(str(lake / 'route_snapshots')).files} files" in line
    for name, path in lake_tables(str(lake)):
        assert sum(1 for _ in Path(path).rglob("*.parquet")) == table_files(path).files, name
    assert answers(capsys, lake) == before


def test_retention_keeps_exactly_the_last_days(lake, config, capsys):
    kept = DAYS[-2:]
    before = answers(capsys, lake)

    code, out, err = run(capsys, "lake", "retention", "--lake", lake, "--config", config)

    assert (code, err) == (0, "")
    assert f"keeping 2 days, {kept[0]} to {kept[-1]}" in out
    for name, path in lake_tables(str(lake)):
        days = table_files(path).days
        assert days <= set(kept), name
    assert table_files(str(lake / "events")).days == set(kept)
    assert not (lake / "reports" / DAYS[0].isoformat()).exists()
    after = answers(capsys, lake)
    per_day = len(INSTANTS) // len(DAYS)
    for i, (old, new) in enumerate(zip(before, after, strict=True)):
        day = DAYS[(i % len(INSTANTS)) // per_day]
        if day in kept:
            assert new == old
        else:
            assert '"audited":false' in new and "has not been audited" in new


def test_history_lists_a_tables_commits_newest_first(lake, capsys):
    code, out, err = run(capsys, "lake", "history", "audit_runs", "--lake", lake)
    assert (code, err) == (0, "")
    commits = [json.loads(line) for line in out.splitlines()]
    assert [c["version"] for c in commits] == list(range(2 * len(DAYS) - 1, -1, -1))  # running and ok per day
    assert all(c["operation"] for c in commits) and commits[0]["timestamp"].endswith("Z")

    code, out, err = run(capsys, "lake", "history", "no_such_table", "--lake", lake)
    assert (code, out) == (2, "") and "no table 'no_such_table'" in err and "audit_runs" in err


def test_route_version_answers_from_the_lake_as_it_was(lake, capsys):
    last_day = DAYS[-1]
    at = iso(day_start_ms(last_day) + 3_600_000)
    latest = answers(capsys, lake)
    # audit_runs versions: running and ok per day, so version 2 * len(DAYS) - 2 is the last day's
    # running commit, when that day was not audited yet, and the version before it the day before's ok
    code, out, _ = run(
        capsys,
        "route",
        "--lake",
        lake,
        "--ns",
        "ns-a",
        "--topic",
        TOPICS[0],
        "--at",
        at,
        "--version",
        2 * len(DAYS) - 3,
    )
    assert code == 0 and '"audited":false' in out and f"{last_day} has not been audited" in out
    assert answers(capsys, lake, "--version", 2 * len(DAYS) - 1) == latest

    code, out, err = run(
        capsys, "route", "--lake", lake, "--ns", "ns-a", "--topic", TOPICS[0], "--at", at, "--version", 99
    )
    assert (code, out) == (2, "") and "audit_runs has versions 0 to 7" in err


def test_the_same_housekeeping_through_delta_spark(spark, lake, capsys):
    """Optimize, vacuum and a retention delete through the native engine (the session's delta-spark),
    on the two tables that grow most; the lake's other tables take the same operations."""
    from functools import partial

    engine = Engine(
        "native", partial(native.optimize, spark), partial(native.vacuum, spark), partial(native.delete_before, spark)
    )
    before = answers(capsys, lake)
    for table in ("events", "route_snapshots"):
        path = str(lake / table)
        crowded = table_files(path).crowded_days()
        if crowded:
            engine.optimize(path, crowded, ZORDER_BY.get(table, ()))
        assert _most_files_per_partition(lake, table) == 1, table
        deleted = engine.vacuum(path, 0, False)
        assert bool(deleted) == bool(crowded), table  # the files optimize replaced, and only those
        assert _parquet_on_disk(lake, table) == table_files(path).files, table
    assert answers(capsys, lake) == before
    engine.delete_before(str(lake / "events"), DAYS[-2])
    assert table_files(str(lake / "events")).days == set(DAYS[-2:])
