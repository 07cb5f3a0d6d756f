"""``nsaudit incidents``: a day's incidents from the lake without Spark, worst first, as a table,
JSON or Prometheus text.

Order: severity (critical first), then impact (topics no server routed, topics producers could
not write, share of clients exposed, write queues), then start. A day whose audit ``audit_runs`` does not record
``ok`` is said to be so (``"audited": false`` and a ``reason``), never shown as a quiet day.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
from typing import Any

from common.errors import LakeDamaged, UserError
from jobs import lake
from schemas.findings import SEVERITIES
from schemas.incidents import INCIDENTS_SCHEMA

FORMATS = ("table", "json", "prometheus")
_RANK = {s: i for i, s in enumerate(SEVERITIES)}


def _read(lake_dir: str, name: str, day: dt.date | None, columns: list[str]) -> list[dict[str, Any]]:
    from jobs.lake.tables import read_table_arrow

    path = lake.table_path(lake_dir, name)
    try:
        table = read_table_arrow(path, columns=columns, filters=[("date", "=", day)] if day else None)
    except FileNotFoundError:
        return []
    except LakeDamaged:
        raise
    except Exception as exc:  # noqa: BLE001 - a store's refusal, an unreachable store
        from jobs.storage.problems import describe

        raise UserError(f"cannot read {describe(exc, path)}") from None
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def day_incidents(lake_dir: str, day: dt.date, min_severity: str = "info") -> dict[str, Any]:
    """``{"date", "audited", "reason"?, "counts", "incidents"}``: the day's incidents of
    ``min_severity`` or worse, worst first; ``counts`` per severity over all of the day's."""
    runs = {r["date"]: r["status"] for r in _read(lake_dir, lake.AUDIT_RUNS, None, ["date", "status"])}
    answer: dict[str, Any] = {"date": day.isoformat(), "audited": runs.get(day) == "ok"}
    if runs.get(day) is None:
        answer["reason"] = f"{day} has not been audited"
    elif runs[day] != "ok":
        answer["reason"] = f"the audit of {day} did not finish (status {runs[day]}); rerun nsaudit audit --date {day}"
    rows = (
        _read(lake_dir, lake.INCIDENTS, day, [n for n in INCIDENTS_SCHEMA.names if n != "date"])
        if answer["audited"]
        else []
    )
    answer["counts"] = {s: sum(r["severity"] == s for r in rows) for s in SEVERITIES}
    kept = [r for r in rows if _RANK[r["severity"]] >= _RANK[min_severity]]
    kept.sort(
        key=lambda r: (
            -_RANK[r["severity"]],
            -r["topics_unroutable"],
            -r["topics_unwritable"],
            -r["client_share"],
            -r["write_queues_unwritable"],
            r["start_ts"],
            r["incident_id"],
        )
    )
    answer["incidents"] = [_jsonable(r) for r in kept]
    return answer


def _jsonable(row: dict[str, Any]) -> dict[str, Any]:
    out = dict(row)
    for key in ("start_ts", "end_ts"):
        value = out[key]
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.UTC)
        out[key] = value.astimezone(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    out["client_share"] = round(out["client_share"], 4)
    return out


def format_table(answer: dict[str, Any]) -> str:
    """Fixed-width text: a head line with the counts, then one line per incident."""
    counts = answer["counts"]
    head = (
        f"{answer['date']}: {counts['critical']} critical, {counts['warning']} warning, {counts['info']} info incidents"
    )
    if not answer["audited"]:
        return f"{answer['date']}: not audited: {answer['reason']}"
    # topics: unroutable (no server routed them) / unwritable (producers got no queue)
    lines = [
        head,
        f"{'severity':<9} {'root cause':<20} {'subject':<22} {'servers':<16} {'start':<9} {'end':<9} "
        f"{'unroutable':>10} {'topics':>6} {'clients':>7} {'findings':>8}  incident",
    ]
    for r in answer["incidents"]:
        lines.append(
            f"{r['severity']:<9} {r['root_cause']:<20} {r['subject'][:22]:<22} "
            f"{','.join(r['servers'])[:16]:<16} {r['start_ts'][11:19]:<9} {r['end_ts'][11:19]:<9} "
            f"{r['topics_unroutable']:>10} {r['topics_unwritable']:>6} {r['client_share']:>7.0%} "
            f"{r['findings']:>8}  {r['incident_id']}"
        )
    return "\n".join(lines)


def format_prometheus(answer: dict[str, Any]) -> str:
    """Prometheus text exposition: incidents per severity, and per severity and root cause."""
    day = answer["date"]
    lines = [
        "# HELP nsaudit_day_audited 1 when the day's audit finished ok.",
        "# TYPE nsaudit_day_audited gauge",
        f'nsaudit_day_audited{{date="{day}"}} {int(answer["audited"])}',
        "# HELP nsaudit_incidents Incidents of the audited day by severity.",
        "# TYPE nsaudit_incidents gauge",
    ]
    lines += [f'nsaudit_incidents{{date="{day}",severity="{s}"}} {n}' for s, n in answer["counts"].items()]
    lines += [
        "# HELP nsaudit_incidents_by_cause Incidents shown, by severity and root cause.",
        "# TYPE nsaudit_incidents_by_cause gauge",
    ]
    by_cause: dict[tuple[str, str], int] = {}
    for r in answer["incidents"]:
        by_cause[(r["severity"], r["root_cause"])] = by_cause.get((r["severity"], r["root_cause"]), 0) + 1
    lines += [
        f'nsaudit_incidents_by_cause{{date="{day}",severity="{s}",root_cause="{c}"}} {n}'
        for (s, c), n in sorted(by_cause.items())
    ]
    return "\n".join(lines)


def incidents_from_cli(args: argparse.Namespace) -> int:
    """``nsaudit incidents --lake DIR --date D [--min-severity S] [--format F]``."""
    from common.timeutil import parse_date

    answer = day_incidents(args.lake, parse_date(args.date), args.min_severity)
    if args.format == "json":
        print(json.dumps(answer, sort_keys=True, separators=(",", ":")))
    elif args.format == "prometheus":
        print(format_prometheus(answer))
    else:
        print(format_table(answer))
    return 0
