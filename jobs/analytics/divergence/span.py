"""The instants a day's comparison covers, and history rows clipped to them."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T

from common.timeutil import DAY_MS, day_start_ms


@dataclass(frozen=True)
class Span:
    """The instants a day's comparison covers, epoch ms: ``[start_ms, day_end_ms)``.

    ``start_ms`` reaches ``grace + 1`` ms into the day before, to see how long a disagreement
    that is ongoing at 00:00 has already lasted.
    """

    day: dt.date
    start_ms: int
    day_start_ms: int
    day_end_ms: int

    @classmethod
    def of(cls, day: dt.date, grace_ms: int) -> Span:
        """The span of ``day`` for a grace of ``grace_ms``."""
        start = day_start_ms(day)
        return cls(day, start - grace_ms - 1, start, start + DAY_MS)


def with_interval_ms(df: DataFrame, from_col: str, to_col: str, span: Span) -> DataFrame:
    """Add ``from_ms`` / ``to_ms`` clipped to the span; drop rows that end up empty.

    A null end means valid at the end of the row's ``date``: the next midnight.
    """
    row_day_end = (F.unix_date("date").cast(T.LongType()) + 1) * DAY_MS
    return (
        df.withColumn("from_ms", F.greatest(F.unix_millis(from_col), F.lit(span.start_ms)))
        .withColumn("to_ms", F.least(F.coalesce(F.unix_millis(to_col), row_day_end), F.lit(span.day_end_ms)))
        .where(F.col("from_ms") < F.col("to_ms"))
    )
