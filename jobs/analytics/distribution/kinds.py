"""The kinds of ``distribution`` findings and their severities.

A condition is checked at every snapshot instant and the instants where it holds are merged, per
(kind, subject, server), into runs of consecutive instants (:mod:`jobs.analytics.distribution.runs`).
Severities are chosen so that a fault-free, balanced fleet raises nothing above info
(``single_broker_topic`` is a choice, not a fault); ``read_write_mismatch`` and ``queue_skew`` are
configuration findings a user must see even though nothing happened during the day (the
simulator's layout faults ``read_lt_write`` and ``queue_skew`` make them).

============================== ============ ======== ==============================================
kind                           subject      severity holds at an instant when
============================== ============ ======== ==============================================
``no_writable_queue``          topic        critical the topic has a route but a producer gets no
                                                     queue from it
``read_write_mismatch``        topic        warning  a readable and writable QueueData has fewer
                                                     read than write queues
``single_broker_topic``        topic        info     all of the topic's QueueData are on one group
``write_perm_wiped``           broker name  warning  a QueueData of the group lacks ``perm & 2``
                                                     while the same (topic, group) is writable on
                                                     another server then, or was earlier on this
                                                     one (today, or at the end of yesterday)
``queue_skew``                 cluster      warning  the cluster's write queues per group exceed
                                                     ``queue_skew_cv`` or
                                                     ``queue_skew_max_over_mean``
``no_master``                  broker name  warning  a BrokerData has no id 0
``queue_data_without_broker``  broker name  warning  QueueData of a name with no BrokerData
                                                     (breaks docs/nameserver-semantics.md I4)
``broker_in_two_clusters``     broker name  warning  the name is in two cluster sets (W21)
``addr_in_two_groups``         broker addr  warning  one address in two BrokerData (W22)
============================== ============ ======== ==============================================
"""

CATEGORY = "distribution"

SEVERITY = {
    "no_writable_queue": "critical",
    "read_write_mismatch": "warning",
    "single_broker_topic": "info",
    "write_perm_wiped": "warning",
    "queue_skew": "warning",
    "no_master": "warning",
    "queue_data_without_broker": "warning",
    "broker_in_two_clusters": "warning",
    "addr_in_two_groups": "warning",
}
