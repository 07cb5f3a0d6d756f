"""The live judgement and the nightly audit use the same parameters: each of
``nameserver.collect.live.rules`` equals the audit's own definition (importing the audit's modules
starts no Spark)."""

from __future__ import annotations

import dataclasses

import pytest

from common.config import AuditConfig, Config, NameServerConfig
from jobs.analytics.distribution import perm_changes
from jobs.analytics.distribution.exact import REGISTRATION_PERIOD_MS
from jobs.analytics.distribution.kinds import SEVERITY as DISTRIBUTION_SEVERITY
from jobs.analytics.divergence.grace import derive_grace, with_poll_interval
from jobs.analytics.incidents.grouping import INCIDENT_GAP_MS
from nameserver.collect.live import perms, rules
from schemas.findings import SEVERITIES


def test_the_constants_are_the_audits():
    assert rules.INCIDENT_GAP_MS == INCIDENT_GAP_MS
    assert rules.REGISTRATION_PERIOD_MS == REGISTRATION_PERIOD_MS
    assert rules.SEVERITIES == SEVERITIES
    for kind in ("no_writable_queue", "read_write_mismatch", "write_perm_wiped", "no_master", "topic_perm_changed"):
        assert rules.SEVERITY[kind] == DISTRIBUTION_SEVERITY[kind], kind
    # who set a perm: the audit reads the live judge's tolerances
    assert (perm_changes.ROUND_SLACK_MS, perm_changes.DEFAULT_POLL_MS) == (rules.ROUND_SLACK_MS, rules.DEFAULT_POLL_MS)
    assert (perm_changes.REGISTERED, perm_changes.ADMIN, perm_changes.UNKNOWN) == (
        perms.REGISTERED,
        perms.ADMIN,
        perms.UNKNOWN,
    )


@pytest.mark.parametrize(
    "audit, scan, interval",
    [
        (AuditConfig(), 10_000, 10_000),
        (AuditConfig(heartbeat_period_ms=10_000, clock_skew_ms=0), 10_000, 2_000),
        (AuditConfig(divergence_grace_ms=300), 10_000, 150),
        (AuditConfig(heartbeat_period_ms=45_000, clock_skew_ms=5_000), 3_000, 15_000),
    ],
)
def test_the_live_grace_is_the_nightly_grace_of_a_day_of_observed_servers(audit, scan, interval):
    config = dataclasses.replace(Config(), audit=audit, nameserver=NameServerConfig(scan_interval_ms=scan))
    # a day of observed servers only: no heartbeat or ns_start to measure, the poll interval added
    nightly = with_poll_interval(derive_grace(None, None, config), interval).grace_ms
    assert rules.live_grace_ms(config, interval) == nightly
