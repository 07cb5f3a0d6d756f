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
    """A local[2] SparkSession shared by every Spark test (UI off, UTC, few shuffle partitions)."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from jobs.spark import build_session

    # 2g: the default 1g heap is tight for a whole session of plans and caches
    session = build_session(master="local[2]", app_name="nsaudit-tests", shuffle_partitions=4, driver_memory="2g")
    yield session
    session.stop()
