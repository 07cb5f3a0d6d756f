"""What a simulation run is asked to do: validated, frozen options and the fault catalogue.

Validation raises :class:`common.errors.UserError` with one line naming the bad value, so the
CLI can print it and exit 2.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass
from pathlib import Path

from common.errors import UserError
from common.timeutil import MAX_TIME_MS, MIN_TIME_MS, iso
from nameserver.layout import FAULTS, MAX_SLAVES  # the fault vocabulary, shared with the live fleet

# Expected runtime faults per simulated day at --fault-rate 1, for the whole fleet. Fleet-wide rather
# than per broker so that small demo fleets see every fault too; for the reference fleet
# (1000 brokers) these give a handful of each kind a day; with at least 3 a day, a day without
# some kind is rare (Poisson: under 5%).
DEFAULT_FAULTS_PER_DAY = {
    "expire": 6.0,
    "shutdown": 5.0,
    "lost_unregister": 4.0,
    "partition": 4.0,
    "promotion": 4.0,
    "topic_change": 8.0,
    "wipe": 4.0,
    "delete_topic": 4.0,
    "ns_restart": 3.0,
}

MAX_NS = 100  # each simulated server keeps a segment of its own open


@dataclass(frozen=True)
class SimOptions:
    """A validated simulation request (the ``nsaudit simulate`` arguments).

    Attributes:
        events_dir: where the event logs and ``_truth/`` go.
        ns: number of name servers (ids ``ns-a``, ``ns-b``, ...).
        brokers: broker processes, in groups of one master and ``slaves`` slaves.
        start_ms: simulated start, epoch ms.
        hours: simulated duration.
        faults: enabled fault names, in :data:`FAULTS` order (layout faults shape the fleet,
            runtime faults strike during the run).
        fault_rate: multiplier on :data:`DEFAULT_FAULTS_PER_DAY` (runtime faults only).
        quiet: no progress lines.
    """

    events_dir: Path
    ns: int
    brokers: int
    slaves: int
    topics: int
    start_ms: int
    hours: float
    seed: int
    faults: tuple[str, ...]
    fault_rate: float = 1.0
    quiet: bool = False

    def __post_init__(self) -> None:
        for name in ("brokers", "slaves", "topics"):
            if getattr(self, name) < 0:
                raise UserError(f"--{name} must be >= 0, not {getattr(self, name)}")
        if self.ns < 1:
            raise UserError(f"--ns must be >= 1, not {self.ns}")
        if self.slaves > MAX_SLAVES:
            raise UserError(f"--slaves must be <= {MAX_SLAVES}, not {self.slaves}")
        if not (math.isfinite(self.hours) and self.hours > 0):
            raise UserError(f"--hours must be a positive number, not {self.hours}")
        # hours longer than the whole range first: end_ms of 1e308 hours would round infinity
        if self.hours * 3_600_000 > MAX_TIME_MS - MIN_TIME_MS or self.end_ms > MAX_TIME_MS:
            raise UserError(f"--start plus --hours ends after {iso(MAX_TIME_MS)}, the last time nsaudit handles")
        if not (math.isfinite(self.fault_rate) and self.fault_rate >= 0):
            raise UserError(f"--fault-rate must be >= 0, not {self.fault_rate}")
        unknown = [f for f in self.faults if f not in FAULTS]
        if unknown:
            raise UserError(f"unknown fault {unknown[0]!r}; known: {', '.join(FAULTS)}")

    @property
    def end_ms(self) -> int:
        """First instant not simulated (exclusive end)."""
        return self.start_ms + round(self.hours * 3_600_000)

    @property
    def ns_ids(self) -> tuple[str, ...]:
        """``ns-a`` ... ``ns-z``, then ``ns-aa``, ``ns-ab``, ..."""
        return tuple(ns_id(i) for i in range(self.ns))


def ns_id(index: int) -> str:
    """The id of the ``index``-th name server: bijective base 26 over a-z."""
    letters = ""
    index += 1
    while index:
        index, rem = divmod(index - 1, 26)
        letters = string.ascii_lowercase[rem] + letters
    return f"ns-{letters}"


def parse_faults(text: str) -> tuple[str, ...]:
    """``all``, ``none`` or a comma-separated list of :data:`FAULTS` names.

    Raises:
        UserError: an unknown or empty name.
    """
    text = text.strip()
    if text == "all":
        return FAULTS
    if text == "none":
        return ()
    names = [n.strip() for n in text.split(",")]
    for name in names:
        if name not in FAULTS:
            raise UserError(f"unknown fault {name!r} in --faults; use all, none or some of: {', '.join(FAULTS)}")
    return tuple(f for f in FAULTS if f in names)


def check_events_dir(events_dir: Path, ns_ids: tuple[str, ...]) -> None:
    """Refuse a directory that already holds logs of these name servers.

    Raises:
        UserError: ``events_dir`` is a file, or ``<events_dir>/<ns>`` exists and is not empty.
    """
    if events_dir.exists() and not events_dir.is_dir():
        raise UserError(f"--events {events_dir} is not a directory")
    for ns in ns_ids:
        ns_dir = events_dir / ns
        if ns_dir.exists() and (not ns_dir.is_dir() or any(ns_dir.iterdir())):
            raise UserError(f"--events {events_dir} already has logs for {ns}; use an empty directory")
