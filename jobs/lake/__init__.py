"""Where each lake table lives: ``<lake>/<table name>/``, one Delta table per folder."""

from __future__ import annotations

import os

EVENTS = "events"
QUARANTINE = "quarantine"
INGEST_FILES = "ingest_files"
FINDINGS = "findings"
TOPIC_ROUTE_HISTORY = "topic_route_history"
BROKER_ADDR_HISTORY = "broker_addr_history"
CLUSTER_HISTORY = "cluster_history"
FILTER_SERVER_HISTORY = "filter_server_history"
NS_RUNS = "ns_runs"
NS_STATE = "ns_state"
ROUTE_SNAPSHOTS = "route_snapshots"
LIVENESS_WINDOWS = "liveness_windows"
NS_DIVERGENCES = "ns_divergences"


def table_path(lake: str | os.PathLike, name: str) -> str:
    """The folder of table ``name`` in the lake (absolute, so Spark executors see the same path)."""
    return os.path.join(os.path.abspath(os.fspath(lake)), name)
