"""The report's first section: the day's incidents, worst first, as a timeline and a table.

Pure Python over the small frame :func:`jobs.report.data.collect_report_data` collects (one row
per incident, capped); the plot is matplotlib SVG inlined like the others.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Callable

import matplotlib

matplotlib.use("Agg")  # no display on servers; must precede pyplot
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.figure import Figure

INCIDENT_COLUMNS = [
    "incident_id",
    "severity",
    "root_cause",
    "subject",
    "servers",
    "start_ts",
    "end_ts",
    "duration_ms",
    "findings",
    "topics_unwritable",
    "write_queues_unwritable",
    "topics_unroutable",
    "client_share",
    "seen_live_ts",
]
SEVERITY_COLORS = {"critical": "#c62828", "warning": "#ef6c00", "info": "#1565c0"}


def _utc(series: pd.Series) -> pd.Series:
    stamps = pd.to_datetime(series)
    return stamps.dt.tz_localize("UTC") if stamps.dt.tz is None else stamps.dt.tz_convert("UTC")


def incident_timeline_svg(
    frame: pd.DataFrame, day: dt.date, svg: Callable[[Figure], str], max_rows: int = 40
) -> str | None:
    """The incidents above info on the day's axis, one row each, coloured by severity (``svg``
    turns a matplotlib figure into inline SVG text); None when there is none."""
    shown = frame[frame["severity"] != "info"].head(max_rows)
    if shown.empty:
        return None
    start = pd.Timestamp(day, tz="UTC")
    end = start + pd.Timedelta(days=1)
    starts = _utc(shown["start_ts"]).clip(lower=start, upper=end)  # type: ignore[call-overload]  # pandas-stubs: clip has no Timestamp bounds; pandas takes them
    ends = _utc(shown["end_ts"]).clip(lower=start, upper=end)  # type: ignore[call-overload]  # pandas-stubs: clip has no Timestamp bounds; pandas takes them
    labels = (shown["root_cause"] + " " + shown["subject"].astype(str)).tolist()
    fig, ax = plt.subplots(figsize=(11, max(2.0, 0.25 * len(shown) + 1.2)))
    left = mdates.date2num(starts.dt.tz_convert(None))
    right = mdates.date2num(ends.dt.tz_convert(None))
    width = [max(r - lo, 1 / 1440) for lo, r in zip(left, right, strict=True)]  # at least a minute, to be seen
    ax.barh(range(len(shown)), width, left=left, height=0.7, color=[SEVERITY_COLORS[s] for s in shown["severity"]])
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels(labels, fontsize=7)
    ax.set_xlim(mdates.date2num(start.tz_convert(None)), mdates.date2num(end.tz_convert(None)))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))
    ax.invert_yaxis()
    ax.set_title(f"Incidents above info: {len(shown)}", fontsize=10)
    return svg(fig)


def incidents_html(frame: pd.DataFrame, day: dt.date, svg: Callable[[Figure], str]) -> str:
    """The section: counts by severity, the timeline, and the table (worst and widest first)."""
    if frame.empty:
        return '<h2 id="incidents">Incidents</h2><p>No incidents: no findings this day.</p>'
    counts = {s: int((frame["severity"] == s).sum()) for s in SEVERITY_COLORS}
    parts = [
        '<h2 id="incidents">Incidents</h2>',
        f'<p id="incident-counts">{counts["critical"]} critical, {counts["warning"]} warning and '
        f"{counts['info']} info incidents; each groups the findings of one root cause (the findings "
        "table below names its incident). <i>seen_live_ts</i>: when <code>nsaudit collect</code> first "
        "reported it live, if it did.</p>",
    ]
    timeline = incident_timeline_svg(frame, day, svg)
    if timeline:
        parts.append(f'<figure class="plot" data-plot="incidents" data-subject="">{timeline}</figure>')
    cols = [
        "severity",
        "root_cause",
        "subject",
        "servers",
        "start_ts",
        "end_ts",
        "seen_live_ts",
        "topics_unwritable",
        "write_queues_unwritable",
        "topics_unroutable",
        "client_share",
        "findings",
        "incident_id",
    ]
    head = "".join(f"<th>{c}</th>" for c in cols)
    body = []
    for row in frame[cols].itertuples(index=False):
        cells = []
        for col, value in zip(cols, row, strict=True):
            if col == "servers":
                text = ", ".join(value)
            elif col == "client_share":
                text = f"{value:.0%}"
            elif col == "seen_live_ts" and pd.isna(value):
                text = ""  # no nsaudit collect judged it live
            elif col in ("start_ts", "end_ts", "seen_live_ts"):
                text = _utc(pd.Series([value])).iloc[0].strftime("%H:%M:%S")
            else:
                text = str(value)
            css = f' class="sev-{html.escape(text)}"' if col == "severity" else ""
            cells.append(f"<td{css}>{html.escape(text)}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    parts.append(f'<table id="incidents-table"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>')
    return "\n".join(parts)
