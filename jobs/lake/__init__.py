"""Where each lake table lives: ``<lake>/<table name>/``, one Delta table per folder.

The names are declared in :mod:`schemas.tables`; they are re-exported here so that a stage says
``lake.table_path(lake_dir, lake.EVENTS)``.
"""

from __future__ import annotations

import os

from jobs.storage import locations
from schemas.tables import (
    AUDIT_RUNS,
    BROKER_ADDR_HISTORY,
    BROKER_AVAILABILITY,
    CLUSTER_HISTORY,
    EVENTS,
    FILTER_SERVER_HISTORY,
    FINDINGS,
    INCIDENTS,
    INGEST_FILES,
    LIVENESS_WINDOWS,
    NS_DIVERGENCES,
    NS_RUNS,
    NS_STATE,
    QUARANTINE,
    QUEUE_DISTRIBUTION,
    ROUTE_SNAPSHOTS,
    TOPIC_DISTRIBUTION,
    TOPIC_ROUTE_HISTORY,
)

__all__ = [
    "AUDIT_RUNS",
    "BROKER_ADDR_HISTORY",
    "BROKER_AVAILABILITY",
    "CLUSTER_HISTORY",
    "EVENTS",
    "FILTER_SERVER_HISTORY",
    "FINDINGS",
    "INCIDENTS",
    "INGEST_FILES",
    "LIVENESS_WINDOWS",
    "NS_DIVERGENCES",
    "NS_RUNS",
    "NS_STATE",
    "QUARANTINE",
    "QUEUE_DISTRIBUTION",
    "ROUTE_SNAPSHOTS",
    "TOPIC_DISTRIBUTION",
    "TOPIC_ROUTE_HISTORY",
    "table_path",
]


def table_path(lake: str | os.PathLike[str], name: str) -> str:
    """The folder of table ``name`` in the lake: absolute, so Spark executors see the same path, or
    ``s3a://bucket/prefix/name`` for a lake on an object store."""
    return locations.join(os.fspath(lake), name)
