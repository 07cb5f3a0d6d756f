"""Switch the shared test session between the lake's two Delta writers (``[lake] writer``).

The session of ``tests/conftest.py`` has delta-spark's jars on its classpath and writes through
delta-rs unless a test asks for the native writer with :func:`writing_through`.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

from jobs.spark.session import LAKE_WRITER_CONF, is_native_delta_available


@contextmanager
def writing_through(spark, writer: str) -> Iterator[None]:
    """Lake writes and reads of ``spark`` go through ``writer`` (``native`` or ``delta-rs``) inside."""
    if writer == "native":
        assert is_native_delta_available(spark), (
            "delta-spark's jars are not on the test session's classpath: run bash jars/fetch.sh delta-spark"
        )
    previous = spark.conf.get(LAKE_WRITER_CONF)
    spark.conf.set(LAKE_WRITER_CONF, writer)
    try:
        yield
    finally:
        spark.conf.set(LAKE_WRITER_CONF, previous)
