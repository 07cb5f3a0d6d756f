"""Shared fixtures: one SparkSession for the whole test session, created only when a test asks."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile("ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci")

# ---------------------------------------------------------------------------- two workers (pytest-xdist)
#
# pyproject's addopts run the suite on two pytest-xdist workers (``-n 2 --dist loadgroup``), each
# with its own SparkSession. A module's tests stay on one worker (module fixtures such as the
# equality lake are built once), and the modules that share one of the session's simulated and
# audited days (``tests.jobs.audited``, ``tests.jobs.fault_free``) stay together so it is built
# once. The slowest groups are handed out first, so neither worker is left alone with a long one
# at the end (figures: ``--durations``). ``-n 0`` runs everything in this process, in file order.

SHARED_DAYS = {"audited_lake": "audited-day", "fault_free_day": "fault-free-day"}  # fixture -> group
SLOWEST_FIRST = (
    "fault-free-day",  # standalone cluster, distribution and divergence end to end
    "audited-day",  # notebook, report in a browser
    "tests/interop/test_collect_faults.py",  # real name servers with faults, collected and audited
    "tests/jobs/lake/test_lake_writers.py",  # the audit of a day through each Delta writer, locally and in a bucket
    "tests/jobs/storage/test_network_cut.py",  # an audit into a bucket cut off mid-stage, and its rerun
    "tests/interop/test_rocketmq.py",  # real RocketMQ name servers, brokers and clients
    "tests/jobs/housekeeping/test_lake_housekeeping.py",
    "tests/jobs/rebuild/test_rebuild_equality.py",
    "tests/jobs/ingest/test_ingest.py",
    "tests/jobs/analytics/security/test_security.py",
)


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    """Mark each test with its xdist group and put the slowest groups first (file order otherwise)."""
    module = {id(item): item.nodeid.split("::")[0] for item in items}
    shared = {
        module[id(item)]: SHARED_DAYS[name]
        for item in items
        for name in getattr(item, "fixturenames", ())
        if name in SHARED_DAYS
    }
    groups = {key: shared.get(path, path) for key, path in module.items()}
    for item in items:
        item.add_marker(pytest.mark.xdist_group(groups[id(item)]))
    rank = {group: i for i, group in enumerate(SLOWEST_FIRST)}
    items.sort(key=lambda item: rank.get(groups[id(item)], len(rank)))  # stable: file order within a rank


@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession shared by every Spark test (UI off, UTC, 2 shuffle partitions)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    # 2g: the default 1g heap is tight for a whole session of plans and caches
    # Test inputs are tiny: the small-day settings of the audit (jobs.spark.profile: no adaptive
    # re-planning, no broadcast jobs, no code generation or constraint propagation, the JIT's first
    # tier only) hold for the whole session. Results do not depend on them; the standalone-cluster
    # test compares an audit with Spark's defaults against one with these, row for row.
    from jobs.spark.profile import SMALL_DAY_CONF, SMALL_DAY_JAVA_OPTIONS
    from jobs.spark.session import LAKE_WRITER_CONF, build_session
    from jobs.storage import settings

    session = build_session(
        master="local[2]",
        app_name="nsaudit-tests",
        shuffle_partitions=2,
        driver_memory="2g",
        java_options=f"-XX:+UseParallelGC {SMALL_DAY_JAVA_OPTIONS}",
        extra_conf={
            "spark.sql.adaptive.enabled": "false",
            "spark.sql.codegen.wholeStage": "false",
            "spark.sql.codegen.factoryMode": "NO_CODEGEN",
            "spark.sql.autoBroadcastJoinThreshold": "-1",
            "spark.sql.constraintPropagation.enabled": "false",
            SMALL_DAY_CONF: "true",
        },
        lake_writer="auto",  # delta-spark's jars on the classpath, when set-up fetched them ...
        # hadoop-aws too, for the tests with a lake in a bucket (tests.jobs.buckets gives the settings)
        object_store=settings.current(),
    )
    # ... but the tables go through delta-rs, as with the default [lake] writer: the tests of the
    # native writer switch to it (tests/jobs/lake_writers.py)
    session.conf.set(LAKE_WRITER_CONF, "delta-rs")
    yield session
    session.stop()


# ---------------------------------------------------------------------------- an S3 server


@pytest.fixture(scope="session")
def s3_server(tmp_path_factory):
    """A real S3 server for this test session (worker): S3Proxy (``jars/s3proxy``) on 127.0.0.1
    over a temporary folder, with the bucket ``nsaudit`` and one random access key. Started on
    first use, stopped at the end; a test that stops it must start it again
    (``tests.jobs.buckets``)."""
    from jobs.storage.s3proxy import S3ProxyServer

    server = S3ProxyServer(tmp_path_factory.mktemp("s3proxy"), buckets=("nsaudit",))
    server.start()
    yield server
    server.stop()
