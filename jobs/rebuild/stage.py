"""Rebuild every name server's route tables for one UTC day, as validity intervals (docs/interfaces.md,
"The lake"; docs/nameserver-semantics.md §6).

Only the events that can change a route table are walked (:mod:`jobs.rebuild.marking`), one by one
per server on the executors with the server's own ``RouteReplayer`` (:mod:`jobs.rebuild.walk`),
starting from the previous day's ``ns_state`` (:mod:`jobs.rebuild.state`). See docs/audit.md,
"Rebuild".
"""

from __future__ import annotations

import datetime as dt
import logging
from dataclasses import dataclass

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from common.config import Config
from jobs import lake
from jobs.lake.days import read_day_arrow, read_or_empty, replace_day
from jobs.lake.tables import evolve_table_schema, read_table
from jobs.rebuild.marking import agg_blocks, select_interesting_keys, with_ts_ms
from jobs.rebuild.observed import (
    OBSERVED_EVENT_COLUMNS,
    select_observed_broker_addrs,
    select_observed_clusters,
    select_observed_filter_servers,
    select_observed_runs,
    select_observed_state,
    select_observed_topic_routes,
    with_entry_intervals,
    with_epochs,
)
from jobs.rebuild.tables import (
    select_broker_addr_history,
    select_cluster_history,
    select_filter_server_history,
    select_ns_runs,
    select_ns_state,
    select_topic_route_history,
)
from jobs.rebuild.walker import WALK_EVENT_COLUMNS, agg_walk
from jobs.spark.frames import checkpoint_frame, release_frame
from jobs.timing import timed
from schemas.event_types import OBSERVATION_TYPES
from schemas.events import EVENTS_TABLE_SCHEMA
from schemas.routes import (
    BROKER_ADDR_HISTORY_SCHEMA,
    CLUSTER_HISTORY_SCHEMA,
    FILTER_SERVER_HISTORY_SCHEMA,
    NS_RUNS_SCHEMA,
    NS_STATE_SCHEMA,
    PARTITION_BY,
    TOPIC_ROUTE_HISTORY_SCHEMA,
)

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class RebuildResult:
    """What a day's rebuild did.

    Attributes:
        day: the UTC day.
        servers: name servers rebuilt (with events that day, or carried from the day before).
        events: events read.
        interesting_events: events walked one by one.
        started_without_state: servers with no previous-day state whose day did not begin with
            ``ns_start``: their tables start empty, so routes registered before the lake began are
            missing until re-registered (a finding for the lead's report).
        unresolved_topics: 103 events whose topic list was never logged (applied with no topics).
        observed: observed name servers (``nsaudit collect`` streams) rebuilt from their observations.
        resolution_ms: per observed server, its poll interval (None when unknown).
    """

    day: dt.date
    servers: tuple[str, ...]
    events: int
    interesting_events: int
    started_without_state: tuple[str, ...]
    unresolved_topics: int
    observed: tuple[str, ...] = ()
    resolution_ms: tuple[tuple[str, int | None], ...] = ()

    @property
    def notes(self) -> list[str]:
        """The report's line on observed servers: which, and the resolution of their tables."""
        if not self.observed:
            return []
        each = ", ".join(f"{ns} ({'unknown' if ms is None else f'{ms} ms'})" for ns, ms in self.resolution_ms)
        return [f"observed name servers, tables as exact as their poll interval: {each}"]


def run_rebuild(spark: SparkSession, lake_dir: str, day: dt.date, config: Config | None = None) -> RebuildResult:
    """Rebuild ``day`` from the lake's ``events`` and the day before's ``ns_state``; replaces the
    day in every rebuilt table (a rerun gives identical rows). ``route_snapshots`` is the next stage,
    :func:`jobs.snapshots.run_snapshots`, which reads what this wrote.

    Args:
        config: the run's configuration; the rebuild has no settings of its own and takes it so
            every stage is called the same way.

    Raises:
        FileNotFoundError: the lake has no ``events`` table.
    """
    day_df = read_table(spark, lake.table_path(lake_dir, lake.EVENTS), EVENTS_TABLE_SCHEMA, where={"date": day})
    is_observation = F.col("type").isin(*OBSERVATION_TYPES)
    # what nsaudit collect saw on other servers has no route table of the stream's own to walk: it
    # is rebuilt as a step function of the observations (jobs.rebuild.observed)
    events_df = with_ts_ms(day_df.where(~is_observation)).select(*WALK_EVENT_COLUMNS)
    observed_df = with_ts_ms(day_df.where(is_observation)).select(*OBSERVED_EVENT_COLUMNS)
    return rebuild_day(events_df, read_previous_state(spark, lake_dir, day), lake_dir, day, observed_df)


def read_previous_state(spark: SparkSession, lake_dir: str, day: dt.date) -> DataFrame:
    """``ns_state`` rows of the day before ``day`` (none when the lake has no such table yet).

    A lake written before ``ns_state`` gained its nullable columns (``observed``, ``resolution_ms``)
    gets them first, null in the older rows, as the day's write would add them: reading it with the
    declared schema would otherwise refuse the table.
    """
    evolve_table_schema(lake.table_path(lake_dir, lake.NS_STATE), NS_STATE_SCHEMA)
    return read_or_empty(spark, lake_dir, lake.NS_STATE, NS_STATE_SCHEMA, where={"date": day - dt.timedelta(days=1)})


def rebuild_day(
    events_df: DataFrame, prev_state_df: DataFrame, lake_dir: str, day: dt.date, observed_df: DataFrame | None = None
) -> RebuildResult:
    """Walk one day's events (``WALK_EVENT_COLUMNS``, ``ts`` in ms) from the previous states, add the
    observed servers' step functions (``observed_df``: ``OBSERVED_EVENT_COLUMNS``, ``ts`` in ms) and
    replace the day in the rebuilt tables."""
    blocks_df = keys_df = walk_df = epochs_df = entries_df = None
    observed_state = F.coalesce(F.col("observed"), F.lit(False))
    prev_resolution_df = prev_state_df.where(observed_state).select(
        "ns", F.col("resolution_ms").alias("prev_resolution_ms")
    )
    prev_state_df = prev_state_df.where(~observed_state)
    if observed_df is None:
        observed_df = events_df.sparkSession.createDataFrame([], _OBSERVED_EMPTY_SCHEMA)
    try:
        with timed(log, "rebuild", "observed"):
            epochs_df = checkpoint_frame(with_epochs(observed_df, prev_resolution_df))
            entries_df = checkpoint_frame(with_entry_intervals(epochs_df))
        observed_runs_df = select_observed_runs(epochs_df, day)
        observed = {
            lake.TOPIC_ROUTE_HISTORY: select_observed_topic_routes(entries_df, day),
            lake.BROKER_ADDR_HISTORY: select_observed_broker_addrs(entries_df, day),
            lake.CLUSTER_HISTORY: select_observed_clusters(entries_df, day),
            lake.FILTER_SERVER_HISTORY: select_observed_filter_servers(entries_df, day),
            lake.NS_RUNS: observed_runs_df,
            lake.NS_STATE: select_observed_state(epochs_df, observed_runs_df, day),
        }
        # Compute the small intermediate results one after the other, each cut from its plan
        # (checkpoint_frame): each is read by several branches of the next plan, which would
        # otherwise re-derive it from the day's events in every branch (a plan of a hundred scans
        # of the events, and a huge task binary).
        with timed(log, "rebuild", "blocks"):
            blocks_df = checkpoint_frame(agg_blocks(events_df))
        with timed(log, "rebuild", "interesting keys"):
            keys_df = checkpoint_frame(select_interesting_keys(events_df, blocks_df))
        with timed(log, "rebuild", "walk"):
            # walk once; the writes read the walk's rows
            walk_df = checkpoint_frame(agg_walk(events_df, blocks_df, prev_state_df, day, keys_df))
        # the walk's rows are all the writes read: free the rest before them
        for df in (blocks_df, keys_df):
            release_frame(df)
        blocks_df = keys_df = None
        tables = (
            (lake.TOPIC_ROUTE_HISTORY, select_topic_route_history, TOPIC_ROUTE_HISTORY_SCHEMA),
            (lake.BROKER_ADDR_HISTORY, select_broker_addr_history, BROKER_ADDR_HISTORY_SCHEMA),
            (lake.CLUSTER_HISTORY, select_cluster_history, CLUSTER_HISTORY_SCHEMA),
            (lake.FILTER_SERVER_HISTORY, select_filter_server_history, FILTER_SERVER_HISTORY_SCHEMA),
            (lake.NS_RUNS, select_ns_runs, NS_RUNS_SCHEMA),
            (lake.NS_STATE, select_ns_state, NS_STATE_SCHEMA),
        )
        with timed(log, "rebuild", "write tables"):
            for name, select, schema in tables:
                # validity intervals: a row per change of the day, few enough for one task
                rows_df = select(walk_df, day).unionByName(observed[name])
                replace_day(rows_df, lake_dir, name, day, schema, partition_by=PARTITION_BY, few_rows=True)
    finally:
        for cached_df in (blocks_df, keys_df, walk_df, epochs_df, entries_df):
            if cached_df is not None:
                release_frame(cached_df)
    return _result(lake_dir, day)


def _result(lake_dir: str, day: dt.date) -> RebuildResult:
    """The run's counts, read back from the ``ns_state`` rows it wrote (one per server)."""
    columns = [
        "ns",
        "events",
        "interesting_events",
        "started_without_state",
        "unresolved_topics",
        "observed",
        "resolution_ms",
    ]
    rows = read_day_arrow(lake_dir, lake.NS_STATE, day, columns).to_pylist()
    own = [r for r in rows if not r["observed"]]
    observed = [r for r in rows if r["observed"]]
    return RebuildResult(
        day=day,
        servers=tuple(sorted(r["ns"] for r in own)),
        events=sum(r["events"] for r in own),
        interesting_events=sum(r["interesting_events"] for r in own),
        started_without_state=tuple(sorted(r["ns"] for r in own if r["started_without_state"])),
        unresolved_topics=sum(r["unresolved_topics"] for r in own),
        observed=tuple(sorted(r["ns"] for r in observed)),
        resolution_ms=tuple(sorted((r["ns"], r["resolution_ms"]) for r in observed)),
    )


# the observation columns of the events table, for a rebuild given no observations
_OBSERVED_EMPTY_SCHEMA = T.StructType(
    [EVENTS_TABLE_SCHEMA[c] for c in OBSERVED_EVENT_COLUMNS if c != "ts"] + [T.StructField("ts", T.LongType(), False)]
)
