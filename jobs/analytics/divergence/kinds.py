"""What the divergence stage compares: four kinds of disagreement, each per *key*.

* ``route_missing`` (topic): the topic has a QueueData on some up servers and none on others;
  clients pinned to those get "No route info of this topic". View: ``present`` / ``absent``.
* ``broker_missing`` (broker address): live (``liveness_windows``) on some up servers only. View:
  ``live`` / ``absent``.
* ``queue_data_mismatch`` (topic, broker name): the QueueData's ``read/write/perm/sysflag``
  (``8/8/6/0``) differs among the servers that have it, or is ``absent`` on a server that knows
  the topic and has a BrokerData of that name (the restart race, docs/nameserver-semantics.md
  W20). A server that does not know the topic (that is ``route_missing``) or the broker name
  (broker-level) is not compared.
* ``broker_addrs_mismatch`` (broker name): the BrokerData's ``brokerAddrs`` differs, as canonical
  text ``{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"}``, among the servers that have it.
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
    *KEY_COLUMNS, "start_ms", "end_ms", "views", "majority", "servers_wrong", "servers_up", "exposure",
    "critical", "began_before_day",
)
