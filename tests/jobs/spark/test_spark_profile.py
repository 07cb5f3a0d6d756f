"""The small-day settings (jobs.spark.profile) and the Spark work counter (jobs.spark.work)."""

from __future__ import annotations

import pytest

from jobs.spark.profile import SMALL_DAY_CONF, broadcast, day_profile, is_small_day, small_day_conf
from jobs.spark.work import spark_work

pytestmark = pytest.mark.spark

MIB = 1 << 20


def test_a_day_is_small_below_the_threshold_and_never_with_zero():
    assert is_small_day(MIB - 1, MIB) and not is_small_day(MIB, MIB)
    assert not is_small_day(0, 0)  # 0 turns the small-day settings off


def test_the_profile_sets_its_confs_inside_and_restores_the_sessions_after(spark):
    conf = spark.conf
    before = {key: conf.get(key, None) for key in small_day_conf(spark)}
    conf.set("spark.sql.adaptive.enabled", "true")
    conf.unset(SMALL_DAY_CONF)
    try:
        with pytest.raises(RuntimeError), day_profile(spark, input_bytes=10, small_day_bytes=MIB) as small:
            assert small
            assert conf.get("spark.sql.adaptive.enabled") == "false"
            assert conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"
            assert conf.get(SMALL_DAY_CONF) == "true"
            raise RuntimeError("a stage failed")  # the settings come back all the same
        assert conf.get("spark.sql.adaptive.enabled") == "true"
        assert conf.get(SMALL_DAY_CONF, None) is None
        with day_profile(spark, input_bytes=MIB, small_day_bytes=MIB) as small:  # a large day: untouched
            assert not small and conf.get("spark.sql.adaptive.enabled") == "true"
    finally:
        for key, value in before.items():
            conf.set(key, value) if value is not None else conf.unset(key)


def test_broadcast_hints_only_outside_small_days(spark):
    small_df, big_df = spark.range(3), spark.range(100)

    def hinted() -> bool:
        plan = big_df.join(broadcast(small_df), "id")._jdf.queryExecution().analyzed().toString()
        return "broadcast" in plan.lower()

    saved = spark.conf.get(SMALL_DAY_CONF, None)
    try:
        spark.conf.set(SMALL_DAY_CONF, "true")
        assert not hinted()
        spark.conf.unset(SMALL_DAY_CONF)
        assert hinted()
    finally:
        spark.conf.set(SMALL_DAY_CONF, saved) if saved is not None else spark.conf.unset(SMALL_DAY_CONF)


def test_spark_work_counts_the_jobs_started_since_a_reading(spark):
    before = spark_work(spark)
    spark.range(10).count()
    spark.range(10).repartition(2).collect()
    work = spark_work(spark, before) - before
    assert work.jobs == 2 and work.stages >= 3 and work.tasks >= 3
    assert set(work.as_counts()) == {"spark_jobs", "spark_stages", "spark_tasks"}
