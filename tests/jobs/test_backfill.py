"""``nsaudit audit --from --to``: days in order, the ok ones skipped unless ``--force``, one line per
day, and a failed day stops the backfill with its error while the days before it stay ok.

The day's audit itself (:func:`jobs.nightly_audit.run`) is the nightly audit's, tested on its own;
here it is replaced by one that records which day it was asked for, so no Spark is needed.
"""

from __future__ import annotations

import argparse
import datetime as dt

import pytest

from common.config import Config
from common.errors import UserError
from jobs import backfill, nightly_audit

D1, D2, D3, D4 = (dt.date(2026, 11, 20) + dt.timedelta(days=n) for n in range(4))


def _args(**extra) -> argparse.Namespace:
    return argparse.Namespace(events="events", lake="lake", fail_on=None, **extra)


@pytest.fixture
def audited(monkeypatch):
    """The days the backfill audited, in order; a day in ``fail`` fails as a stage would."""
    calls, fail = [], set()

    def run_day(spark, config, args, day, path):
        calls.append(day)
        if day in fail:
            print(f"nsaudit audit: error: audit of {day} failed in stage rebuild: ValueError: boom (log: {path})")
            return None
        outcome = nightly_audit.AuditOutcome(day)
        outcome.findings_by_severity = {"warning": 2}
        return outcome

    monkeypatch.setattr(nightly_audit, "run_reporting_failure", run_day)
    return calls, fail


def test_days_are_audited_in_order_and_ok_days_skipped_unless_forced(audited):
    calls, _ = audited
    days = backfill.days_between(D1, D4)
    assert days == [D1, D2, D3, D4]
    lines = []
    result = backfill.run_days(
        None, Config(), _args(), days, backfill.to_audit(days, {D2}, force=False), "log", lines.append
    )
    assert calls == [D1, D3, D4]  # in order, D2 (already ok) skipped
    assert [d["status"] for d in result.days] == ["ok", "skipped", "ok", "ok"] and result.failed is None
    assert lines[1] == f"backfill {D2} (2/4): already audited ok, skipped (--force audits it again)"
    assert lines[0].startswith(f"backfill {D1} (1/4): ok in ")
    calls.clear()
    backfill.run_days(None, Config(), _args(), days, backfill.to_audit(days, {D2}, force=True), "log", lines.append)
    assert calls == [D1, D2, D3, D4]


def test_a_failed_day_stops_the_backfill_and_the_earlier_days_stay_ok(audited, capsys):
    calls, fail = audited
    fail.add(D3)
    lines = []
    days = [D1, D2, D3, D4]
    result = backfill.run_days(None, Config(), _args(), days, [D1, D3, D4], "log", lines.append)
    assert calls == [D1, D3]  # D4 never started
    assert result.failed == D3
    assert [d["status"] for d in result.days] == ["ok", "skipped", "failed"]
    assert lines[-1] == f"backfill {D3} (3/4): failed; 2 earlier days stay ok, 1 later days not audited"
    assert f"audit of {D3} failed in stage rebuild" in capsys.readouterr().out


@pytest.mark.parametrize(
    "extra, message",
    [
        (dict(date="2026-11-21", from_date="2026-11-20", to_date="2026-11-22"), "exclude each other"),
        (dict(date=None, from_date="2026-11-20", to_date=None), "needs both --from and --to"),
        (dict(date=None, from_date="2026-11-22", to_date="2026-11-20"), "is after --to"),
    ],
)
def test_a_bad_range_is_a_user_error(extra, message):
    with pytest.raises(UserError, match=message):
        backfill.run_from_cli(_args(config=None, master=None, **extra))


def test_a_backfill_of_days_all_ok_is_skipped_without_spark(tmp_path, capsys):
    """From the command line: the days ``audit_runs`` records ok are skipped, the summary lists them."""
    import json

    import pyarrow as pa
    from deltalake import write_deltalake

    from jobs import lake
    from nsaudit.cli import main

    (tmp_path / "events").mkdir()
    runs = pa.table({"date": pa.array([D1, D2], pa.date32()), "status": ["ok", "ok"]})
    write_deltalake(lake.table_path(tmp_path / "lake", lake.AUDIT_RUNS), runs, partition_by=["date"])
    code = main(
        [
            "audit",
            "--events",
            str(tmp_path / "events"),
            "--lake",
            str(tmp_path / "lake"),
            "--from",
            D1.isoformat(),
            "--to",
            D2.isoformat(),
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0, err
    assert [d["status"] for d in json.loads(out)["days"]] == ["skipped", "skipped"]
    assert err.splitlines() == [
        f"backfill {D1} (1/2): already audited ok, skipped (--force audits it again)",
        f"backfill {D2} (2/2): already audited ok, skipped (--force audits it again)",
    ]
