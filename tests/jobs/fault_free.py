"""A simulated fault-free day through the whole nightly audit, built once per test session.

Import the fixture into a test module (``from tests.jobs.fault_free import fault_free_day  # noqa: F401``).
As with :mod:`tests.jobs.audited`, pytest registers an imported fixture once per importing module,
so the day itself is cached here: whichever module asks first builds it, the others reuse it
(``tests/conftest.py`` keeps those modules on one xdist worker).

The day is ``nsaudit simulate --faults none`` with three name servers, twelve broker processes
(six groups of a master and a slave in two clusters) and thirty topics for two hours, audited by
:func:`jobs.nightly_audit.run` (every stage, the report too) with the default configuration.
Tests read the lake; none may write to it.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from common.timeutil import day_start_ms

DAY = dt.date(2026, 11, 21)
T0 = day_start_ms(DAY)
NS, BROKERS, SLAVES, TOPICS, HOURS, SEED = 3, 12, 1, 30, 2, 5


@dataclass(frozen=True)
class FaultFreeDay:
    """The audited fault-free day.

    Attributes:
        events: the simulated event logs.
        lake: the audited lake.
        day: the UTC day.
        simulation: what :func:`nameserver.sim.run.simulate` returned.
        outcome: what :func:`jobs.nightly_audit.run` returned.
    """

    events: Path
    lake: Path
    day: dt.date
    simulation: Any
    outcome: Any


_built: dict[str, FaultFreeDay] = {}


def build_fault_free_day(spark, root: Path) -> FaultFreeDay:
    """Simulate the day into ``root/events`` and run the nightly audit into ``root/lake``."""
    from common.config import Config
    from jobs import nightly_audit
    from nameserver.sim.run import SimOptions, simulate

    events, lake = root / "events", root / "lake"
    simulation = simulate(
        SimOptions(
            events_dir=events,
            ns=NS,
            brokers=BROKERS,
            slaves=SLAVES,
            topics=TOPICS,
            start_ms=T0,
            hours=HOURS,
            seed=SEED,
            faults=(),
            quiet=True,
        )
    )
    outcome = nightly_audit.run(spark, Config(), str(events), str(lake), DAY, progress=lambda line: None)
    return FaultFreeDay(events=events, lake=lake, day=DAY, simulation=simulation, outcome=outcome)


@pytest.fixture(scope="session")
def fault_free_day(spark, tmp_path_factory) -> FaultFreeDay:
    """The audited fault-free day (built on first use, then shared)."""
    if "day" not in _built:
        _built["day"] = build_fault_free_day(spark, tmp_path_factory.mktemp("fault-free-day"))
    return _built["day"]
