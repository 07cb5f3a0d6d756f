"""Plan settings chosen from the size of the day audited: the cost of an audit follows its data.

Spark's defaults are made for large inputs. On a small day (a test's hours, a quiet cluster's
day, a slice of a day) they cost more than they save:

- adaptive execution runs every exchange of a query as a job of its own and re-plans the query
  after each (a day of 1,455 events ran 280 jobs, most of them these);
- a broadcast join collects its small side to the driver in a job of its own, before the query;
- more shuffle partitions than cores make more tasks, each with its fixed cost;
- generated code is compiled (Janino, then the JVM's JIT compilers) for every query, where
  interpreting a few thousand rows is quicker than compiling the code that would run them;
- the optimizer's constraint propagation (filters inferred from every operator's constraints)
  costs more planning time than the rows it prunes early save.

So a day whose event-log segments hold fewer than ``[spark] small_day_bytes`` is audited without
adaptive execution, broadcast joins, code generation or constraint propagation, with as many
shuffle partitions as the application has cores; and when the audit starts its own JVM for such a
day, the JIT compiles with its quick first tier only (:data:`SMALL_DAY_JAVA_OPTIONS`). None of this changes a table's
rows (``bench/lake_diff.py`` compares audits both ways), only how many files a table's day is
written as. Larger days keep the configured settings. See docs/audit.md, "Small days".

Example:
    >>> with day_profile(spark, input_bytes=600_000, small_day_bytes=256 << 20) as small:
    ...     run_stages()
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

log = logging.getLogger(__name__)

# Set while a small day is audited; broadcast() reads it (a runtime conf: the session is the
# one place every stage already has).
SMALL_DAY_CONF = "spark.nsaudit.smallDay"

# The JIT's first tier (C1) only: a small day's audit runs most of Spark's code too few times for
# the optimizing tier's compile time to pay back (it compiled for over two minutes of CPU time
# while auditing a day of 1,455 events).
# That mode sizes the code cache as a client VM does (48 MiB, not 240): Spark's generated and
# compiled code outgrows it within one audit ("CodeCache is full. Compiler has been disabled.", then
# "Out of space in CodeCache for adapters" failing tasks), so the usual size is asked for.
SMALL_DAY_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=240m"


def is_small_day(input_bytes: int, small_day_bytes: int) -> bool:
    """Whether a day of ``input_bytes`` of segments is audited with the small-day settings."""
    return 0 < small_day_bytes and input_bytes < small_day_bytes


def day_java_options(java_options: str, input_bytes: int, small_day_bytes: int) -> str:
    """The JVM options to start an audit's JVM with: ``java_options`` (``[spark] java_options``),
    and for a small day :data:`SMALL_DAY_JAVA_OPTIONS` too."""
    if not is_small_day(input_bytes, small_day_bytes):
        return java_options
    return f"{java_options} {SMALL_DAY_JAVA_OPTIONS}".strip()


def small_day_conf(spark: SparkSession) -> dict[str, str]:
    """The runtime confs a small day is audited with (see the module's docstring)."""
    return {
        "spark.sql.adaptive.enabled": "false",
        "spark.sql.autoBroadcastJoinThreshold": "-1",
        "spark.sql.shuffle.partitions": str(max(1, spark.sparkContext.defaultParallelism)),
        "spark.sql.codegen.wholeStage": "false",
        # every expression interpreted: Spark's own fallback path when generated code fails to
        # compile, with the same results
        "spark.sql.codegen.factoryMode": "NO_CODEGEN",
        # the optimizer infers no filters from the constraints of each operator: planning, not
        # running, is most of a small day's audit, and these inferences only prune rows early
        "spark.sql.constraintPropagation.enabled": "false",
        SMALL_DAY_CONF: "true",
    }


@contextmanager
def day_profile(spark: SparkSession, input_bytes: int, small_day_bytes: int) -> Iterator[bool]:
    """Audit with the small-day settings inside the block when ``input_bytes`` is below
    ``small_day_bytes`` (0: never); the session's own settings come back after it.

    Yields:
        Whether the small-day settings apply.
    """
    if not is_small_day(input_bytes, small_day_bytes):
        yield False
        return
    conf = spark.conf
    settings = small_day_conf(spark)
    saved = {key: conf.get(key, None) for key in settings}
    log.info(
        "a small day (%d bytes of segments, under %d): adaptive execution, broadcast joins and code "
        "generation off, %s shuffle partitions",
        input_bytes,
        small_day_bytes,
        settings["spark.sql.shuffle.partitions"],
    )
    for key, value in settings.items():
        conf.set(key, value)
    try:
        yield True
    finally:
        for key, saved_value in saved.items():
            if saved_value is None:
                conf.unset(key)
            else:
                conf.set(key, saved_value)


def broadcast(df: DataFrame) -> DataFrame:
    """``F.broadcast(df)``: a join's small side, shipped to every task, except on a small day,
    where both sides are small and a broadcast would only add a job (the planner joins them in
    the query's own stages instead)."""
    if df.sparkSession.conf.get(SMALL_DAY_CONF, "false") == "true":
        return df
    return F.broadcast(df)
