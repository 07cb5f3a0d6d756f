"""Which Delta engine the housekeeping commands use, chosen as the audit's writer is (``[lake] writer``)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from functools import partial

from common.config import Config
from jobs.housekeeping import delta_rs


@dataclass(frozen=True)
class Engine:
    """The three table operations housekeeping needs, bound to one engine.

    Attributes:
        name: ``"native"`` (delta-spark) or ``"delta-rs"``.
        optimize: (table path, days, Z-order columns) -> None.
        vacuum: (table path, retain hours, dry run) -> absolute paths of the files deleted.
        delete_before: (table path, first day kept) -> None.
    """

    name: str
    optimize: Callable[[str, Sequence[dt.date], Sequence[str]], None]
    vacuum: Callable[[str, int, bool], list[str]]
    delete_before: Callable[[str, dt.date], None]


DELTA_RS = Engine("delta-rs", delta_rs.optimize, delta_rs.vacuum, delta_rs.delete_before)


@contextmanager
def open_engine(config: Config, log_file: str, lake: str | None = None) -> Iterator[Engine]:
    """The engine of ``config.lake.writer``: delta-rs without a JVM, or delta-spark in a SparkSession
    started for the command (and stopped after it; Spark's log goes to ``log_file``; with
    hadoop-aws and the object-store settings when ``lake`` is ``s3a://``); ``auto`` is native
    when set-up fetched its jars.

    Raises:
        UserError: ``writer = "native"`` without delta-spark's jars (or an ``s3a://`` lake
            without hadoop-aws's).
    """
    from jobs.spark.session import delta_jars

    writer = config.lake.writer
    if writer == "delta-rs" or (writer == "auto" and not delta_jars()):
        yield DELTA_RS
        return
    from jobs.housekeeping import native
    from jobs.spark.session import build_session, lake_writer
    from jobs.storage import locations, settings

    remote = lake is not None and locations.is_remote(lake)
    spark = build_session(
        master=config.spark.master,
        app_name="nsaudit-lake",
        shuffle_partitions=2,
        driver_memory=config.spark.driver_memory,
        java_options=config.spark.java_options,
        lake_writer=writer,
        log_file=log_file,
        console_log=False,
        object_store=settings.current() if remote else None,
    )
    try:
        if lake_writer(spark) != "native":
            yield DELTA_RS
            return
        yield Engine(
            "native",
            partial(native.optimize, spark),
            partial(native.vacuum, spark),
            partial(native.delete_before, spark),
        )
    finally:
        spark.stop()
