"""The report's rows from the day's small tables, read in the driver without Spark.

A day of ``findings``, ``liveness_windows`` or ``ns_divergences`` is a few thousand rows at most
(:func:`jobs.lake.days.read_day_arrow`), so the report reads them as Arrow and orders and caps them
here: no Spark job per table. The events and the routes, which are event-sized, stay in Spark
(:mod:`jobs.report.data`).

Example:
    >>> liveness_rows(read_small(lake, "liveness_windows", day, LIVENESS_COLUMNS))
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence

import pandas as pd

from jobs import lake as lake_tables
from jobs.lake.days import read_day_arrow
from jobs.report.render import SEVERITY_ORDER

LIVENESS_ROWS_PER_SERVER = 60
DIVERGENCE_ROWS = 300
FINDING_ROWS = 2000

LIVENESS_COLUMNS = ["ns", "broker_addr", "broker_name", "start_ts", "end_ts", "end_reason"]
DIVERGENCE_COLUMNS = ["kind", "subject", "start_ts", "end_ts", "duration_ms", "ns_views"]
FINDING_COLUMNS = ["severity", "category", "kind", "subject", "ns", "start_ts", "end_ts", "detail", "incident_id"]
# what ns_divergences holds that DIVERGENCE_COLUMNS are made of
_EPISODE_COLUMNS = ["kind", "topic", "broker_addr", "broker_name", "start_ts", "end_ts", "duration_ms", "ns_views"]


def read_small(lake: str, name: str, day: dt.date, columns: Sequence[str]) -> pd.DataFrame:
    """``columns`` of the day's rows of the small table ``name``; timestamps as naive UTC, as
    Spark's ``toPandas`` gives them. No rows when the table does not exist."""
    frame: pd.DataFrame = read_day_arrow(lake, name, day, columns).to_pandas()
    for column in frame.columns:
        if isinstance(frame[column].dtype, pd.DatetimeTZDtype):
            frame[column] = frame[column].dt.tz_convert("UTC").dt.tz_localize(None)
    return frame


def liveness_rows(windows: pd.DataFrame, per_server: int = LIVENESS_ROWS_PER_SERVER) -> pd.DataFrame:
    """The windows of the ``per_server`` addresses per server with most closed windows (then most
    windows, then address)."""
    if windows.empty:
        return pd.DataFrame(columns=LIVENESS_COLUMNS)
    closed = windows["end_reason"].notna() & (windows["end_reason"] != "open")
    per_addr = (
        windows.assign(closed=closed.astype(int))
        .groupby(["ns", "broker_addr"], as_index=False, dropna=False)
        .agg(closed=("closed", "sum"), windows=("closed", "size"))
        .sort_values(["ns", "closed", "windows", "broker_addr"], ascending=[True, False, False, True])
    )
    kept = per_addr.groupby("ns", dropna=False).head(per_server)[["ns", "broker_addr"]]
    return windows.merge(kept, on=["ns", "broker_addr"])[LIVENESS_COLUMNS].reset_index(drop=True)


def divergence_rows(episodes: pd.DataFrame, limit: int = DIVERGENCE_ROWS) -> pd.DataFrame:
    """The ``limit`` longest episodes, with the subject docs/interfaces.md names per kind and the
    servers' views as JSON text."""
    if episodes.empty:
        return pd.DataFrame(columns=DIVERGENCE_COLUMNS)
    shown = episodes.sort_values("duration_ms", ascending=False, na_position="last", kind="stable").head(limit)
    subject = shown["topic"].combine_first(shown["broker_addr"]).combine_first(shown["broker_name"])
    mismatch = shown["kind"] == "queue_data_mismatch"
    joined = [
        " @ ".join(v for v in (topic, broker) if isinstance(v, str))
        for topic, broker in zip(shown["topic"], shown["broker_name"], strict=True)
    ]
    views = pd.Series([_map_json(v) for v in shown["ns_views"]], index=shown.index, dtype=object)
    return shown.assign(subject=subject.where(~mismatch, pd.Series(joined, index=shown.index)), ns_views=views)[
        DIVERGENCE_COLUMNS
    ].reset_index(drop=True)


def finding_rows(findings: pd.DataFrame, limit: int = FINDING_ROWS) -> pd.DataFrame:
    """The first ``limit`` findings by severity (critical first), then category, kind and subject."""
    if findings.empty:
        return pd.DataFrame(columns=FINDING_COLUMNS)
    # anything but critical and warning ranks as info
    rank = findings["severity"].map(SEVERITY_ORDER).fillna(SEVERITY_ORDER["info"])
    ordered = findings.assign(_rank=rank).sort_values(
        ["_rank", "category", "kind", "subject"], na_position="first", kind="stable"
    )
    return ordered.head(limit)[FINDING_COLUMNS].reset_index(drop=True)


def read_report_rows(lake: str, day: dt.date, findings: pd.DataFrame | None = None) -> dict[str, pd.DataFrame]:
    """The report's ``liveness``, ``divergences`` and ``findings`` rows of ``day``; ``findings``:
    the day's, when the caller has read them (``read_small`` of ``FINDING_COLUMNS``)."""
    if findings is None:
        findings = read_small(lake, lake_tables.FINDINGS, day, FINDING_COLUMNS)
    return {
        "liveness": liveness_rows(read_small(lake, lake_tables.LIVENESS_WINDOWS, day, LIVENESS_COLUMNS)),
        "divergences": divergence_rows(read_small(lake, lake_tables.NS_DIVERGENCES, day, _EPISODE_COLUMNS)),
        "findings": finding_rows(findings),
    }


def _map_json(views: list[tuple[str, str | None]] | None) -> str | None:
    """A ``map<string,string>`` as Arrow hands it to pandas (a list of key-value pairs) as the JSON
    object text Spark's ``to_json`` writes."""
    if views is None:
        return None
    return json.dumps(dict(views), ensure_ascii=False, separators=(",", ":"))
