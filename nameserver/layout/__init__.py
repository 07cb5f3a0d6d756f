"""A broker fleet's shape: clusters, broker groups, addresses and topic placement.

Shared by the simulator (``nsaudit simulate``) and the live fleet (``nsaudit fleet``), so both
register the same fleet for the same arguments. Pure and deterministic for a seed and a set of
layout faults: no clock, no I/O, only ``random.Random(seed)``.

**Layout faults** (:data:`LAYOUT_FAULTS`, part of the simulator's and the fleet's fault
vocabulary) are the misconfigurations an estate is born with rather than events of the day:

* ``read_lt_write``: ~2% of the topics (at least one once there are 10) are placed like regular
  ones with fewer read than write queues (4/8 or 8/16), the scale-out mistake behind the audit's
  ``read_write_mismatch``. Without it no topic has read != write queues.
* ``queue_skew``: groups within a cluster are picked by Zipf-like weights ``1/(rank+1)**0.8``
  over a seeded ranking and clusters at random by their number of groups, so a few groups carry
  many more queues than the others; and in every cluster of two or more groups the busiest
  group was scaled up: each of its topics has :data:`SCALE_UP` times the read and write queues
  there. That puts every such cluster over the audit's default thresholds (coefficient of
  variation 0.5, max/mean 2: the busiest group at 4x at least the others' load makes the ratio
  over 2 from four groups on, the variation at least 0.6 with two and 0.7 with three), where
  Zipf weights alone only skew clusters of a dozen groups or more. :func:`layout_anomalies`
  names the clusters.

  Without it placement is balanced, as an operator placing each new topic on the emptiest
  brokers would: every topic goes to the cluster with the fewest write queues per group and,
  there, to the groups with the fewest (seeded ties). Each group then stays within one topic's
  queues (16) of every other group of its cluster, so a cluster whose groups average 16 write
  queues or more (about two regular topics per group) is within the default thresholds.

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
