"""Builds the SparkSession every job and test uses.

One place decides how Spark is configured for the lake: UTC everywhere, microsecond Parquet
timestamps (what Delta's ``timestamp`` type is), Arrow on (the Delta writes without
delta-spark's JVM jars, ``jobs.lake.delta``, hand Arrow batches to their tasks), UI off, a quiet log.

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

from pyspark.sql import SparkSession

log = logging.getLogger("nsaudit.spark")

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
    return (master == "local" or master.startswith(("local[", "local-cluster["))
            or master.startswith(_LOOPBACK_MASTER_PREFIXES))


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

    Raises:
        ValueError: ``extra_conf`` tries to change a conf the lake depends on.
    """
    extra = dict(extra_conf or {})
    _check_extra_conf(extra)
    submitted = _launched_by_spark_submit()
    if not submitted:
        _point_python_workers(master)

    conf = session_conf(shuffle_partitions, driver_memory, java_options, extra)
    logged = log_file is not None and not submitted  # under spark-submit the user's log config wins
    if logged:
        _add_driver_log(conf, log_file, console_log)
    builder = SparkSession.builder.appName(app_name).config(map=conf)
    if master is not None and not submitted:
        builder = builder.master(master)
    with _stderr_to(log_file) if logged and not console_log else nullcontext():
        spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")  # the root level; the log4j2 file's appenders filter further
    # getOrCreate may hand back a session started elsewhere (a notebook, spark-submit); the confs
    # the lake depends on are runtime SQL confs, so make sure they hold for this one too.
    for key, value in _REQUIRED_CONF.items():
        spark.conf.set(key, value)
    return spark


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
            log.warning("PYSPARK_PYTHON is not set: executors of %s will run 'python3' from their "
                        "PATH, which needs pyspark and pyarrow", master or "the default master")
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


def session_conf(shuffle_partitions: int, driver_memory: str | None, java_options: str,
                 extra_conf: Mapping[str, str]) -> dict[str, str]:
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


