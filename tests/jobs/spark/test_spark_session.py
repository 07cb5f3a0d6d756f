"""The SparkSession the jobs build: the settings the lake depends on hold."""

from __future__ import annotations

import datetime as dt
import sys

import pytest
from pyspark.sql import functions as F
from pyspark.sql import types as T

from common.config import ConfigError, LakeConfig, load_config
from common.errors import UserError
from jobs.spark import session as session_module
from jobs.spark.frames import CachedFrames, checkpoint_frame, local_frame, release_frame
from jobs.spark.session import (
    DATAFRAME_DEBUGGING_CONF,
    DEFAULT_JAVA_OPTIONS,
    build_session,
    delta_jars,
    is_native_delta_available,
    lake_writer,
    session_conf,
)


@pytest.mark.spark
def test_session_has_lake_settings(spark):
    conf = spark.conf
    assert conf.get("spark.sql.session.timeZone") == "UTC"
    assert conf.get("spark.sql.parquet.outputTimestampType") == "TIMESTAMP_MICROS"
    assert conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert spark.sparkContext.getConf().get("spark.ui.enabled") == "false"
    assert spark.sparkContext.pythonExec == sys.executable


@pytest.mark.spark
def test_the_session_has_delta_sparks_jars_from_set_up_and_the_configured_writer(spark):
    jars = delta_jars()
    assert [j.rsplit("/", 1)[1] for j in jars] == ["delta-spark_2.13-4.0.1.jar", "delta-storage-4.0.1.jar"], (
        "run bash jars/fetch.sh delta-spark"
    )
    assert spark.sparkContext.getConf().get("spark.jars").split(",") == jars  # no resolve at start
    assert is_native_delta_available(spark)
    assert lake_writer(spark) == "delta-rs"  # tests/conftest.py: the suite writes through delta-rs


def test_a_native_writer_without_the_jars_is_one_clear_error(monkeypatch):
    monkeypatch.setattr(session_module, "is_native_delta_available", lambda spark: False)
    with pytest.raises(UserError, match=r'writer = "native" needs delta-spark\'s jars.*jars/fetch.sh delta-spark'):
        session_module._resolve_lake_writer(None, "native")
    assert session_module._resolve_lake_writer(None, "auto") == "delta-rs"  # auto falls back
    with pytest.raises(ValueError, match="lake writer must be one of auto, native, delta-rs"):
        build_session(lake_writer="spark")


def test_the_lake_writer_setting_is_checked():
    assert load_config().lake == LakeConfig()  # conf/nsaudit.toml holds the defaults
    with pytest.raises(ConfigError, match="lake.writer must be auto, native or delta-rs"):
        LakeConfig(writer="spark")
    with pytest.raises(ConfigError, match="lake.keep_days must be >= 0"):
        LakeConfig(keep_days=-1)


def test_extra_conf_cannot_change_what_the_lake_depends_on():
    with pytest.raises(ValueError, match="spark.sql.session.timeZone must stay 'UTC'"):
        build_session(extra_conf={"spark.sql.session.timeZone": "Europe/Paris"})


@pytest.mark.spark
def test_the_session_jvm_runs_the_parallel_collector(spark):
    # build_session's default JVM options reached the JVM it started (the test session's)
    jvm = spark.sparkContext._jvm
    names = {bean.getName() for bean in jvm.java.lang.management.ManagementFactory.getGarbageCollectorMXBeans()}
    assert names == {"PS Scavenge", "PS MarkSweep"}, names


def test_java_options_go_to_driver_and_executors_unless_set_otherwise():
    both = ("spark.driver.extraJavaOptions", "spark.executor.extraJavaOptions")
    conf = session_conf(4, "2g", "-XX:+UseSerialGC", {})
    assert [conf[k] for k in both] == ["-XX:+UseSerialGC"] * 2
    assert conf["spark.driver.memory"] == "2g"
    assert not set(both) & set(session_conf(4, None, "", {}))  # "": the JVM's own defaults
    mine = session_conf(4, None, DEFAULT_JAVA_OPTIONS, {"spark.executor.extraJavaOptions": "-Xss4m"})
    assert [mine[k] for k in both] == [DEFAULT_JAVA_OPTIONS, "-Xss4m"]


@pytest.mark.spark
def test_dataframe_calls_do_not_record_their_python_call_site(spark):
    """PySpark's call-site recording costs py4j round trips on every DataFrame and Column call; the
    session turns it off (with it on, the expression below takes 32 round trips, without it 12)."""
    from pyspark.errors.utils import is_debugging_enabled

    assert spark.conf.get(DATAFRAME_DEBUGGING_CONF) == "false"
    assert is_debugging_enabled() is False
    client = spark.sparkContext._gateway._gateway_client
    commands = []
    send = client.send_command

    def counting(command, *args, **kwargs):
        commands.append(command)
        return send(command, *args, **kwargs)

    client.send_command = counting  # the instance attribute shadows the method until deleted
    try:
        F.col("x") + F.lit(1)
    finally:
        del client.send_command
    # py4j releases Java objects that earlier tests' Python objects held when the collector frees
    # them ("m d" commands): not round trips of this expression
    calls = [c for c in commands if not c.startswith("m\nd\n")]
    assert 0 < len(calls) < 20, calls
    assert session_conf(2, None, "", {DATAFRAME_DEBUGGING_CONF: "true"})[DATAFRAME_DEBUGGING_CONF] == "true"


def test_the_configured_java_options_are_the_default():
    assert load_config(None).spark.java_options == DEFAULT_JAVA_OPTIONS  # conf/nsaudit.toml


_LOCAL_SCHEMA = T.StructType(
    [
        T.StructField("ns", T.StringType(), False),
        T.StructField("day", T.DateType(), True),
        T.StructField("n", T.LongType(), True),
    ]
)


@pytest.mark.spark
def test_local_frame_takes_tuples_or_dicts_and_stays_in_the_jvm(spark):
    day = dt.date(2026, 11, 21)
    from_tuples = local_frame(spark, [("ns-a", day, 3), ("ns-b", None, None)], _LOCAL_SCHEMA)
    from_dicts = local_frame(spark, [{"ns": "ns-a", "day": day, "n": 3}, {"ns": "ns-b"}], _LOCAL_SCHEMA)

    for df in (from_tuples, from_dicts):
        assert df.schema == _LOCAL_SCHEMA
        assert [tuple(r) for r in df.orderBy("ns").collect()] == [("ns-a", day, 3), ("ns-b", None, None)]
        query = df._jdf.queryExecution()
        assert "PythonRDD" not in query.toRdd().toDebugString()  # no Python worker converts its rows
        assert "LocalTableScan" in query.executedPlan().toString()


@pytest.mark.spark
def test_a_query_over_an_empty_local_frame_is_folded_away(spark):
    empty = local_frame(spark, [], _LOCAL_SCHEMA)
    query = (
        empty.where(F.col("n") > 1)
        .groupBy("ns")
        .agg(F.count("n").alias("c"))
        .join(spark.range(5).withColumnRenamed("id", "c"), "c")
    )

    assert query.collect() == []
    plan = query._jdf.queryExecution().optimizedPlan().toString()
    assert "LocalRelation <empty>" in plan and "Aggregate" not in plan and "Join" not in plan


def _stored_rdd_ids(spark) -> set[int]:
    return {info.id() for info in spark.sparkContext._jsc.sc().getRDDStorageInfo()}


@pytest.mark.spark
def test_release_frees_a_checkpoint_and_a_cache_and_nothing_else(spark):
    kept_df = checkpoint_frame(spark.range(50))
    checkpointed_df = checkpoint_frame(spark.range(100).withColumn("twice", F.col("id") * 2))
    # computed now, and planned as a scan of its rows, with nothing of the plan behind it
    assert checkpointed_df._jdf.queryExecution().logical().getClass().getSimpleName() == "LogicalRDD"
    assert checkpointed_df.where("twice = 42").count() == 1
    persisted_df = spark.range(30).persist()
    assert persisted_df.count() == 30
    kept_rdd = kept_df._jdf.queryExecution().logical().rdd().id()
    checkpoint_rdd = checkpointed_df._jdf.queryExecution().logical().rdd().id()
    assert {kept_rdd, checkpoint_rdd} <= _stored_rdd_ids(spark)  # each holds blocks until released

    CachedFrames(cached=(checkpointed_df, persisted_df)).release()

    assert checkpoint_rdd not in _stored_rdd_ids(spark)
    assert not persisted_df.is_cached
    assert persisted_df.count() == 30  # a released cache recomputes
    assert kept_rdd in _stored_rdd_ids(spark) and kept_df.count() == 50  # another checkpoint is untouched
    release_frame(kept_df)
    assert kept_rdd not in _stored_rdd_ids(spark)


@pytest.mark.spark
def test_release_leaves_a_frame_built_from_rows_readable(spark):
    df = spark.createDataFrame([(1, "a"), (2, "b")], "n int, s string")
    release_frame(df)
    assert sorted(r["n"] for r in df.collect()) == [1, 2]
