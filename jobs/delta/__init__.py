"""Internals of the lake's Delta I/O; jobs call :mod:`jobs.delta_io`, not these modules.

- :mod:`jobs.delta.source`: the ``nsaudit_delta`` Python data source (tasks write Parquet, one
  Delta commit per write through ``deltalake``); :mod:`jobs.delta.files` writes the task's files.
- :mod:`jobs.delta.schema`: declared-schema enforcement.
- :mod:`jobs.delta.arrow`: JVM-free reads, and why they must not use a Python filesystem.
"""

from __future__ import annotations

from pyspark import cloudpickle
from pyspark.sql import SparkSession

from jobs.delta import files, source


def register_data_source(spark: SparkSession) -> None:
    """Register the ``nsaudit_delta`` data source with a session (idempotent).

    The source and files modules are pickled by value, so executors on other hosts run them
    without this project installed; they need only pyspark and pyarrow.
    """
    if getattr(spark, "_nsaudit_delta_registered", False):
        return
    cloudpickle.register_pickle_by_value(source)
    cloudpickle.register_pickle_by_value(files)
    spark.dataSource.register(source.DeltaWriteSource)
    spark._nsaudit_delta_registered = True  # re-registering would log a warning per write
