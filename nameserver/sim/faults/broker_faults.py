"""Broker faults (docs/nameserver-semantics.md §4 for the broker side): ``expire``, ``shutdown``,
``lost_unregister``, ``partition`` and ``promotion``, each described in :class:`BrokerFaults`.
"""

from __future__ import annotations

import random

from nameserver.sim.brokers import SimBroker, SimGroup
from nameserver.sim.faults.core import FOREVER, MINUTE_MS, SETTLE_MS, FaultCore, broker_record
from nameserver.sim.truth import Record, new_record


class BrokerFaults(FaultCore):
    """The faults that strike one broker or one broker group.

    * ``expire``: a broker goes silent (hung process or black-holed host); its connections stay
      open. Every server that had it live expires it by scan; 70% restart 5-60 min later.
    * ``shutdown``: UNREGISTER_BROKER to every server, then the connections close; 80% restart
      1-15 min later.
    * ``lost_unregister``: a shutdown whose unregister and close never reach one server, which
      keeps the entry until its scan expires it; 80% restart 4-20 min later.
    * ``partition``: one broker cannot reach one server for 3-20 min; that server expires it while
      the others keep it, and it registers afresh once the link heals.
    * ``promotion``: a master crashes (every server sees its connection close), 10-60 s later a
      slave re-registers as id 0 over its connection; 70% of old masters rejoin as slaves 5-30 min
      later.
    """

    def _expire(self, now: int, rng: random.Random) -> Record | None:
        broker = self._pick_broker(now, rng)
        if broker is None:
            return None
        record = broker_record("expire", broker, now)
        self.sim.kill(broker)
        self._expect_expiry(now, record, broker.addr, range(len(self.sim.servers)))
        self._maybe_restart(now, rng, broker, record, 0.7, (5, 60))
        return record

    def _shutdown(self, now: int, rng: random.Random) -> Record | None:
        broker = self._pick_broker(now, rng)
        if broker is None:
            return None
        record = broker_record("shutdown", broker, now)
        self.sim.shutdown(now, broker, record)
        self._maybe_restart(now, rng, broker, record, 0.8, (1, 15))
        return record

    def _lost_unregister(self, now: int, rng: random.Random) -> Record | None:
        broker = self._pick_broker(now, rng)
        servers = self._servers_holding(broker)
        if broker is None or not servers:
            return None
        lossy = rng.choice(servers)
        record = broker_record("lost_unregister", broker, now, lost_on=lossy.ns_id)
        self.sim.shutdown(now, broker, record, lost=lossy.index)
        self._expect_expiry(now, record, broker.addr, [lossy.index])
        # the restart comes after the lossy server's expiry (>= 4 min > expiry + scan)
        self._maybe_restart(now, rng, broker, record, 0.8, (4, 20))
        return record

    def _partition(self, now: int, rng: random.Random) -> Record | None:
        broker = self._pick_broker(now, rng)
        servers = self._servers_holding(broker)
        if broker is None or not servers:
            return None
        server = rng.choice(servers)
        heal = now + rng.randint(3 * MINUTE_MS, 20 * MINUTE_MS)
        record = broker_record("partition", broker, now, cut_from=server.ns_id, heal_ms=heal)
        broker.cut[server.index] = True
        self._expect_expiry(now, record, broker.addr, [server.index])
        broker.group.busy_until = heal + SETTLE_MS
        self.sim.schedule(heal, self._heal, broker, server.index, record)
        return record

    def _heal(self, now: int, broker: SimBroker, index: int, record: Record) -> None:
        broker.cut[index] = False
        record["end_ms"] = now

    def _promotion(self, now: int, rng: random.Random) -> Record | None:
        groups = [g for g in self.sim.groups if len(g.members) > 1 and g.idle(now) and g.master() is not None]
        if not groups:
            return None
        group = rng.choice(groups)
        old = group.master()
        assert old is not None
        record = new_record(
            "promotion",
            group.broker_name,
            now,
            cluster=group.cluster,
            old_master=old.addr,
            new_master=None,
            promote_ms=None,
            rejoin_ms=None,
        )
        self.sim.crash(now, old, record)
        promote = now + rng.randint(10_000, 60_000)
        rejoin = promote + rng.randint(5 * MINUTE_MS, 30 * MINUTE_MS) if rng.random() < 0.7 else None
        group.busy_until = rejoin + SETTLE_MS if rejoin is not None else FOREVER
        self.sim.schedule(promote, self._promote, group, old, rejoin, record)
        return record

    def _promote(self, now: int, group: SimGroup, old: SimBroker, rejoin: int | None, record: Record) -> None:
        slave = min((m for m in group.members if m.alive and m is not old), key=lambda m: m.broker_id)
        vacated = slave.broker_id
        slave.broker_id = 0
        record.update(end_ms=now, new_master=slave.addr, promote_ms=now)
        self.sim.send(now, slave, slave.payload(), record)  # re-registers as id 0 at once
        if rejoin is not None:
            self.sim.schedule(rejoin, self._rejoin, old, vacated, record)

    def _rejoin(self, now: int, old: SimBroker, broker_id: int, record: Record) -> None:
        old.broker_id = broker_id
        record["rejoin_ms"] = now
        self.sim.start_broker(now, old)
