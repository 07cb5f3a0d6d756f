"""Builds the SparkSession every job and test uses.

One place decides how Spark is configured for the lake: UTC everywhere, microsecond Parquet
timestamps (what Delta's ``timestamp`` type is), Arrow on (the Delta writes without
delta-spark's JVM jars, ``jobs.lake.delta``, hand Arrow batches to their tasks), UI off, a quiet log.
:func:`local_frame` makes the small frames of driver-side rows the jobs need, without Python
workers.

Example:
    >>> spark = build_session(master="local[2]", shuffle_partitions=4)
    >>> spark.conf.get("spark.sql.session.timeZone")
    'UTC'
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import types as T
from pyspark.sql.pandas.types import to_arrow_schema

log = logging.getLogger("nsaudit.spark")

# Spark confs the lake relies on, so extra_conf may not change them: lake times are UTC instants,
# stored as Parquet microseconds (Delta's `timestamp`; Spark's default would be INT96), and
# pandas conversions go through Arrow.
_REQUIRED_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}



def checkpoint_frame(df: DataFrame) -> DataFrame:
    """``df`` computed now and cut from its plan: a stage's small intermediate that several later
    queries read.

    The rows stay in the executors' block managers (``localCheckpoint(eager=True)``) and the
    returned frame's plan is a scan of them. A persisted frame would keep the plan behind it:
    every later query that reads it is planned against the cache with that plan inside, and its
    tasks ship it (a plan of tens of scans of the events, and task binaries of MiBs). Free the
    rows with :func:`release_frame` after the last read. On a cluster an executor lost before
    then takes its blocks with it and the reading query fails rather than recomputing them.
    """
    return df.localCheckpoint(eager=True)


def spread(df: DataFrame, *keys: str) -> DataFrame:
    """``df`` hash-partitioned by ``keys`` into ``spark.sql.shuffle.partitions`` partitions: for a
    few rows that later become many (exploded into instants) where they are, so the many are made
    by as many tasks as a shuffle would use. The number is explicit, so adaptive execution does
    not merge the small shuffle into one partition."""
    return df.repartition(int(df.sparkSession.conf.get("spark.sql.shuffle.partitions")), *keys)


def release_frame(df: DataFrame) -> None:
    """Free what ``df`` holds in executor memory: its cache (``persist``), or the blocks of a
    ``localCheckpoint``, which ``unpersist`` leaves to Spark's context cleaner (that is, to some
    later garbage collection of the driver's JVM). Reading ``df`` afterwards recomputes a
    persisted frame but fails for a checkpointed one: release only after the last read."""
    df.unpersist()
    plan = df._jdf.queryExecution().logical()
    if plan.getClass().getSimpleName() == "LogicalRDD":  # a checkpoint: the rows live in its RDD's blocks
        # what RDD.unpersist does, without its warning that a local checkpoint cannot be
        # recomputed once freed (known here: the stage has read it for the last time)
        df.sparkSession.sparkContext._jsc.sc().unpersistRDD(plan.rdd().id(), False)


@dataclass(frozen=True)
class CachedFrames:
    """Base of a stage's output frames whose shared intermediates the stage persisted or
    checkpointed.

    ``cached`` is keyword-only, so a subclass lists its own frames first and positionally.
    """

    cached: tuple[DataFrame, ...] = field(default=(), kw_only=True)

    def release(self) -> None:
        """Free the shared intermediates (:func:`release_frame`)."""
        for df in self.cached:
            release_frame(df)


# PySpark reads this once per process, at the first DataFrame call (pyspark.errors.utils).
DATAFRAME_DEBUGGING_CONF = "spark.python.sql.dataFrameDebugging.enabled"


# Standalone masters bound to the loopback interface: their workers run on this host.
_LOOPBACK_MASTER_PREFIXES = ("spark://127.0.0.1:", "spark://localhost:", "spark://[::1]:")


def _is_single_host_master(master: str | None) -> bool:
    """Whether every executor of ``master`` runs on this host (so this interpreter exists there)."""
    if master is None:
        return False
    return (master == "local" or master.startswith(("local[", "local-cluster["))
            or master.startswith(_LOOPBACK_MASTER_PREFIXES))


# The jobs are batch work on every core, with no latency to keep: the throughput collector spends
# less CPU than G1 (Java's default), whose concurrent work and write barriers compete with the
# tasks for the cores. On the reference day the six stages after ingest took 14 % less wall time
# and 12 % less CPU with it (medians of alternating runs; bench/README.md, session 8).
DEFAULT_JAVA_OPTIONS = "-XX:+UseParallelGC"


def _launched_by_spark_submit() -> bool:
    # spark-submit starts the JVM first and hands its gateway to this interpreter through these
    # variables (pyspark.java_gateway.launch_gateway); the master given to spark-submit is then
    # already in the JVM's conf and must win over our default.
    return "PYSPARK_GATEWAY_PORT" in os.environ


def build_session(
    master: str | None = "local[*]",
    app_name: str = "nsaudit",
    shuffle_partitions: int = 8,
    driver_memory: str | None = None,
    extra_conf: Mapping[str, str] | None = None,
    java_options: str = DEFAULT_JAVA_OPTIONS,
) -> SparkSession:
    """Create (or return the running) SparkSession configured for the lake.

    Under ``spark-submit`` the master, and the Python executables, given to spark-submit win:
    ``master`` is only applied when this process starts its own JVM. For a master whose
    executors all run on this host (``local[…]``, ``local-cluster[…]``, ``spark://127.0.0.1:…``
    or ``spark://localhost:…``) the Python workers are pointed at this interpreter (unless
    ``PYSPARK_PYTHON`` is already set), so they see the same packages, this project included.
    For any other cluster master nothing is pinned by path:
    ``PYSPARK_PYTHON`` (or spark-submit's ``spark.pyspark.python``) must name a Python that exists
    on every host, with pyspark and pyarrow; Spark also runs the Delta writer's commit with it on
    the driver's host, where it needs ``deltalake`` too.

    Args:
        master: Spark master URL (``local[2]``, ``spark://host:7077``); ``None`` leaves Spark's
            own default.
        app_name: application name shown by the cluster manager.
        shuffle_partitions: ``spark.sql.shuffle.partitions``.
        driver_memory: ``spark.driver.memory`` such as ``"4g"``; only effective when this call
            starts the JVM.
        extra_conf: more Spark confs; they may not override the time zone, timestamp type or
            Arrow settings the lake depends on.
        java_options: JVM options of the driver (only when this call starts the JVM: under
            spark-submit give ``--driver-java-options``) and of the executors, unless
            ``extra_conf`` sets ``spark.driver.extraJavaOptions`` or
            ``spark.executor.extraJavaOptions`` itself; ``""`` sets neither. The default picks the
            parallel garbage collector (see :data:`DEFAULT_JAVA_OPTIONS`).

    Returns:
        The session.

    Raises:
        ValueError: ``extra_conf`` tries to change a conf the lake depends on.
    """
    extra = dict(extra_conf or {})
    for key, value in extra.items():
        if key in _REQUIRED_CONF and str(value).lower() != _REQUIRED_CONF[key].lower():
            raise ValueError(f"spark conf {key} must stay {_REQUIRED_CONF[key]!r}, got {value!r}")

    submitted = _launched_by_spark_submit()
    if not submitted:
        # SparkContext reads PYSPARK_PYTHON when it starts and runs every Python worker with it:
        # the executors' on the driver's host.
        # Only a single-host master (local, or a standalone master on the loopback interface)
        # may be pinned to this interpreter's absolute path; a remote host has no such file.
        # PYSPARK_DRIVER_PYTHON is for pyspark shells started from here.
        if not os.environ.get("PYSPARK_PYTHON"):
            if _is_single_host_master(master):
                os.environ["PYSPARK_PYTHON"] = sys.executable
            else:
                # Spark's default is "python3" from each host's PATH, which rarely has pyarrow.
                log.warning("PYSPARK_PYTHON is not set: executors of %s will run 'python3' from their "
                            "PATH, which needs pyspark and pyarrow", master or "the default master")
        if not os.environ.get("PYSPARK_DRIVER_PYTHON"):
            os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable

    builder = SparkSession.builder.appName(app_name)
    if master is not None and not submitted:
        builder = builder.master(master)
    for key, value in session_conf(shuffle_partitions, driver_memory, java_options, extra).items():
        builder = builder.config(key, value)

    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    # getOrCreate may hand back a session started elsewhere (a notebook, spark-submit); the confs
    # the lake depends on are runtime SQL confs, so make sure they hold for this one too.
    for key, value in _REQUIRED_CONF.items():
        spark.conf.set(key, value)

    return spark


def session_conf(shuffle_partitions: int, driver_memory: str | None, java_options: str,
                 extra_conf: Mapping[str, str]) -> dict[str, str]:
    """The confs :func:`build_session` gives the builder (its arguments of the same names)."""
    conf = {
        **_REQUIRED_CONF,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        # PySpark 4 records the Python call site of every DataFrame and Column call for its error
        # messages: about eight more py4j round trips and a stack walk per call. The jobs build
        # plans of thousands of calls (one distribution day: 15,400 round trips with it, 7,000
        # without), so it is off; extra_conf may turn it back on for debugging.
        DATAFRAME_DEBUGGING_CONF: "false",
    }
    if driver_memory is not None:
        conf["spark.driver.memory"] = driver_memory
    if java_options:
        conf["spark.driver.extraJavaOptions"] = conf["spark.executor.extraJavaOptions"] = java_options
    conf.update(extra_conf)
    return conf


def is_native_delta_available(spark: SparkSession) -> bool:
    """Whether delta-spark's classes are on this session's JVM classpath.

    True for a cluster started with ``--packages io.delta:delta-spark_2.13:4.0.0`` (or the jars in
    ``spark.jars``); then ``format("delta")`` works natively. Looked up through the context class
    loader, which is the one that sees ``--packages`` jars.
    """
    try:
        jvm = spark.sparkContext._jvm
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName("org.apache.spark.sql.delta.sources.DeltaDataSource", False, loader)
    except Exception:  # py4j wraps ClassNotFoundException; any failure means "not usable"
        return False
    return True


def local_frame(spark: SparkSession, rows: Sequence[Sequence | Mapping], schema: T.StructType) -> DataFrame:
    """A small DataFrame of driver-side ``rows`` (tuples in ``schema``'s order, or dicts), kept in
    the JVM.

    It is handed over as an Arrow table and planned as a local relation. ``createDataFrame`` of
    Python rows would run a Python function to convert them, in Python workers, each time the
    frame is computed; and the optimizer folds a query over an *empty* local relation away,
    where one over an empty Python-made frame is still planned, compiled and run.

    Example:
        >>> local_frame(spark, [("ns-a", 3)], T.StructType([T.StructField("ns", T.StringType()),
        ...                                                 T.StructField("n", T.LongType())])).first()
        Row(ns='ns-a', n=3)
    """
    arrow_schema = to_arrow_schema(schema)
    if rows and not isinstance(rows[0], Mapping):
        table = pa.Table.from_arrays(
            [pa.array(list(column), type=f.type) for column, f in zip(zip(*rows), arrow_schema)], schema=arrow_schema
        )
    else:
        table = pa.Table.from_pylist(list(rows), schema=arrow_schema)
    return spark.createDataFrame(table, schema)
