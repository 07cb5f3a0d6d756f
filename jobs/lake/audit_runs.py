"""``audit_runs``: one row per audited day; a day counts as audited only when its row says ``ok``.

A run writes ``running`` before its first table write and ``ok`` after its last (``failed`` when a
stage fails). A run killed in between leaves ``running``: the day's tables may mix the new run's
early stages with an earlier run's later ones, and the queries and the report say it is unfinished.
"""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from pyspark.sql import SparkSession

from jobs import lake as lake_tables
from jobs.lake.tables import write_rows
from schemas.audit_runs import AUDIT_RUNS_SCHEMA


def record(
    spark: SparkSession,
    lake: str,
    day: dt.date,
    status: str,
    stages: list[dict[str, Any]],
    findings_by_severity: dict[str, int],
) -> None:
    """Replace ``day``'s row of ``audit_runs`` with ``status`` (``running``, ``ok`` or ``failed``)."""
    row = (
        day,
        status,
        dt.datetime.now(dt.UTC),
        float(sum(s.get("seconds", 0.0) for s in stages)),
        json.dumps(stages, sort_keys=True, default=str),
        json.dumps(findings_by_severity, sort_keys=True),
    )
    # one row, written from the driver: no Spark job
    write_rows(
        spark,
        [row],
        lake_tables.table_path(lake, lake_tables.AUDIT_RUNS),
        AUDIT_RUNS_SCHEMA,
        mode="overwrite",
        partition_by=["date"],
        replace_where={"date": day},
    )
