"""Internals of the lake's Delta I/O; jobs call :mod:`jobs.lake.tables`, not these modules.

- :mod:`jobs.lake.delta.write`: Spark tasks write Parquet (:mod:`jobs.lake.delta.files` writes a
  task's files); :mod:`jobs.lake.delta.commit`: the driver commits them once through ``deltalake``.
- :mod:`jobs.lake.delta.schema`: declared-schema enforcement.
- :mod:`jobs.lake.delta.arrow`: JVM-free reads, and why they must not use a Python filesystem.
- :mod:`jobs.lake.delta.health`: whether a table can be read, and what to say when it cannot.
- :mod:`jobs.lake.delta.native`: delta-spark's own writer.
- :mod:`jobs.lake.delta.where`: the conditions of reads and writes.

Only :mod:`jobs.lake`'s modules import these (tests/test_architecture.py checks it).
"""

from __future__ import annotations

from pyspark import cloudpickle

from jobs.lake.delta import files, write
from jobs.spark import pyworker
from jobs.storage import stores


def ship_by_value() -> None:
    """Have cloudpickle ship the task side of the writes (``files``, ``write``, and the
    ``stores`` they reach a bucket with) by value (idempotent), so executors on other hosts run
    them without this project installed; they need only pyspark and pyarrow."""
    cloudpickle.register_pickle_by_value(write)
    cloudpickle.register_pickle_by_value(files)
    cloudpickle.register_pickle_by_value(pyworker)
    cloudpickle.register_pickle_by_value(stores)
