"""Spark on an ``s3a://`` lake: Hadoop's S3A filesystem (hadoop-aws) on the classpath and its
settings in the session.

Spark reads the lake's Parquet files, and delta-spark writes its tables, through Hadoop's
``FileSystem``; ``s3a://`` is hadoop-aws's. Its jars (``jars/hadoop-aws``, the version of the
Hadoop pyspark bundles, fetched by set-up) join the classpath of a session that this process
starts; under ``spark-submit``, ``--packages org.apache.hadoop:hadoop-aws:3.4.1`` does that.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from common.errors import UserError
from jobs.storage.settings import StorageSettings

if TYPE_CHECKING:  # imported by the caller, which started it
    from pyspark.sql import SparkSession

HADOOP_AWS_JARS_DIR = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "jars", "hadoop-aws", "lib"
)


def hadoop_aws_jars(folder: str = HADOOP_AWS_JARS_DIR) -> list[str]:
    """hadoop-aws and the AWS SDK bundle as set-up fetches them (``bash jars/fetch.sh hadoop-aws``);
    [] when absent."""
    if not os.path.isdir(folder):
        return []
    return sorted(os.path.join(folder, name) for name in os.listdir(folder) if name.endswith(".jar"))


def add_s3a(conf: dict[str, str], settings: StorageSettings, single_host: bool, required: bool) -> None:
    """Put hadoop-aws on the classpath of a session about to start, with ``settings`` as
    ``spark.hadoop.fs.s3a.*``.

    On a single-host master (local, a loopback standalone master) the jars join the driver's and
    executors' class path where they lie; elsewhere they are ``spark.jars``, which Spark ships to
    every executor (the SDK bundle is half a gigabyte: copied once per executor, not per task).

    Raises:
        UserError: ``required`` (a path of the command is on an object store) and set-up has not
            fetched the jars.
    """
    jars = hadoop_aws_jars()
    if not jars:
        if required:
            raise UserError(
                f"s3a:// paths need hadoop-aws's jars, and {HADOOP_AWS_JARS_DIR} has none; "
                "run bash jars/fetch.sh hadoop-aws"
            )
        return
    if single_host:
        for key in ("spark.driver.extraClassPath", "spark.executor.extraClassPath"):
            given = [p for p in conf.get(key, "").split(os.pathsep) if p]
            conf[key] = os.pathsep.join(given + [j for j in jars if j not in given])
    else:
        given = [j for j in conf.get("spark.jars", "").split(",") if j]
        conf["spark.jars"] = ",".join(given + [j for j in jars if j not in given])
    for key, value in settings.hadoop_conf().items():
        conf.setdefault(f"spark.hadoop.{key}", value)


def use_s3a(spark: SparkSession, settings: StorageSettings) -> None:
    """Give a running session ``settings``: the SQL reads and writes take Hadoop settings from the
    session's confs, RDD reads from the context's Hadoop configuration; both are set.

    For a session started elsewhere (a notebook's, a test session's) with hadoop-aws on its
    classpath (:func:`add_s3a`); credentials never reach a log from here.
    """
    hadoop = spark.sparkContext._jsc.hadoopConfiguration()
    for key, value in settings.hadoop_conf().items():
        spark.conf.set(key, value)
        hadoop.set(key, value)
