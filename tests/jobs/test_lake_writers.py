"""Both Delta writers give the same lake: the whole audit of a small simulated day through delta-rs
and through delta-spark (native) gives every table the same rows and schema, and each engine reads
the other's tables, older versions included. README "Running on a cluster" and docs/audit.md,
"Lake writes", promise it.
"""

from __future__ import annotations

import datetime as dt
import importlib.util
import json
from collections import Counter
from pathlib import Path

import pytest

from common.config import Config
from common.timeutil import day_start_ms
from jobs import nightly_audit
from jobs.housekeeping.commands import lake_tables
from jobs.lake.delta.schema import delta_spark_schema
from jobs.lake.tables import read_table, table_schema
from tests.jobs.lake_writers import writing_through

# the module fixture audits a day through each writer: allow it more than the suite's 600 s per test on a
# loaded machine (a pytest-timeout signal inside a py4j call would break the shared session).
pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1500)]

DAY = dt.date(2026, 11, 21)
WRITERS = ("delta-rs", "native")
_spec = importlib.util.spec_from_file_location("lake_diff", Path(__file__).resolve().parents[2] / "bench" / "lake_diff.py")
lake_diff = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lake_diff)


@pytest.fixture(scope="module")
def lakes(spark, tmp_path_factory) -> dict[str, Path]:
    """The same simulated half hour (three servers, four brokers, every fault) audited through each writer."""
    from nameserver.sim.run import FAULTS, SimOptions, simulate

    root = tmp_path_factory.mktemp("writers")
    simulate(SimOptions(events_dir=root / "events", ns=3, brokers=4, slaves=1, topics=6, start_ms=day_start_ms(DAY),
                        hours=0.5, seed=5, faults=FAULTS, fault_rate=12.0, quiet=True))
    for writer in WRITERS:
        with writing_through(spark, writer):
            nightly_audit.run(spark, Config(), str(root / "events"), str(root / writer), DAY, lambda line: None)
    return {writer: root / writer for writer in WRITERS}


def test_both_writers_give_every_table_the_same_rows_and_schema(lakes):
    names = [name for name, _ in lake_tables(str(lakes["delta-rs"]))]
    assert names == [name for name, _ in lake_tables(str(lakes["native"]))]
    assert len(names) == 18, names  # every table of the audit
    differ = set()
    for name in names:
        (rs_schema, rs_parts), (native_schema, native_parts) = (table_schema(lakes[w] / name) for w in WRITERS)
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
    from schemas.routes import ROUTE_SNAPSHOTS_SCHEMA, TOPIC_ROUTE_HISTORY_SCHEMA
    from schemas.events import EVENTS_TABLE_SCHEMA
    from schemas.findings import FINDINGS_SCHEMA

    writer = "native" if reader == "delta-rs" else "delta-rs"
    for name, schema in (("events", EVENTS_TABLE_SCHEMA), ("topic_route_history", TOPIC_ROUTE_HISTORY_SCHEMA),
                         ("route_snapshots", ROUTE_SNAPSHOTS_SCHEMA), ("findings", FINDINGS_SCHEMA)):
        with writing_through(spark, writer):
            own = _rows(read_table(spark, lakes[writer] / name, schema, where={"date": DAY}))
        with writing_through(spark, reader):
            other = _rows(read_table(spark, lakes[writer] / name, schema, where={"date": DAY}))
        assert own == other and sum(own.values()) > 0, name


@pytest.mark.parametrize("reader", WRITERS)
def test_each_engine_reads_the_other_writers_older_versions(spark, lakes, reader):
    from jobs.lake.delta.arrow import load_table
    from schemas.audit_runs import AUDIT_RUNS_SCHEMA

    writer = "native" if reader == "delta-rs" else "delta-rs"
    path = lakes[writer] / "audit_runs"
    committed = {c["version"]: c["timestamp"] for c in load_table(str(path)).history()}
    versions = sorted(committed)
    with writing_through(spark, reader):
        statuses = [[r["status"] for r in read_table(spark, path, AUDIT_RUNS_SCHEMA, version=v).collect()]
                    for v in versions]
        # by commit time as well: the last version committed at or before the first status
        running_ms = committed[versions[-2]]
        at_time = read_table(spark, path, AUDIT_RUNS_SCHEMA,
                             timestamp=dt.datetime.fromtimestamp(running_ms / 1000, dt.timezone.utc)).collect()
    # a run records the day running before its first write and ok after its last (native tables
    # start with an empty CREATE TABLE commit)
    assert [s for s in statuses if s] == [["running"], ["ok"]]
    assert [r["status"] for r in at_time] == ["running"]
