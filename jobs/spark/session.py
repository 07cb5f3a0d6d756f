"""Builds the SparkSession every job and test uses.

One place decides how Spark is configured for the lake: UTC everywhere, microsecond Parquet
timestamps (what Delta's ``timestamp`` type is), Arrow on (the Delta writes without
delta-spark's JVM jars, ``jobs.lake.delta``, hand Arrow batches to their tasks), UI off, a quiet log,
and which of the two Delta writers the lake's tables go through (:func:`lake_writer`).

Example:
    >>> spark = build_session(master="local[2]", shuffle_partitions=4)
    >>> spark.conf.get("spark.sql.session.timeZone")
    'UTC'
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, nullcontext
from typing import Any, cast

from pyspark.sql import SparkSession

from common.errors import UserError
from jobs.spark.s3a import add_s3a, use_s3a
from jobs.storage.settings import StorageSettings

log = logging.getLogger("nsaudit.spark")

# delta-spark's jars as set-up fetches them (jars/delta-spark/pom.xml, jars/fetch.sh): handed to
# the JVM as spark.jars, so a session starts without resolving anything (no Ivy, no network).
DELTA_JARS_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "jars", "delta-spark", "lib"
)
# The writer the lake's tables go through in this session, "native" or "delta-rs" (docs/audit.md,
# "Lake writes"); a runtime conf, so jobs.lake reads it from the session it is handed.
LAKE_WRITER_CONF = "spark.nsaudit.lake.writer"
LAKE_WRITERS = ("auto", "native", "delta-rs")
# What delta-spark needs for its SQL and DeltaTable commands (OPTIMIZE, VACUUM, RESTORE), beside
# its jars (static confs, so they are set when the JVM starts), and one rule relaxed: delta-spark
# refuses to create a table whose schema has NOT NULL inside an array or map (events' `topics`)
# unless told to keep such constraints unenforced, so the two writers' tables keep one schema.
# The cost: a null there fails a delta-rs write (its tasks check every declared NOT NULL) but
# passes delta-spark's, which checks top-level columns and struct fields only (docs/audit.md).
DELTA_SNAPSHOT_PARTITIONS_CONF = "spark.databricks.delta.snapshotPartitions"
_DELTA_SQL_CONF = {
    "spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension",
    "spark.sql.catalog.spark_catalog": "org.apache.spark.sql.delta.catalog.DeltaCatalog",
    "spark.databricks.delta.constraints.allowUnenforcedNotNull.enabled": "true",
}

# Spark confs the lake relies on, so extra_conf may not change them: lake times are UTC instants,
# stored as Parquet microseconds (Delta's `timestamp`; Spark's default would be INT96), and
# pandas conversions go through Arrow.
_REQUIRED_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
}

# PySpark reads this once per process, at the first DataFrame call (pyspark.errors.utils).
DATAFRAME_DEBUGGING_CONF = "spark.python.sql.dataFrameDebugging.enabled"


# Standalone masters bound to the loopback interface: their workers run on this host.
_LOOPBACK_MASTER_PREFIXES = ("spark://127.0.0.1:", "spark://localhost:", "spark://[::1]:")


def _is_single_host_master(master: str | None) -> bool:
    """Whether every executor of ``master`` runs on this host (so this interpreter exists there)."""
    if master is None:
        return False
    return (
        master == "local"
        or master.startswith(("local[", "local-cluster["))
        or master.startswith(_LOOPBACK_MASTER_PREFIXES)
    )


# The jobs are batch work on every core, with no latency to keep: the throughput collector spends
# less CPU than G1 (Java's default), whose concurrent work and write barriers compete with the
# tasks for the cores (bench/ measures the difference).
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
    log_file: str | None = None,
    console_log: bool = True,
    lake_writer: str = "auto",
    object_store: StorageSettings | None = None,
) -> SparkSession:
    """Create (or return the running) SparkSession configured for the lake.

    Under ``spark-submit`` the master, the Python executables and the driver's JVM options and log
    configuration given to spark-submit win: those arguments only apply when this call starts the
    JVM. For a single-host master (``local[…]``, ``local-cluster[…]``, a standalone master on
    the loopback interface) the Python workers run this interpreter unless ``PYSPARK_PYTHON`` is
    set; for any other master, ``PYSPARK_PYTHON`` (or ``spark.pyspark.python``) must name a Python
    present on every host with pyspark and pyarrow (and ``deltalake`` on the driver's host, which
    runs the Delta commits).

    Args:
        master: Spark master URL (``local[2]``, ``spark://host:7077``); ``None``: Spark's default.
        app_name: application name shown by the cluster manager.
        shuffle_partitions: ``spark.sql.shuffle.partitions``.
        driver_memory: ``spark.driver.memory`` such as ``"4g"``.
        extra_conf: more Spark confs; they may not change the time zone, timestamp type or Arrow
            settings the lake depends on.
        java_options: JVM options of the driver and the executors, unless ``extra_conf`` sets
            ``spark.driver.extraJavaOptions`` / ``spark.executor.extraJavaOptions``; ``""`` sets
            neither (default: :data:`DEFAULT_JAVA_OPTIONS`).
        log_file: where the driver JVM's log (Spark's log4j, WARN and above) goes, through a
            log4j2 configuration written beside it; ``None``: Spark's default (the console).
        console_log: with ``log_file``, whether that log also goes to stderr; without, what the
            JVM prints outside log4j goes to ``log_file`` too.
        lake_writer: ``[lake] writer``: ``"native"`` (delta-spark; its jars from
            :data:`DELTA_JARS_DIR`, or ``--packages`` under spark-submit), ``"delta-rs"`` (Spark
            tasks write Parquet, ``deltalake`` commits), or ``"auto"``: native where the jars are,
            else delta-rs. :func:`lake_writer` says which one the session got.
        object_store: the settings of an ``s3a://`` lake or events folder: hadoop-aws's jars
            (``jars/hadoop-aws``) join the classpath and the settings Hadoop's S3A
            configuration (:mod:`jobs.spark.s3a`); None for local paths only.

    Raises:
        ValueError: ``extra_conf`` tries to change a conf the lake depends on, or an unknown
            ``lake_writer``.
        UserError: ``lake_writer="native"`` and delta-spark's classes are not on the classpath, or
            ``object_store`` without hadoop-aws's jars.
    """
    extra = _checked_arguments(lake_writer, extra_conf)
    submitted = _launched_by_spark_submit()
    if not submitted:
        _point_python_workers(master)
    conf = session_conf(shuffle_partitions, driver_memory, java_options, extra)
    _add_jars(conf, master, submitted, lake_writer, object_store)
    # under spark-submit the master and the log configuration given to spark-submit win
    spark = _get_or_create(conf, app_name, None if submitted else master, None if submitted else log_file, console_log)
    return _settle(spark, lake_writer, object_store)


def _checked_arguments(lake_writer: str, extra_conf: Mapping[str, str] | None) -> dict[str, str]:
    """``extra_conf`` as a dict, once it and ``lake_writer`` are known to be usable (see :func:`build_session`)."""
    if lake_writer not in LAKE_WRITERS:
        raise ValueError(f"lake writer must be one of {', '.join(LAKE_WRITERS)}, not {lake_writer!r}")
    extra = dict(extra_conf or {})
    _check_extra_conf(extra)
    return extra


def _add_jars(
    conf: dict[str, str], master: str | None, submitted: bool, lake_writer: str, object_store: StorageSettings | None
) -> None:
    """delta-spark's jars (unless delta-rs is asked for) and, for an object store, hadoop-aws's
    and its settings; under spark-submit, whose ``--packages``/``--jars`` bring the jars, the settings only."""
    if lake_writer != "delta-rs" and not submitted:
        _add_delta_jars(conf, delta_jars())
    if object_store is not None:
        if submitted:  # spark-submit's --packages/--jars bring hadoop-aws; the settings are ours
            conf.update({f"spark.hadoop.{k}": v for k, v in object_store.hadoop_conf().items()})
        else:
            add_s3a(conf, object_store, _is_single_host_master(master), required=True)


def _get_or_create(
    conf: dict[str, str], app_name: str, master: str | None, log_file: str | None, console_log: bool
) -> SparkSession:
    """The session of ``conf``; ``master`` and the driver's ``log_file`` when not None."""
    if log_file is not None:
        _add_driver_log(conf, log_file, console_log)
    # (pyspark's hint asks for a dict of any option type; a dict of str is one)
    builder = SparkSession.builder.appName(app_name).config(map=cast("dict[str, Any]", conf))
    if master is not None:
        builder = builder.master(master)
    with _stderr_to(log_file) if log_file is not None and not console_log else nullcontext():
        return builder.getOrCreate()


def _settle(spark: SparkSession, lake_writer: str, object_store: StorageSettings | None) -> SparkSession:
    """``spark`` with the log level, the confs the lake depends on, its lake writer and the object
    store's settings."""
    spark.sparkContext.setLogLevel("WARN")  # the root level; the log4j2 file's appenders filter further
    # getOrCreate may hand back a session started elsewhere (a notebook, spark-submit); the confs
    # the lake depends on are runtime SQL confs, so make sure they hold for this one too.
    for key, value in _REQUIRED_CONF.items():
        spark.conf.set(key, value)
    spark.conf.set(LAKE_WRITER_CONF, _resolve_lake_writer(spark, lake_writer))
    if object_store is not None:
        use_s3a(spark, object_store)
    return spark


def delta_jars(folder: str = DELTA_JARS_DIR) -> list[str]:
    """delta-spark's jars fetched by set-up (``bash jars/fetch.sh delta-spark``); [] when absent."""
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".jar"))


def _add_delta_jars(conf: dict[str, str], jars: list[str]) -> None:
    """Put ``jars`` on the driver's and executors' classpath with delta-spark's SQL extension."""
    if not jars:
        return
    given = [j for j in conf.get("spark.jars", "").split(",") if j]
    conf["spark.jars"] = ",".join(given + [j for j in jars if j not in given])
    for key, value in _DELTA_SQL_CONF.items():
        conf.setdefault(key, value)
    # delta-spark rebuilds a table's state from its log in a Spark job of 50 partitions by default,
    # on every read and commit. The lake's logs are small (a commit or two per table and day, a
    # checkpoint every ten), so the shuffle's partition count is plenty and saves most of that job.
    conf.setdefault(DELTA_SNAPSHOT_PARTITIONS_CONF, conf.get("spark.sql.shuffle.partitions", "50"))


def _resolve_lake_writer(spark: SparkSession, wanted: str) -> str:
    """``wanted`` made concrete for this session: ``auto`` is native when delta-spark's classes load."""
    if wanted == "delta-rs":
        return "delta-rs"
    if is_native_delta_available(spark):
        return "native"
    if wanted == "native":
        raise UserError(
            f'[lake] writer = "native" needs delta-spark\'s jars, and {DELTA_JARS_DIR} has none; '
            'run bash jars/fetch.sh delta-spark, or set writer = "delta-rs"'
        )
    return "delta-rs"


def lake_writer(spark: SparkSession) -> str:
    """``"native"`` when this session's lake writes and reads go through delta-spark, else ``"delta-rs"``.

    :func:`build_session` decides it (its ``lake_writer``); a session started elsewhere (a
    notebook's) uses delta-spark when its classes are loaded. Tests switch a running session
    between the two by setting :data:`LAKE_WRITER_CONF`.
    """
    chosen = spark.conf.get(LAKE_WRITER_CONF, None)
    if chosen in ("native", "delta-rs"):
        return chosen
    return "native" if is_native_delta_available(spark) else "delta-rs"


def _check_extra_conf(extra: Mapping[str, str]) -> None:
    for key, value in extra.items():
        if key in _REQUIRED_CONF and str(value).lower() != _REQUIRED_CONF[key].lower():
            raise ValueError(f"spark conf {key} must stay {_REQUIRED_CONF[key]!r}, got {value!r}")


def _point_python_workers(master: str | None) -> None:
    """Set ``PYSPARK_PYTHON``/``PYSPARK_DRIVER_PYTHON`` for a session this process starts."""
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
            log.warning(
                "PYSPARK_PYTHON is not set: executors of %s will run 'python3' from their "
                "PATH, which needs pyspark and pyarrow",
                master or "the default master",
            )
    if not os.environ.get("PYSPARK_DRIVER_PYTHON"):
        os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable


# The driver JVM's log4j2 configuration when the log goes to a file: everything at WARN and above
# to the file, and to the console only when asked (the console appender is then at WARN too).
_LOG4J2 = """\
status = error
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log_file}
appender.file.append = true
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = %d{{yyyy-MM-dd HH:mm:ss,SSS}} %p %c{{1}}: %m%n%ex
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{{yy/MM/dd HH:mm:ss}} %p %c{{1}}: %m%n%ex
appender.console.filter.threshold.type = ThresholdFilter
appender.console.filter.threshold.level = {console_level}
rootLogger.level = warn
rootLogger.appenderRef.file.ref = file
rootLogger.appenderRef.console.ref = console
"""


@contextmanager
def _stderr_to(path: str) -> Iterator[None]:
    """Point file descriptor 2 at ``path`` while the driver JVM starts, so that the JVM (and the
    Python workers it starts) write what they print outside log4j, such as the JVM's own
    ``WARNING: Using incubator modules`` line, to the log instead of the user's terminal."""
    sys.stderr.flush()
    saved = os.dup(2)
    target = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.dup2(target, 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
        os.close(target)


def _add_driver_log(conf: dict[str, str], log_file: str, console: bool) -> None:
    """Point the driver JVM at a log4j2 configuration logging to ``log_file`` (not the executors:
    their hosts may not have the file)."""
    driver_options = conf.get("spark.driver.extraJavaOptions", "")
    conf["spark.driver.extraJavaOptions"] = f"{driver_options} {log4j_option(log_file, console)}".strip()


def log4j_option(log_file: str, console: bool) -> str:
    """Write ``<log_file>.log4j2.properties`` and return the JVM option that makes the driver use it."""
    log_file = os.path.abspath(log_file)
    os.makedirs(os.path.dirname(log_file), exist_ok=True)
    properties = log_file + ".log4j2.properties"
    with open(properties, "w", encoding="utf-8") as fh:
        # backslashes are escapes in a properties file
        fh.write(_LOG4J2.format(log_file=log_file.replace("\\", "/"), console_level="warn" if console else "off"))
    return f"-Dlog4j2.configurationFile=file:{properties}"


def session_conf(
    shuffle_partitions: int, driver_memory: str | None, java_options: str, extra_conf: Mapping[str, str]
) -> dict[str, str]:
    """The confs :func:`build_session` gives the builder (its arguments of the same names)."""
    conf = {
        **_REQUIRED_CONF,
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(shuffle_partitions),
        # PySpark 4 records the Python call site of every DataFrame and Column call for its error
        # messages: more py4j round trips and a stack walk per call. The jobs build plans of
        # thousands of calls, so it is off; extra_conf may turn it back on for debugging.
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

    True for a session started with delta-spark's jars in ``spark.jars`` (:func:`build_session`
    does that when set-up fetched them) or ``--packages io.delta:delta-spark_2.13:4.0.1``; then
    ``format("delta")`` works natively. Looked up through the context class
    loader, which is the one that sees ``--packages`` jars.
    """
    try:
        jvm = spark.sparkContext._jvm
        assert jvm is not None  # a running session's context has its gateway
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        jvm.java.lang.Class.forName("org.apache.spark.sql.delta.sources.DeltaDataSource", False, loader)
    except Exception:  # noqa: BLE001 - py4j wraps ClassNotFoundException; any failure means "not usable"
        return False
    return True
