"""A small simulated and audited day, built once per test session for the report and notebook tests.

Import the fixture into a test module (``from tests.jobs.audited import audited_lake  # noqa: F401``).
pytest registers an imported fixture once per importing module, so the lake itself is cached here:
whichever module asks first builds it, the others reuse it.

The day is three name servers, eight broker processes (four groups in two clusters) and twelve
topics for two simulated hours, every fault at eight times its default rate, so liveness windows
end for every reason, servers diverge and topics change. The audit runs the stages the report's
plots read (ingest, rebuild, snapshots, liveness, divergence) and then the report itself;
distribution and security only add findings rows and would double the time.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import pytest

from common.timeutil import day_start_ms

DAY = dt.date(2026, 11, 21)
NS = 3
BROKERS, SLAVES, TOPICS = 8, 1, 12
HOURS = 2.0
SEED = 3
FAULT_RATE = 8.0


@dataclass(frozen=True)
class AuditedLake:
    """Where the audited day is, and what the simulation was asked for.

    Attributes:
        events: the simulated event logs.
        lake: the lake (Delta tables and ``reports/<day>/``).
        day: the audited UTC day.
        servers: the name-server ids simulated.
        clusters: the fleet's cluster names.
        report_html: ``<lake>/reports/<day>/index.html``.
    """

    events: Path
    lake: Path
    day: dt.date
    servers: tuple[str, ...]
    clusters: tuple[str, ...]
    report_html: Path


_built: dict[str, AuditedLake] = {}


def build_audited_lake(spark, root: Path) -> AuditedLake:
    """Simulate the day into ``root/events`` and audit it into ``root/lake``."""
    from common.config import Config
    from jobs import snapshots
    from jobs.analytics.divergence import stage as divergence
    from jobs.analytics.liveness import stage as liveness
    from jobs.ingest import stage as ingest
    from jobs.lake import audit_runs
    from jobs.rebuild import stage as rebuild
    from jobs.report import data as report_data
    from nameserver.sim.run import FAULTS, SimOptions, simulate

    events, lake = root / "events", root / "lake"
    result = simulate(
        SimOptions(
            events_dir=events,
            ns=NS,
            brokers=BROKERS,
            slaves=SLAVES,
            topics=TOPICS,
            start_ms=day_start_ms(DAY),
            hours=HOURS,
            seed=SEED,
            faults=FAULTS,
            fault_rate=FAULT_RATE,
            quiet=True,
        )
    )
    config = Config()
    ingest.run_ingest(spark, str(events), str(lake), DAY, config)
    rebuild.run_rebuild(spark, str(lake), DAY, config)
    snapshots.run_snapshots(spark, str(lake), DAY, config)
    live = liveness.run_liveness(spark, str(lake), DAY, config)
    div = divergence.run_divergence(spark, str(lake), DAY, config)
    data = report_data.collect_report_data(spark, str(lake), DAY, live, div)
    html_path, _ = report_data.write_day_report(str(lake), data)
    # the stages above are the whole audit this lake's readers need: the day is audited
    audit_runs.record(spark, str(lake), DAY, "ok", [], {})
    return AuditedLake(
        events=events,
        lake=lake,
        day=DAY,
        servers=tuple(sorted(result.events_by_ns)),
        clusters=tuple(sorted(result.layout.clusters)),
        report_html=Path(html_path),
    )


@pytest.fixture(scope="session")
def audited_lake(spark, tmp_path_factory) -> AuditedLake:
    """The audited day (built on first use, then shared by every module that imports this)."""
    if "lake" not in _built:
        _built["lake"] = build_audited_lake(spark, tmp_path_factory.mktemp("audited-day"))
    return _built["lake"]
