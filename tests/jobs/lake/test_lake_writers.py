"""Both Delta writers give the same lake: the whole audit of a small simulated day through delta-rs
(into a local folder) and through delta-spark (native, into a bucket) gives every table the same
rows and schema, and each engine reads the other's tables, older versions included. README
"Running on a cluster" and docs/audit.md, "Lake writes", promise it.

And the same on object storage: the day's events in a bucket of a real S3 server (S3Proxy), audited
into ``s3a://`` lakes, give the local lake's tables, and ``nsaudit route``, ``cluster`` and
``incidents`` answer the same from the bucket. Through delta-rs the bucket's lake is written by two
audits at once (docs/audit.md, "Concurrent audits"): both finish, or one stops at a commit
conflict, and the tables are one run's.

Three audits of the day in all: the native one writes to the bucket only, since a native lake in a
bucket that equals the local delta-rs lake says both that the writers agree and that the bucket
loses nothing.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest

from common.config import Config
from common.timeutil import day_start_ms
from jobs import nightly_audit
from jobs.housekeeping.commands import lake_tables
from jobs.lake.delta.schema import delta_spark_schema
from jobs.lake.tables import read_table, table_schema
from jobs.storage.locations import join
from tests.jobs.buckets import BUCKET, config_file, on_s3, subprocess_env, upload
from tests.jobs.lake_writers import writing_through

# the module fixture audits a day through each writer: allow it more than the suite's 600 s per test on a
# loaded machine (a pytest-timeout signal inside a py4j call would break the shared session).
pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1500)]

DAY = dt.date(2026, 11, 21)
WRITERS = ("delta-rs", "native")
_spec = importlib.util.spec_from_file_location(
    "lake_diff", Path(__file__).resolve().parents[3] / "bench" / "lake_diff.py"
)
lake_diff = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lake_diff)


@pytest.fixture(scope="module")
def local_lake(spark, tmp_path_factory) -> Path:
    """The same simulated half hour (three servers, four brokers, every fault) audited through
    delta-rs into a local folder (its events beside it, in ``events/``)."""
    from nameserver.sim.run import FAULTS, SimOptions, simulate

    root = tmp_path_factory.mktemp("writers")
    simulate(
        SimOptions(
            events_dir=root / "events",
            ns=3,
            brokers=4,
            slaves=1,
            topics=6,
            start_ms=day_start_ms(DAY),
            hours=0.5,
            seed=5,
            faults=FAULTS,
            fault_rate=12.0,
            quiet=True,
        )
    )
    with writing_through(spark, "delta-rs"):
        nightly_audit.run(spark, Config(), str(root / "events"), str(root / "delta-rs"), DAY, lambda line: None)
    return root / "delta-rs"


def _audit_at_once(events: str, lake: str, config: Path, logs: Path) -> list[subprocess.CompletedProcess]:
    """Two ``nsaudit audit`` of the day into one lake, started together."""
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
    procs = []
    for n in (1, 2):
        with open(logs / f"audit{n}.out", "wb") as out, open(logs / f"audit{n}.err", "wb") as err:
            procs.append(subprocess.Popen(argv, stdout=out, stderr=err, env=subprocess_env()))
    codes = [p.wait(900) for p in procs]
    return [
        subprocess.CompletedProcess(
            argv, code, (logs / f"audit{n}.out").read_text(), (logs / f"audit{n}.err").read_text()
        )
        for n, code in zip((1, 2), codes, strict=True)
    ]


@pytest.fixture(scope="module")
def s3_lakes(spark, local_lake, s3_server, tmp_path_factory) -> dict:
    """The day's events in the bucket, audited into ``s3a://`` lakes: through delta-spark in this
    session, through delta-rs by two ``nsaudit audit`` processes at once."""
    root = tmp_path_factory.mktemp("writers-s3")
    events = upload(s3_server, local_lake.parent / "events", "writers/events")
    s3 = {writer: f"s3a://{BUCKET}/writers/{writer}" for writer in WRITERS}
    with on_s3(s3_server, spark), writing_through(spark, "native"):
        nightly_audit.run(spark, Config(), events, s3["native"], DAY, lambda line: None)
    config = config_file(s3_server, root / "audit.toml")
    return {"lakes": s3, "concurrent": _audit_at_once(events, s3["delta-rs"], config, root), "config": config}


@pytest.fixture
def lakes(spark, s3_server, local_lake, s3_lakes) -> Iterator[dict[str, str]]:
    """Each writer's lake: delta-rs's local one, the native one in the bucket (reachable inside)."""
    with on_s3(s3_server, spark):
        yield {"delta-rs": str(local_lake), "native": s3_lakes["lakes"]["native"]}


def test_a_lake_in_a_bucket_equals_the_local_lake(s3_server, local_lake, s3_lakes):
    """The bucket's delta-rs lake (written by the two audits at once) equals the local one; the
    bucket's native lake is compared with it in the test of both writers."""
    with on_s3(s3_server):
        remote = s3_lakes["lakes"]["delta-rs"]
        names = sorted(lake_diff._tables(remote))
        assert names == sorted(lake_diff._tables(str(local_lake))) and len(names) == 18
        differ = {name: lake_diff.compare_table(local_lake, remote, name) for name in names}
        assert {name: problem for name, problem in differ.items() if problem} == {}
        assert lake_diff.compare_summaries(local_lake, remote) == []


def test_two_audits_at_once_on_a_bucket_finish_or_one_stops_cleanly(s3_server, s3_lakes):
    """Both processes wrote the same ``s3a://`` lake through delta-rs; its tables equal the local
    lake (the test above), so no commit was lost or doubled. Each exits 0, or 1 with the one line
    of a commit that lost to the other's; at least one finished and the day is audited."""
    runs = s3_lakes["concurrent"]
    assert all(r.returncode in (0, 1) for r in runs), [r.stderr[-2000:] for r in runs]
    assert any(r.returncode == 0 for r in runs), [r.stderr[-2000:] for r in runs]
    for run in runs:
        if run.returncode == 1:
            errors = [line for line in run.stderr.splitlines() if "error:" in line]
            assert len(errors) == 1 and "concurrent" in errors[0].lower(), run.stderr[-2000:]
    from jobs.backfill import audited_ok

    with on_s3(s3_server):
        assert audited_ok(s3_lakes["lakes"]["delta-rs"]) == {DAY}


def test_the_queries_answer_the_same_from_a_bucket(s3_server, local_lake, s3_lakes):
    from jobs.query.incidents import day_incidents
    from jobs.query.lookup import RouteLake, cluster_answer, route_answer

    def answers(lake) -> list:
        route_lake = RouteLake(str(lake))
        instants = [int(dt.datetime(2026, 11, 21, 0, m, tzinfo=dt.UTC).timestamp() * 1000) for m in (5, 17, 29)]
        return (
            [
                route_answer(route_lake, ns, f"topic-000{t}", at)
                for ns in ("ns-a", "ns-b", "ns-c")
                for t in range(3)
                for at in instants
            ]
            + [cluster_answer(route_lake, ns, at) for ns in ("ns-a", "ns-b", "ns-c") for at in instants]
            + [day_incidents(str(lake), DAY)]
        )

    local = answers(local_lake)
    assert any(a.get("route") for a in local) and local[-1]["incidents"]  # answers with content
    for writer in WRITERS:
        with on_s3(s3_server):
            assert answers(s3_lakes["lakes"][writer]) == local, writer


def test_both_writers_give_every_table_the_same_rows_and_schema(lakes):
    names = [name for name, _ in lake_tables(str(lakes["delta-rs"]))]
    assert names == [name for name, _ in lake_tables(str(lakes["native"]))]
    assert len(names) == 18, names  # every table of the audit
    differ = set()
    for name in names:
        (rs_schema, rs_parts), (native_schema, native_parts) = (table_schema(join(lakes[w], name)) for w in WRITERS)
        assert native_parts == rs_parts, name
        # NOT NULL too, except inside a nullable struct, which delta-spark cannot enforce (delta-io/delta#860)
        assert native_schema == delta_spark_schema(rs_schema), name
        if native_schema != rs_schema:
            differ.add(name)
        # row for row (lake_diff's row hashes; its Arrow schemas carry the nullability just checked)
        rs_rows, native_rows = (lake_diff._row_hashes(lakes[w], name)[1] for w in WRITERS)
        assert rs_rows.equals(native_rows), f"{name}: {len(rs_rows)} rows through delta-rs, {len(native_rows)} native"
    assert differ == {"events"}  # data_version: null for most events, its fields NOT NULL when there
    assert lake_diff.compare_summaries(lakes["delta-rs"], lakes["native"]) == []
    # the day is not trivially empty: the audit found what the faults did
    assert lake_diff._row_hashes(lakes["native"], "findings")[1].size > 5


def _rows(df) -> Counter:
    return Counter(json.dumps(row.asDict(recursive=True), sort_keys=True, default=str) for row in df.collect())


@pytest.mark.parametrize("reader", WRITERS)
def test_each_engine_reads_the_other_writers_tables(spark, lakes, reader):
    from schemas.events import EVENTS_TABLE_SCHEMA
    from schemas.findings import FINDINGS_SCHEMA
    from schemas.routes import ROUTE_SNAPSHOTS_SCHEMA, TOPIC_ROUTE_HISTORY_SCHEMA

    writer = "native" if reader == "delta-rs" else "delta-rs"
    for name, schema in (
        ("events", EVENTS_TABLE_SCHEMA),
        ("topic_route_history", TOPIC_ROUTE_HISTORY_SCHEMA),
        ("route_snapshots", ROUTE_SNAPSHOTS_SCHEMA),
        ("findings", FINDINGS_SCHEMA),
    ):
        with writing_through(spark, writer):
            own = _rows(read_table(spark, join(lakes[writer], name), schema, where={"date": DAY}))
        with writing_through(spark, reader):
            other = _rows(read_table(spark, join(lakes[writer], name), schema, where={"date": DAY}))
        assert own == other and sum(own.values()) > 0, name


@pytest.mark.parametrize("reader", WRITERS)
def test_each_engine_reads_the_other_writers_older_versions(spark, lakes, reader):
    from jobs.lake.delta.arrow import load_table
    from schemas.audit_runs import AUDIT_RUNS_SCHEMA

    writer = "native" if reader == "delta-rs" else "delta-rs"
    path = join(lakes[writer], "audit_runs")
    committed = {c["version"]: c["timestamp"] for c in load_table(path).history()}
    versions = sorted(committed)
    with writing_through(spark, reader):
        statuses = [
            [r["status"] for r in read_table(spark, path, AUDIT_RUNS_SCHEMA, version=v).collect()] for v in versions
        ]
        # by commit time as well: the last version committed at or before the first status
        running_ms = committed[versions[-2]]
        at_time = read_table(
            spark, path, AUDIT_RUNS_SCHEMA, timestamp=dt.datetime.fromtimestamp(running_ms / 1000, dt.UTC)
        ).collect()
    # a run records the day running before its first write and ok after its last (native tables
    # start with an empty CREATE TABLE commit)
    assert [s for s in statuses if s] == [["running"], ["ok"]]
    assert [r["status"] for r in at_time] == ["running"]


def test_no_credential_reaches_a_log_the_report_or_audit_runs(s3_server, s3_lakes):
    from jobs.lake.delta.arrow import read_table_arrow
    from jobs.storage import files

    with on_s3(s3_server):
        lake = s3_lakes["lakes"]["delta-rs"]
        texts = {
            relative: files.read_text(f"{lake}/{folder}/{relative}")
            for folder in ("_logs", "reports")
            for relative, _ in files.list_files(f"{lake}/{folder}")
        }
        texts["audit_runs"] = json.dumps(read_table_arrow(f"{lake}/audit_runs").to_pylist(), default=str)
    assert f"{DAY}.log" in texts and f"{DAY}/summary.json" in texts  # the run's log is in the lake
    texts["stderr"] = "".join(r.stderr + r.stdout for r in s3_lakes["concurrent"])
    for name, text in texts.items():
        for secret in (s3_server.secret_key, s3_server.access_key):
            assert secret not in text, name
