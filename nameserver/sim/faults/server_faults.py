"""Server faults (docs/nameserver-semantics.md §2 for the server side).

* ``ns_restart``: a server stops cleanly (``ns_stop``) and starts 5-120 s later with empty
  tables, continuing its seq; the brokers refill it with their next registrations.
"""

from __future__ import annotations

import random

from nameserver.sim.faults.core import FaultCore
from nameserver.sim.namesrv import SimServer
from nameserver.sim.truth import Record, new_record, note_effect


class ServerFaults(FaultCore):
    """The faults that strike a name server."""

    def _ns_restart(self, now: int, rng: random.Random) -> Record | None:
        servers = [s for s in self.sim.servers if s.up]
        if not servers:
            return None
        server = rng.choice(servers)
        record = new_record("ns_restart", server.ns_id, now)
        server.stop(now, "restart")
        note_effect(record, server.ns_id, {"event": "ns_stop", "ts": now})
        self.sim.schedule(now + rng.randint(5_000, 120_000), self._ns_start, server, record)
        return record

    def _ns_start(self, now: int, server: SimServer, record: Record) -> None:
        self.sim.start_server(now, server)
        record["end_ms"] = now
        note_effect(record, server.ns_id, {"event": "ns_start", "ts": now})
