"""``nsaudit lake retention`` at the edge of its range: a keep_days reaching back past the first
date there is keeps every day (no date arithmetic overflows); no Spark, no lake tables."""

import datetime as dt

from common.config import MAX_DAYS
from jobs.housekeeping import commands


def _lake_with_reports(tmp_path, monkeypatch, latest: dt.date):
    monkeypatch.setattr(commands, "latest_day", lambda lake_dir: latest)
    monkeypatch.setattr(commands, "lake_tables", lambda lake_dir: [])  # only the reports folder
    for day in ("2026-11-19", "2026-11-20", "2026-11-21"):
        (tmp_path / "reports" / day).mkdir(parents=True)
    return str(tmp_path)


def test_keep_days_past_the_first_date_keeps_every_day(tmp_path, monkeypatch):
    lake_dir = _lake_with_reports(tmp_path, monkeypatch, dt.date(2026, 11, 21))
    first_kept, changes = commands.retain_days(lake_dir, engine=None, keep_days=MAX_DAYS)  # type: ignore[arg-type]
    assert (first_kept, changes) == (dt.date.min, [])
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["2026-11-19", "2026-11-20", "2026-11-21"]


def test_keep_days_within_the_dates_removes_the_older_days(tmp_path, monkeypatch):
    lake_dir = _lake_with_reports(tmp_path, monkeypatch, dt.date(2026, 11, 21))
    first_kept, _ = commands.retain_days(lake_dir, engine=None, keep_days=2)  # type: ignore[arg-type]
    assert first_kept == dt.date(2026, 11, 20)
    assert sorted(p.name for p in (tmp_path / "reports").iterdir()) == ["2026-11-20", "2026-11-21"]
