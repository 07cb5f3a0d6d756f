"""Shared fixtures: one SparkSession for the whole test session, created only when a test asks."""

from __future__ import annotations

import os
import sys

import pytest
from hypothesis import HealthCheck, settings

settings.register_profile(
    "ci", max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("ci")


@pytest.fixture(scope="session")
def spark():
    """A local[2] SparkSession shared by every Spark test (UI off, UTC, 2 shuffle partitions)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from jobs.spark import build_session

    # 2g: the default 1g heap is tight for a whole session of plans and caches
    # Test inputs are tiny: adaptive re-planning and whole-stage code generation cost more than
    # they save there (about a third of the Spark tests' time). Results do not depend on either;
    # the production settings run in the subprocess audits (standalone-cluster test, demo).
    session = build_session(
        master="local[2]",
        app_name="nsaudit-tests",
        shuffle_partitions=2,
        driver_memory="2g",
        extra_conf={"spark.sql.adaptive.enabled": "false", "spark.sql.codegen.wholeStage": "false"},
    )
    yield session
    session.stop()
