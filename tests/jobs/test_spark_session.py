"""The SparkSession the jobs build: the settings the lake depends on hold."""

from __future__ import annotations

import sys

import pytest

from jobs.spark import build_session, is_native_delta_available


@pytest.mark.spark
def test_session_has_lake_settings(spark):
    conf = spark.conf
    assert conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.sql.parquet.outputTimestampType") == "TIMESTAMP_MICROS"
    assert conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert spark.sparkContext.getConf().get("spark.ui.enabled") == "false"
    assert spark.sparkContext.pythonExec == sys.executable


@pytest.mark.spark
def test_native_delta_is_detected_absent_here(spark):
    # This machine cannot fetch delta-spark's jars, so jobs.delta's writer is the one used.
    assert is_native_delta_available(spark) is False


def test_extra_conf_cannot_change_what_the_lake_depends_on():
    with pytest.raises(ValueError, match="spark.sql.session.timeZone must stay 'UTC'"):
        build_session(extra_conf={"spark.sql.session.timeZone": "Europe/Paris"})
