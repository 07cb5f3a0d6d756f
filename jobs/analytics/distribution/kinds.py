"""The kinds of ``distribution`` findings and their severities (:data:`SEVERITY`).

Each kind's subject and severity are listed in README.md, "Findings"; when its condition holds at
a snapshot instant, how instants merge into runs (:mod:`jobs.analytics.distribution.runs`) and why
the severities are what they are: docs/audit.md, "Distribution".
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
    "topic_deleted": "info",  # warning when the server kept no route of the topic
    "topic_route_changed": "info",
    "topic_perm_changed": "info",  # warning when the topic is left with no writable queue
}
