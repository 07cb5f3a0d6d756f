"""Building and writing ``findings`` rows (``schemas.findings``), shared by every audit stage.

A stage turns its own rows into findings with column expressions (:func:`finding_columns`). In
the nightly audit it hands them to the day's :class:`DayFindings`, and the incidents stage writes
every stage's findings once, with their incidents; a stage run on its own replaces its
``(date, category)`` partition (:func:`write_findings`). See docs/audit.md, "Lake writes".
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Mapping

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from jobs import lake
from jobs.lake.days import read_day_arrow, replace_day
from jobs.spark.frames import Releasable, checkpoint_frame, local_frame, release_frame
from schemas.findings import CATEGORIES, FINDINGS_PARTITION_BY, FINDINGS_SCHEMA, SEVERITIES

DetailSpec = Column | Mapping[str, Column]


def finding_columns(
    date: dt.date | None = None,
    category: str | None = None,
    kind: str | Column | None = None,
    severity: str | Column | None = None,
    subject: str | Column | None = None,
    ns: str | Column | None = None,
    start_ts: Column | None = None,
    end_ts: Column | None = None,
    detail: DetailSpec | None = None,
) -> list[Column]:
    """The finding columns, in ``FINDINGS_SCHEMA`` order, from column expressions (all but
    ``finding_id`` and ``incident_id``, which :func:`write_findings` adds).

    Args:
        date: the audited day; None leaves ``date`` out (``write_findings`` adds it).
        category: one of ``CATEGORIES``; None leaves ``category`` out (``write_findings`` adds it).
        kind: the finding kind, a string or a string column.
        severity: one of ``SEVERITIES``, a string or a column; a column holding any other value
            fails the job when evaluated.
        subject: what the finding is about (a string column, or a constant string).
        ns: the name server concerned; None for a null ``ns``.
        start_ts: a timestamp column, or None for null.
        end_ts: a timestamp column, or None for null.
        detail: a struct or map column, or a mapping of key -> column; written as JSON text with
            null values kept (``{"file": null}``), so every row of a kind has the same keys.

    Returns:
        Columns to pass to ``select``.

    Raises:
        ValueError: an unknown category or severity string, or no kind, severity or subject.

    Example:
        >>> gaps_df.select(*finding_columns(day, "telemetry", "seq_gap", "warning", F.col("ns"),
        ...                                 F.col("ns"), detail={"missing": F.col("missing")}))
    """
    _check_finding(category, kind, severity, subject)
    columns = []
    if date is not None:
        columns.append(F.lit(date).cast(T.DateType()).alias("date"))
    if category is not None:
        columns.append(F.lit(category).alias("category"))
    columns += [
        _as_column(kind).alias("kind"),
        _severity_column(_as_column(severity)).alias("severity"),
        _as_column(subject).cast(T.StringType()).alias("subject"),
        _as_column(ns).cast(T.StringType()).alias("ns"),
        # no cast of a given time: an epoch-ms long cast to timestamp would read as seconds
        (start_ts if start_ts is not None else F.lit(None).cast(T.TimestampType())).alias("start_ts"),
        (end_ts if end_ts is not None else F.lit(None).cast(T.TimestampType())).alias("end_ts"),
        detail_json(detail if detail is not None else {}).alias("detail"),
    ]
    return columns


def _check_finding(
    category: str | None, kind: str | Column | None, severity: str | Column | None, subject: str | Column | None
) -> None:
    if kind is None or severity is None or subject is None:
        raise ValueError("a finding needs a kind, a severity and a subject")
    if category is not None and category not in CATEGORIES:
        raise ValueError(f"category must be one of {CATEGORIES}, not {category!r}")
    if isinstance(severity, str) and severity not in SEVERITIES:
        raise ValueError(f"severity must be one of {SEVERITIES}, not {severity!r}")


def _severity_column(severity_col: Column) -> Column:
    # A bad severity from an expression is a bug in the stage: fail loudly rather than write it.
    return F.when(severity_col.isin(*SEVERITIES), severity_col).otherwise(
        F.raise_error(F.concat(F.lit("bad finding severity: "), F.coalesce(severity_col, F.lit("null"))))
    )


def detail_json(detail: DetailSpec) -> Column:
    """A finding's ``detail``: JSON object text of a struct/map column or of key -> column.

    Null values are written (``"key":null``); timestamps as ISO-8601 UTC with milliseconds.
    """
    if isinstance(detail, Mapping):
        detail = F.struct(*[_as_column(value).alias(key) for key, value in detail.items()]) if detail else F.struct()
    return F.to_json(detail, {"ignoreNullFields": "false"})


FINDING_ID_FIELDS = ("date", "category", "kind", "subject", "ns", "start_ts", "end_ts", "detail")


def finding_id() -> Column:
    """A finding's id: 16 hex digits of the SHA-256 of its content (``FINDING_ID_FIELDS``), so a
    rerun that finds the same thing gives it the same id."""
    text = F.to_json(F.struct(*[F.col(c) for c in FINDING_ID_FIELDS]), {"ignoreNullFields": "false"})
    return F.substring(F.sha2(text, 256), 1, 16)


def with_finding_keys(findings_df: DataFrame, date: dt.date, category: str | None = None) -> DataFrame:
    """Add ``date`` (and ``category`` when given) to finding rows that lack them, and their
    ``finding_id`` and a null ``incident_id`` (set by the incidents stage) when they lack those.

    Raises:
        ValueError: an unknown category.
    """
    if category is not None and category not in CATEGORIES:
        raise ValueError(f"category must be one of {CATEGORIES}, not {category!r}")
    out_df = findings_df
    if "date" not in out_df.columns:
        out_df = out_df.withColumn("date", F.lit(date).cast(T.DateType()))
    if category is not None and "category" not in out_df.columns:
        out_df = out_df.withColumn("category", F.lit(category))
    if "finding_id" not in out_df.columns and "category" in out_df.columns:
        out_df = out_df.withColumn("finding_id", finding_id())
    if "incident_id" not in out_df.columns:
        out_df = out_df.withColumn("incident_id", F.lit(None).cast(T.StringType()))
    return out_df


def write_findings(findings_df: DataFrame, lake_dir: str | os.PathLike[str], date: dt.date, category: str) -> int:
    """Replace the ``(date, category)`` partition of ``findings`` with these rows.

    Rows may lack ``date`` and ``category`` (they are added); rows that carry another date or
    category fail the write and nothing is committed. An empty DataFrame clears the partition.

    ``date`` and ``category`` may be given to :func:`finding_columns` or left to this function,
    which adds whichever is missing.

    Example:
        >>> findings_df = gaps_df.select(
        ...     *finding_columns(
        ...         kind="seq_gap", severity="warning", subject=F.col("ns"), ns=F.col("ns"),
        ...         start_ts=F.col("after_ts"), end_ts=F.col("next_ts"),
        ...         detail={"after_seq": F.col("after_seq"), "next_seq": F.col("next_seq")},
        ...     )
        ... )
        >>> write_findings(findings_df, lake_dir, day, "telemetry")

    Returns:
        The table version written.

    Raises:
        ValueError: an unknown category.
        SchemaMismatchError: the rows do not have the findings columns and types.
    """
    rows_df = with_finding_keys(findings_df, date, category)
    return replace_day(
        rows_df.select(*FINDINGS_SCHEMA.names),
        lake_dir,
        lake.FINDINGS,
        date,
        FINDINGS_SCHEMA,
        partition_by=FINDINGS_PARTITION_BY,
        where={"category": category},
        few_rows=True,  # a day's findings of one category: hundreds to thousands of rows
    )


def _as_column(value: str | Column | None) -> Column:
    if isinstance(value, Column):
        return value
    return F.lit(value).cast(T.StringType()) if value is None else F.lit(value)


class DayFindings:
    """The findings of one audited day, gathered from the stages and written once.

    Each stage adds its findings, with the checkpointed intermediates they read
    (:class:`jobs.spark.frames.Releasable`); they are computed then and checkpointed (a few rows
    each), so the incidents stage links them to their incidents over a plan of a few scans, not
    of every stage's plan at once, and writes them all in one commit (:meth:`frame`); then
    :meth:`release` frees what the stages kept and the checkpoints.

    A stage run on its own (tests, notebooks) gets none and writes its category at once
    (:meth:`write_category`).

    Example:
        >>> findings = DayFindings(day)
        >>> run_liveness(spark, lake_dir, day, config, findings)
        >>> findings.frame(spark).count()
    """

    def __init__(self, day: dt.date) -> None:
        self.day = day
        self._parts: list[tuple[str, DataFrame]] = []
        self._kept: list[Releasable] = []

    def add(self, category: str, findings_df: DataFrame, keep: Releasable | None = None) -> None:
        """Add a stage's findings (rows as :func:`finding_columns` makes them, with or without
        ``date`` and ``category``); ``keep``: what they read, freed by :meth:`release`.

        Raises:
            ValueError: an unknown category.
        """
        rows_df = checkpoint_frame(with_finding_keys(findings_df, self.day, category).select(*FINDINGS_SCHEMA.names))
        self._parts.append((category, rows_df))
        if keep is not None:
            self._kept.append(keep)

    def categories(self) -> tuple[str, ...]:
        """The categories added, in order."""
        return tuple(category for category, _ in self._parts)

    def frame(self, spark: SparkSession) -> DataFrame:
        """Every finding added (``FINDINGS_SCHEMA`` columns); empty when none was."""
        if not self._parts:
            return local_frame(spark, [], FINDINGS_SCHEMA)
        frames = [df for _, df in self._parts]
        union_df = frames[0]
        for more_df in frames[1:]:
            union_df = union_df.unionByName(more_df)
        return union_df

    def write_category(self, lake_dir: str | os.PathLike[str], category: str) -> dict[str, int]:
        """Replace the day's ``category`` partition of ``findings`` with what was added for it
        (a stage run on its own); returns the findings written per kind (read back from the table,
        not counted by Spark)."""
        parts = [df for c, df in self._parts if c == category]
        if not parts:
            raise ValueError(f"no {category} findings were added")
        rows_df = parts[0]
        for more_df in parts[1:]:
            rows_df = rows_df.unionByName(more_df)
        write_findings(rows_df, lake_dir, self.day, category)
        for df in parts:  # written: their checkpoints are read no more
            release_frame(df)
        self._parts = [(c, df) for c, df in self._parts if c != category]
        return findings_by_kind(lake_dir, self.day, category)

    def release(self) -> None:
        """Free the intermediates the added findings read (after their last read)."""
        for kept in self._kept:
            kept.release()
        self._kept.clear()
        for _, rows_df in self._parts:
            release_frame(rows_df)
        self._parts.clear()


def findings_by_kind(lake_dir: str | os.PathLike[str], day: dt.date, category: str | None = None) -> dict[str, int]:
    """The day's findings in the lake per kind (of one category, or all), read without Spark."""
    rows = read_day_arrow(lake_dir, lake.FINDINGS, day, ["category", "kind"])
    counts: dict[str, int] = {}
    for row_category, kind in zip(rows.column("category").to_pylist(), rows.column("kind").to_pylist(), strict=True):
        if category is None or row_category == category:
            counts[kind] = counts.get(kind, 0) + 1
    return dict(sorted(counts.items()))
