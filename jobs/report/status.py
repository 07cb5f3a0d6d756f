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

from jobs.storage import files, locations

BANNER_ID = "audit-unfinished"


def report_dir(lake: str, day: dt.date) -> str:
    """``<lake>/reports/<date>`` (a folder, or an ``s3a://`` prefix)."""
    return locations.join(lake, "reports", day.isoformat())


def mark_unfinished(lake: str, day: dt.date, reason: str) -> None:
    """Mark ``day``'s existing report, if any, as not describing the lake (see the module doc)."""
    folder = report_dir(lake, day)
    summary_path, page_path = locations.join(folder, "summary.json"), locations.join(folder, "index.html")
    if files.exists(summary_path):
        summary = json.loads(files.read_text(summary_path))
        summary.update(audited=False, reason=reason)
        files.write_text(summary_path, json.dumps(summary, indent=2, sort_keys=True))
    if files.exists(page_path):
        page = files.read_text(page_path)
        if f'id="{BANNER_ID}"' not in page:
            banner = (
                f'<p id="{BANNER_ID}" style="background:#ffcdd2;padding:8px;font-weight:bold">{html.escape(reason)}</p>'
            )
            page = page.replace("<body>", "<body>" + banner, 1)
        files.write_text(page_path, page)
