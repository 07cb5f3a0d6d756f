"""A broker fleet's shape: clusters, broker groups, addresses and topic placement.

Shared by the simulator (``nsaudit simulate``) and the live fleet (``nsaudit fleet``), so both
register the same fleet for the same arguments. Pure and deterministic for a seed and a set of
layout faults: no clock, no I/O, only ``random.Random(seed)``. :class:`FleetLayout` describes
the layout faults.

Parts: :mod:`~nameserver.layout.fleet_layout` (the types), :mod:`~nameserver.layout.builder`
(groups, clusters, addresses), :mod:`~nameserver.layout.placement` (topics),
:mod:`~nameserver.layout.anomalies` (what the audit should find).

Example:
    >>> layout = build_layout(brokers=1000, slaves=1, topics=2000, seed=1)
    >>> len(layout.groups), len(layout.clusters), layout.groups[0].master.addr
    (500, 4, '10.0.0.1:10911')
    >>> balanced = build_layout(brokers=1000, slaves=1, topics=2000, seed=1, faults=())
    >>> layout_anomalies(balanced)
    ()
"""

from nameserver.layout.anomalies import Anomaly, cluster_write_queues, layout_anomalies, skew
from nameserver.layout.builder import build_layout
from nameserver.layout.fleet_layout import (
    BROKER_PORT,
    HA_PORT,
    LAYOUT_FAULTS,
    SCALE_UP,
    TOPIC_KINDS,
    BrokerGroup,
    BrokerMember,
    FleetLayout,
    TopicLayout,
)

__all__ = [
    "BROKER_PORT", "HA_PORT", "LAYOUT_FAULTS", "SCALE_UP", "TOPIC_KINDS", "Anomaly", "BrokerGroup", "BrokerMember",
    "FleetLayout", "TopicLayout", "build_layout", "cluster_write_queues", "layout_anomalies", "skew",
]
