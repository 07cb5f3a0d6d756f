"""The daily report: ``<lake>/reports/<date>/index.html`` (self-contained) and ``summary.json``.

Rendering is pure Python over small, already aggregated pandas frames that the nightly audit
hands over (bounded by ``max_rows`` caps, said in each figure's title when they bite). Plots are
matplotlib SVG inlined into the page, so the report loads nothing by URL.
"""

from __future__ import annotations

import datetime as dt
import html
import io
import json
from dataclasses import dataclass, field
from typing import Any, NamedTuple, cast

import matplotlib

matplotlib.use("Agg")  # no display on servers; must precede pyplot
import matplotlib.dates as mdates
import matplotlib.pyplot as plt
import pandas as pd
from matplotlib.axes import Axes
from matplotlib.figure import Figure as MplFigure

from jobs.report.incidents import INCIDENT_COLUMNS, incidents_html
from jobs.storage import files as storage_files
from jobs.storage import locations

SEVERITY_ORDER = {"critical": 0, "warning": 1, "info": 2}
END_REASON_COLORS = {
    "open": "#2e7d32",
    "unregister": "#1565c0",
    "expire": "#c62828",
    "channel_close": "#ef6c00",
    "ns_stop": "#6a1b9a",
    "ns_restart": "#ad1457",
}
DIVERGENCE_COLORS = {
    "route_missing": "#c62828",
    "broker_missing": "#ef6c00",
    "queue_data_mismatch": "#6a1b9a",
    "broker_addrs_mismatch": "#1565c0",
}


class Figure(NamedTuple):
    """One plot of the page: what it shows (``kind``, and the server or cluster it is about), its
    title and its inline SVG."""

    kind: str
    subject: str
    title: str
    svg: str


@dataclass
class ReportData:
    """Everything the report shows; frames are small (the audit caps them before collecting).

    Attributes:
        day: the audited UTC day.
        headline: counts: servers, brokers, topics, events, findings by severity, and more.
        liveness: columns ns, broker_addr, broker_name, start_ts, end_ts, end_reason.
        divergences: columns kind, subject, start_ts, end_ts, duration_ms, ns_views (text).
        distribution: columns cluster, broker_name, topic, write_queue_nums (end-of-day state).
        findings: columns severity, category, kind, subject, ns, start_ts, end_ts, detail, incident_id.
        notes: caps applied and other remarks shown under the headline.
        incidents: ``jobs.report.incidents.INCIDENT_COLUMNS``, worst and widest first.
    """

    day: dt.date
    headline: dict[str, Any]
    liveness: pd.DataFrame
    divergences: pd.DataFrame
    distribution: pd.DataFrame
    findings: pd.DataFrame
    notes: list[str] = field(default_factory=list)
    incidents: pd.DataFrame = field(default_factory=lambda: pd.DataFrame(columns=INCIDENT_COLUMNS))


def _svg(fig: MplFigure) -> str:
    buf = io.StringIO()
    # text stays text (not glyph outlines): the report's browser finds broker addresses, topics
    # and servers in the plots, and the file is about half the size
    with matplotlib.rc_context({"svg.fonttype": "none"}):
        fig.savefig(buf, format="svg", bbox_inches="tight")
    plt.close(fig)
    text = buf.getvalue()
    return text[text.index("<svg") :]  # drop the XML prolog and doctype: inline SVG


def _day_bounds(day: dt.date) -> tuple[pd.Timestamp, pd.Timestamp]:
    start = pd.Timestamp(day, tz="UTC")
    return start, start + pd.Timedelta(days=1)


def _utc(series: pd.Series) -> pd.Series:
    return pd.to_datetime(series, utc=True)


def _day_axis(ax: Axes, day_start: pd.Timestamp, day_end: pd.Timestamp) -> None:
    """The x axis of a day timeline: the whole UTC day, a tick every three hours."""
    ax.set_xlim(mdates.date2num(day_start.tz_convert(None)), mdates.date2num(day_end.tz_convert(None)))
    ax.xaxis.set_major_locator(mdates.HourLocator(byhour=range(0, 24, 3)))
    ax.xaxis.set_major_formatter(mdates.DateFormatter("%H:%M"))


def liveness_figures(data: ReportData, max_rows: int = 60) -> list[Figure]:
    """One timeline per server: brokers as rows, windows as bars, end reasons as colours."""
    frame = data.liveness
    out: list[Figure] = []
    if frame.empty:
        return out
    day_start, day_end = _day_bounds(data.day)
    for ns in sorted(frame["ns"].unique()):
        rows = frame[frame["ns"] == ns].copy()
        rows["start"] = _utc(rows["start_ts"]).clip(lower=day_start)  # type: ignore[call-overload]  # pandas-stubs: clip has no Timestamp bounds; pandas takes them
        rows["end"] = _utc(rows["end_ts"]).fillna(day_end).clip(upper=day_end)  # type: ignore[call-overload]  # pandas-stubs: clip has no Timestamp bounds; pandas takes them
        # brokers with something to see first: more windows, or ended for a reason other than open
        rank = rows.groupby("broker_addr").agg(
            n=("start", "size"), closed=("end_reason", lambda r: (r != "open").sum())
        )
        rank = rank.sort_values(["closed", "n"], ascending=False)
        shown = list(rank.index[:max_rows])
        title = f"Liveness on {ns}: {len(rank)} broker addresses"
        if len(rank) > len(shown):
            title += f" (the {len(shown)} with most closed windows shown)"
        rows = rows[rows["broker_addr"].isin(shown)]
        order = {addr: i for i, addr in enumerate(sorted(shown))}
        fig, ax = plt.subplots(figsize=(11, max(2.0, 0.22 * len(shown) + 1.2)))
        for reason, part in rows.groupby("end_reason"):
            ys = [order[a] for a in part["broker_addr"]]
            starts = mdates.date2num(part["start"].dt.tz_convert(None))
            ends = mdates.date2num(part["end"].dt.tz_convert(None))
            ax.barh(
                ys, ends - starts, left=starts, height=0.7, color=END_REASON_COLORS.get(reason, "#777"), label=reason
            )
        ax.set_yticks(range(len(order)))
        ax.set_yticklabels(sorted(shown), fontsize=7)
        _day_axis(ax, day_start, day_end)
        ax.set_title(title, fontsize=10)
        ax.legend(title="window end", fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
        ax.invert_yaxis()
        out.append(Figure("liveness", str(ns), title, _svg(fig)))
    return out


def divergence_figure(data: ReportData, max_rows: int = 60) -> Figure | None:
    """Divergence episodes on a timeline, one row per subject, coloured by kind."""
    frame = data.divergences
    if frame.empty:
        return None
    day_start, day_end = _day_bounds(data.day)
    frame = frame.copy()
    frame["start"] = _utc(frame["start_ts"]).clip(lower=day_start)  # type: ignore[call-overload]  # pandas-stubs: clip has no Timestamp bounds; pandas takes them
    frame["end"] = _utc(frame["end_ts"]).fillna(day_end).clip(upper=day_end)  # type: ignore[call-overload]  # pandas-stubs: clip has no Timestamp bounds; pandas takes them
    frame["row"] = frame["kind"] + " " + frame["subject"].astype(str)
    longest = frame.groupby("row")["duration_ms"].sum().sort_values(ascending=False)
    shown = list(longest.index[:max_rows])
    title = f"Divergence episodes between name servers: {len(frame)} episodes"
    if len(longest) > len(shown):
        title += f" (the {len(shown)} longest-diverging subjects shown)"
    frame = frame[frame["row"].isin(shown)]
    order = {row: i for i, row in enumerate(shown)}
    fig, ax = plt.subplots(figsize=(11, max(2.0, 0.25 * len(shown) + 1.2)))
    for kind, part in frame.groupby("kind"):
        starts = mdates.date2num(part["start"].dt.tz_convert(None))
        ends = mdates.date2num(part["end"].dt.tz_convert(None))
        width = [max(e - s, 1 / 1440) for s, e in zip(starts, ends, strict=True)]  # at least a minute, to be seen
        ax.barh(
            [order[r] for r in part["row"]],
            width,
            left=starts,
            height=0.7,
            color=DIVERGENCE_COLORS.get(cast(str, kind), "#777"),
            label=kind,
        )
    ax.set_yticks(range(len(shown)))
    ax.set_yticklabels(shown, fontsize=7)
    _day_axis(ax, day_start, day_end)
    ax.set_title(title, fontsize=10)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.0, 1.0))
    ax.invert_yaxis()
    return Figure("divergence", "", title, _svg(fig))


def distribution_figures(data: ReportData, max_brokers: int = 40, max_topics: int = 60) -> list[Figure]:
    """Per cluster, a heatmap of write queues: broker names x topics (end-of-day state).

    A topic a broker group does not serve is a blank cell, not a 0: a topic with write queue
    numbers 0 on a group (its write perm wiped down to nothing) is worth seeing as such.
    """
    frame = data.distribution
    out: list[Figure] = []
    if frame.empty:
        return out
    for cluster in sorted(frame["cluster"].dropna().unique()):
        part = frame[frame["cluster"] == cluster]
        grid = part.pivot_table(index="broker_name", columns="topic", values="write_queue_nums", aggfunc="max")
        n_brokers, n_topics = grid.shape
        top_topics = grid.sum(axis=0).sort_values(ascending=False).index[:max_topics]
        top_brokers = grid.sum(axis=1).sort_values(ascending=False).index[:max_brokers]
        grid = grid.loc[sorted(top_brokers), sorted(top_topics)]
        title = f"Write queues in cluster {cluster}: {n_brokers} broker groups x {n_topics} topics"
        if grid.shape != (n_brokers, n_topics):
            title += f" (busiest {grid.shape[0]} x {grid.shape[1]} shown)"
        fig, ax = plt.subplots(figsize=(min(14, 2 + 0.18 * grid.shape[1]), max(2.0, 0.22 * grid.shape[0] + 1.5)))
        cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#eeeeee")
        image = ax.imshow(grid.values.astype(float), aspect="auto", cmap=cmap, vmin=0, interpolation="nearest")
        ax.set_yticks(range(grid.shape[0]))
        ax.set_yticklabels(grid.index, fontsize=7)
        ax.set_xticks(range(grid.shape[1]))
        ax.set_xticklabels(grid.columns, fontsize=6, rotation=90)
        ax.set_title(title, fontsize=10)
        fig.colorbar(image, ax=ax, label="write queues")
        out.append(Figure("distribution", str(cluster), title, _svg(fig)))
    return out


def _findings_table(frame: pd.DataFrame, max_rows: int = 500) -> str:
    if frame.empty:
        return "<p>No findings.</p>"
    frame = frame.copy()
    frame["_order"] = frame["severity"].map(SEVERITY_ORDER).fillna(9)
    frame = frame.sort_values(["_order", "category", "kind", "subject"]).drop(columns="_order")
    note = ""
    if len(frame) > max_rows:
        note = (
            f"<p>{len(frame)} findings; the first {max_rows} by severity are listed"
            " (all are in the findings table).</p>"
        )
        frame = frame.head(max_rows)
    cols = ["severity", "category", "kind", "subject", "ns", "start_ts", "end_ts", "detail"]
    cols += ["incident_id"] if "incident_id" in frame.columns else []
    head = "".join(f"<th>{c}</th>" for c in cols)
    body = []
    for row in frame[cols].itertuples(index=False):
        cells = []
        for col, value in zip(cols, row, strict=True):
            text = "" if value is None or (isinstance(value, float) and pd.isna(value)) else str(value)
            if col == "detail" and len(text) > 300:
                text = text[:300] + "…"
            css = f' class="sev-{html.escape(text)}"' if col == "severity" else ""
            text = html.escape(text)
            if col == "detail":  # JSON without spaces: let it wrap anywhere rather than widen the page
                text = f'<div class="detail">{text}</div>'
            cells.append(f"<td{css}>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return note + f'<table id="findings"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


_CSS = """
body{font-family:system-ui,sans-serif;margin:24px;color:#222;max-width:1400px}
h1{font-size:22px} h2{font-size:17px;margin-top:28px;border-bottom:1px solid #ddd}
.cards{display:flex;gap:12px;flex-wrap:wrap} .card{border:1px solid #ccc;border-radius:6px;padding:8px 14px}
.card b{display:block;font-size:20px} figure{margin:8px 0 20px 0} svg{max-width:100%;height:auto}
table{border-collapse:collapse;font-size:12px} td,th{border:1px solid #ddd;padding:3px 6px;vertical-align:top}
td{white-space:nowrap} td .detail{white-space:normal;overflow-wrap:anywhere;min-width:20em;max-width:60em}
.sev-critical{background:#ffcdd2} .sev-warning{background:#fff3cd} .sev-info{background:#e3f2fd}
"""


def render_html(data: ReportData) -> str:
    """The whole page as one string: headline, incidents, timelines, heatmaps, findings."""
    cards = "".join(
        f'<div class="card"><span>{html.escape(str(k))}</span><b>{html.escape(str(v))}</b></div>'
        for k, v in data.headline.items()
        if not isinstance(v, dict)
    )
    sections = [
        f"<h1>nsaudit report for {data.day.isoformat()} (UTC)</h1>",
        f'<div class="cards" id="headline">{cards}</div>',
    ]
    sections += [f"<p>{html.escape(n)}</p>" for n in data.notes]
    # first: what happened, one line per root cause; the per-stage detail follows
    sections.append(incidents_html(data.incidents, data.day, _svg))

    def figures(title: str, anchor: str, figs: list[Figure], empty: str) -> None:
        sections.append(f'<h2 id="{anchor}">{html.escape(title)}</h2>')
        if not figs:
            sections.append(f"<p>{html.escape(empty)}</p>")
        for fig in figs:
            # data-plot / data-subject name each plot for readers and for the browser test
            sections.append(
                f'<figure class="plot" data-plot="{fig.kind}" data-subject="{html.escape(fig.subject)}">{fig.svg}'
                f"<figcaption>{html.escape(fig.title)}</figcaption></figure>"
            )

    figures("Liveness per name server", "liveness", liveness_figures(data), "No liveness windows this day.")
    div = divergence_figure(data)
    figures(
        "Divergence between name servers",
        "divergence",
        [div] if div else [],
        "No divergence episodes longer than the grace.",
    )
    figures(
        "Queue distribution per cluster", "distribution", distribution_figures(data), "No routes at the end of the day."
    )
    sections.append('<h2 id="findings-h">Findings</h2>')
    sections.append(_findings_table(data.findings))
    return (
        "<!DOCTYPE html><html><head><meta charset='utf-8'>"
        f"<title>nsaudit {data.day.isoformat()}</title><style>{_CSS}</style></head><body>"
        + "\n".join(sections)
        + "</body></html>"
    )


def write_report(report_dir: str, data: ReportData) -> tuple[str, str]:
    """Write ``index.html`` and ``summary.json`` into a folder or an ``s3a://`` prefix, each
    replaced whole (``jobs.storage.files.write_text``).

    Returns:
        The paths of the HTML page and the JSON summary.
    """
    page = render_html(data)
    # "audited": the tables of the day are this report's (jobs.report.status marks an earlier one)
    summary = {"date": data.day.isoformat(), **data.headline, "notes": data.notes, "audited": True}
    paths = []
    for name, text in (
        ("index.html", page),
        ("summary.json", json.dumps(summary, indent=2, sort_keys=True, default=str)),
    ):
        path = locations.join(report_dir, name)
        storage_files.write_text(path, text)
        paths.append(path)
    return paths[0], paths[1]
