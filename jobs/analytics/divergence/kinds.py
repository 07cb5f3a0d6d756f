"""What the divergence stage compares: four kinds of disagreement, each per *key*
(``route_missing``, ``broker_missing``, ``queue_data_mismatch``, ``broker_addrs_mismatch``), and
the columns of keys and episodes. Each kind's key, its views and which servers are compared:
docs/audit.md, "Divergence".
"""

ROUTE_MISSING = "route_missing"
BROKER_MISSING = "broker_missing"
QUEUE_DATA_MISMATCH = "queue_data_mismatch"
BROKER_ADDRS_MISMATCH = "broker_addrs_mismatch"
KINDS = (ROUTE_MISSING, BROKER_MISSING, QUEUE_DATA_MISMATCH, BROKER_ADDRS_MISMATCH)
ABSENT = "absent"

KEY_COLUMNS = ("kind", "key", "topic", "broker_name", "broker_addr")
KEYED_COLUMNS = (*KEY_COLUMNS, "facts")
EPISODE_COLUMNS = (
    *KEY_COLUMNS,
    "start_ms",
    "end_ms",
    "views",
    "majority",
    "servers_wrong",
    "servers_up",
    "exposure",
    "critical",
    "began_before_day",
)
