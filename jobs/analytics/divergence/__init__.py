"""Divergence between name servers: the intervals in which they answer differently (``ns_divergences``).

Name servers never talk to each other (docs/nameserver-semantics.md §7): each holds what the
brokers told it, so two servers may disagree for up to one registration period plus one scan
period. Longer means something is wrong. The kinds of disagreement are in
:mod:`jobs.analytics.divergence.kinds`; servers that are down (outside their ``ns_runs``) are left
out. History rows are clipped to their UTC day, and ``valid_to_ts`` / ``end_ts`` null means still
valid at the day's end.
"""

from jobs.analytics.divergence.episodes import agg_episodes, build_episodes, select_divergences
from jobs.analytics.divergence.facts import build_keyed_facts
from jobs.analytics.divergence.findings import CATEGORY, agg_divergence_findings
from jobs.analytics.divergence.grace import Grace, agg_grace_inputs, derive_grace, grace_note
from jobs.analytics.divergence.kinds import KINDS
from jobs.analytics.divergence.span import Span
from jobs.analytics.divergence.stage import DivergenceResult, resolve_grace, run_divergence
from jobs.analytics.divergence.up_periods import agg_up_periods

__all__ = [
    "CATEGORY",
    "DivergenceResult",
    "Grace",
    "KINDS",
    "Span",
    "agg_divergence_findings",
    "agg_episodes",
    "agg_grace_inputs",
    "agg_up_periods",
    "build_episodes",
    "build_keyed_facts",
    "derive_grace",
    "grace_note",
    "resolve_grace",
    "run_divergence",
    "select_divergences",
]
