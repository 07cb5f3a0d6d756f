"""The fault vocabulary: one list of fault names for the simulator (``nsaudit simulate``) and the
live fleet (``nsaudit fleet``), so both take the same ``--faults``."""

from __future__ import annotations

from nameserver.layout.fleet_layout import LAYOUT_FAULTS

# Faults that strike during a run: in the simulator each a Poisson process (nameserver.sim.faults),
# in the live fleet each injected once.
RUNTIME_FAULTS = (
    "expire",
    "shutdown",
    "lost_unregister",
    "partition",
    "promotion",
    "topic_change",
    "wipe",
    "delete_topic",
    "ns_restart",
)
# Every fault name: the layout's misconfigurations (``read_lt_write``, ``queue_skew``), present from
# the start, then the runtime ones. ``all`` is every one of them, ``none`` a balanced fleet with
# nothing injected.
FAULTS = LAYOUT_FAULTS + RUNTIME_FAULTS
