"""A broker fleet's shape: clusters, broker groups, addresses and topic placement.

Shared by the simulator (``nsaudit simulate``) and the live fleet (``nsaudit fleet``), so both
register the same fleet for the same arguments. Pure and deterministic for a seed and a set of
layout faults (:class:`FleetLayout` describes them): no clock, no I/O, only
``random.Random(seed)``. Parts: ``fleet_layout`` (the types), ``builder`` (:func:`build_layout`:
groups, clusters, addresses), ``placement`` (topics), ``anomalies`` (what the audit should find),
``faults`` (the fault names both take).
"""

from nameserver.layout.anomalies import Anomaly, cluster_write_queues, layout_anomalies, skew
from nameserver.layout.builder import MAX_BROKERS, MAX_SLAVES, MAX_TOPICS, build_layout
from nameserver.layout.faults import FAULTS, RUNTIME_FAULTS
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
    "BROKER_PORT",
    "FAULTS",
    "HA_PORT",
    "LAYOUT_FAULTS",
    "MAX_BROKERS",
    "MAX_SLAVES",
    "MAX_TOPICS",
    "RUNTIME_FAULTS",
    "SCALE_UP",
    "TOPIC_KINDS",
    "Anomaly",
    "BrokerGroup",
    "BrokerMember",
    "FleetLayout",
    "TopicLayout",
    "build_layout",
    "cluster_write_queues",
    "layout_anomalies",
    "skew",
]
