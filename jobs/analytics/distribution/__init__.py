"""Queue distribution audit: where each server's routes put the queues, and what is wrong with it.

Per snapshot instant, server and broker group (``queue_distribution``) or topic
(``topic_distribution``), and the ``distribution`` findings (the topic ones exact, from the
validity intervals); :mod:`jobs.analytics.distribution.stage`
runs it for a day.
"""

from jobs.analytics.distribution.composition import DistributionFrames, build_distribution
from jobs.analytics.distribution.end_of_day import agg_end_of_day_distribution, end_of_day_distribution
from jobs.analytics.distribution.exact import EXACT_KINDS, agg_exact_broker_data_runs, agg_exact_pieces, agg_exact_runs
from jobs.analytics.distribution.groups import agg_queue_distribution
from jobs.analytics.distribution.kinds import CATEGORY, SEVERITY
from jobs.analytics.distribution.moves import suggest_moves
from jobs.analytics.distribution.params import DistributionParams
from jobs.analytics.distribution.queue_data import with_queue_flags
from jobs.analytics.distribution.runs import agg_kind_runs, agg_runs, select_kind_runs
from jobs.analytics.distribution.stage import DistributionResult, run_distribution
from jobs.analytics.distribution.topics import (
    agg_topic_distribution,
    pieces_from_snapshots,
    topic_distribution_expansion,
)

__all__ = [
    "CATEGORY",
    "EXACT_KINDS",
    "SEVERITY",
    "DistributionFrames",
    "DistributionParams",
    "DistributionResult",
    "agg_end_of_day_distribution",
    "agg_exact_broker_data_runs",
    "agg_exact_pieces",
    "agg_exact_runs",
    "agg_kind_runs",
    "agg_queue_distribution",
    "agg_runs",
    "agg_topic_distribution",
    "build_distribution",
    "end_of_day_distribution",
    "pieces_from_snapshots",
    "run_distribution",
    "select_kind_runs",
    "suggest_moves",
    "topic_distribution_expansion",
    "with_queue_flags",
]
