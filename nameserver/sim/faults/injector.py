"""Fault injection: when each fault strikes, whom it hits, and the ground truth it leaves."""

from __future__ import annotations

import random
from collections.abc import Callable
from pathlib import Path

from nameserver.model import MASTER_ID
from nameserver.sim.brokers import SimBroker
from nameserver.sim.faults.broker_faults import BrokerFaults
from nameserver.sim.faults.core import FOREVER, WARMUP_MS
from nameserver.sim.faults.server_faults import ServerFaults
from nameserver.sim.faults.topic_faults import TopicFaults
from nameserver.sim.truth import Record, write_truth


class FaultInjector(BrokerFaults, TopicFaults, ServerFaults):
    """Schedules the enabled faults on a simulation and keeps their records.

    The layout faults (``read_lt_write``, ``queue_skew``) are built into the fleet by
    :func:`nameserver.layout.build_layout`; here they only get their truth records, one per topic
    or cluster of :func:`nameserver.layout.layout_anomalies`, whose effects are the first
    registrations of the groups concerned. A ``read_lt_write`` record ends when topic changes or
    deletions leave no group of the topic with fewer read than write queues; a ``queue_skew``
    record describes the cluster as laid out and stays open (later faults move queues too).

    Each enabled runtime kind arrives as a Poisson process (its own seeded stream, so switching one
    kind off leaves the others' arrival times alone) at ``DEFAULT_FAULTS_PER_DAY[kind] * fault_rate``
    per simulated day, from one minute after the start. An arrival picks a subject that no other
    fault holds (a broker group whose members are all alive, a server that is up); when there is
    none, the arrival is skipped and nothing is recorded. A fault holds its group until shortly
    after it ends, so faults never overlap on one group and their effects stay attributable.

    Each kind's module says what it does: :mod:`~nameserver.sim.faults.broker_faults`,
    :mod:`~nameserver.sim.faults.topic_faults`, :mod:`~nameserver.sim.faults.server_faults`.

    Args:
        sim: the simulation to disturb.
        kinds: the enabled fault kinds.
        fault_rate: multiplies every runtime kind's daily rate.
        seed: seeds each kind's own arrival stream.
    """

    def boot_records(self, broker: SimBroker) -> tuple[Record, ...]:
        """The layout records a broker's registration must note: its group's, on the master's
        first start only (empty for every other registration)."""
        if broker.broker_id != MASTER_ID or broker.life != 1:
            return ()
        return tuple(self._boot_records.pop(broker.group.broker_name, ()))

    def begin(self, start_ms: int) -> None:
        """Schedule each enabled runtime kind's first arrival."""
        for kind in self._per_ms:
            if self._per_ms[kind] > 0:
                self._schedule_next(start_ms + WARMUP_MS, kind)

    def write(self, events_dir: Path, ns_order: tuple[str, ...]) -> Path:
        """Write the truth file (see :mod:`nameserver.sim.truth`)."""
        return write_truth(events_dir, self.records, ns_order)

    def _schedule_next(self, after: int, kind: str) -> None:
        gap = self._rngs[kind].expovariate(self._per_ms[kind])
        self.sim.schedule(after + 1 + int(min(gap, FOREVER)), self._arrive, kind)

    def _arrive(self, now: int, kind: str) -> None:
        record = self._STRIKES[kind](self, now, self._rngs[kind])
        if record is not None:
            self.records.append(record)
            self.counts[kind] += 1
        self._schedule_next(now, kind)

    # runtime fault kind -> what an arrival of it does (returns its record, None when skipped)
    _STRIKES: dict[str, Callable[[FaultInjector, int, random.Random], Record | None]] = {
        "expire": BrokerFaults._expire,
        "shutdown": BrokerFaults._shutdown,
        "lost_unregister": BrokerFaults._lost_unregister,
        "partition": BrokerFaults._partition,
        "promotion": BrokerFaults._promotion,
        "topic_change": TopicFaults._topic_change,
        "delete_topic": TopicFaults._delete_topic,
        "wipe": TopicFaults._wipe,
        "ns_restart": ServerFaults._ns_restart,
    }
