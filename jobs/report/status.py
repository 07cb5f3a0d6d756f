"""Whether a day's report still describes the lake: a run marks the old report before it writes.

A rerun replaces the day's tables stage by stage and the report last. Until it ends, the report
on disk is an earlier run's, so :func:`mark_unfinished` turns it into one that says so:
``summary.json`` gets ``"audited": false`` and a ``reason`` (a finished report says
``"audited": true``), and ``index.html`` a banner at the top. The report stage then writes a
fresh one over both.
"""

from __future__ import annotations

import datetime as dt
import html
import json
import os

BANNER_ID = "audit-unfinished"


def report_dir(lake: str, day: dt.date) -> str:
    """``<lake>/reports/<date>``."""
    return os.path.join(os.path.abspath(lake), "reports", day.isoformat())


def mark_unfinished(lake: str, day: dt.date, reason: str) -> None:
    """Mark ``day``'s existing report, if any, as not describing the lake (see the module doc)."""
    folder = report_dir(lake, day)
    summary_path, page_path = os.path.join(folder, "summary.json"), os.path.join(folder, "index.html")
    if os.path.exists(summary_path):
        with open(summary_path, encoding="utf-8") as fh:
            summary = json.load(fh)
        summary.update(audited=False, reason=reason)
        _replace(summary_path, json.dumps(summary, indent=2, sort_keys=True))
    if os.path.exists(page_path):
        with open(page_path, encoding="utf-8") as fh:
            page = fh.read()
        if f'id="{BANNER_ID}"' not in page:
            banner = (f'<p id="{BANNER_ID}" style="background:#ffcdd2;padding:8px;font-weight:bold">'
                      f"{html.escape(reason)}</p>")
            page = page.replace("<body>", "<body>" + banner, 1)
        _replace(page_path, page)


def _replace(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(text)
    os.replace(tmp, path)
