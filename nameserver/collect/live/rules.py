"""The parameters live judgement shares with the nightly audit.

Each is the nightly audit's own value; ``tests/nameserver/collect/live/test_live_rules.py`` checks that the
audit's definitions (``jobs.analytics``) still equal these, so the two cannot drift apart. The
tolerances of who set a permission (:data:`ROUND_SLACK_MS`, :data:`DEFAULT_POLL_MS`) are defined
here only: ``jobs.analytics.distribution.perm_changes`` imports them.
"""

from __future__ import annotations

from collections.abc import Iterable

from common.config import Config

# findings of one cause key whose spans are this close are one incident
# (jobs.analytics.incidents.grouping.INCIDENT_GAP_MS)
INCIDENT_GAP_MS = 180_000
# a group whose BrokerData appears without its master and gets it within this is starting, not a
# no_master (jobs.analytics.distribution.exact.REGISTRATION_PERIOD_MS)
REGISTRATION_PERIOD_MS = 30_000
# an observed server's answers of one round come in over the round: a change every server holding
# a (topic, group) shows within twice the poll interval and this of each other is one registration
ROUND_SLACK_MS = 2_000
DEFAULT_POLL_MS = 10_000  # nsaudit collect's default interval, for a stream whose interval is unknown
SEVERITIES = ("info", "warning", "critical")  # schemas.findings.SEVERITIES, mildest first
# the kinds judged live and their severity (jobs.analytics.distribution.kinds.SEVERITY and the
# liveness and consistency stages); ns_divergence is critical when a route is missing on most servers
SEVERITY = {
    "no_writable_queue": "critical",
    "read_write_mismatch": "warning",
    "write_perm_wiped": "warning",
    "no_master": "warning",
    "observed_broker_gone": "warning",
    "observed_server_down": "warning",
    "ns_divergence": "warning",
    "topic_perm_changed": "info",  # warning when the topic is left with no writable queue
}
LIVE_KINDS = tuple(SEVERITY)
INSTANT_KINDS = ("topic_perm_changed",)  # a finding of an instant: it starts and ends there


def live_grace_ms(config: Config, interval_ms: int) -> int:
    """The divergence grace of the nightly audit for a day of observed servers polled every
    ``interval_ms``: ``audit.divergence_grace_ms`` when set, else ``audit.heartbeat_period_ms`` +
    ``nameserver.scan_interval_ms`` + ``audit.clock_skew_ms`` (no heartbeat or ``ns_start`` to
    measure), plus the poll interval (jobs.analytics.divergence.grace).

    Example:
        >>> live_grace_ms(Config(), 10_000)  # 30000 + 10000 + 2000 + 10000
        52000
    """
    audit = config.audit
    if audit.divergence_grace_ms is not None:
        base = int(audit.divergence_grace_ms)
    else:
        base = audit.heartbeat_period_ms + config.nameserver.scan_interval_ms + audit.clock_skew_ms
    return base + int(interval_ms)


def worst(severities: Iterable[str]) -> str:
    """The worst of ``severities`` (``info`` for none)."""
    return max(severities, key=SEVERITIES.index, default="info")
