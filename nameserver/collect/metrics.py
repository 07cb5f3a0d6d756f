"""``nsaudit collect``'s metrics: each observed server's state, the disagreements between them and
the live incidents, as Prometheus families (docs/collect.md, "Metrics and alerts").

Every family is computed from what the pollers and the live judge already hold: a scrape costs a
walk over the open findings and incidents, never over the servers' topics. Families whose labels
name subjects (topics, broker names and addresses) hold only the subjects in trouble now, at most
:data:`MAX_SERIES` each; their count gauges still count every one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import cast

from nameserver.collect.live.divergence import (
    ABSENT,
    BROKER_ADDRS_MISMATCH,
    BROKER_MISSING,
    QUEUE_DATA_MISMATCH,
    ROUTE_MISSING,
)
from nameserver.collect.live.findings import FindingKey, LiveFinding
from nameserver.collect.live.judge import LiveJudge
from nameserver.collect.poller import ServerPoller
from nameserver.collect.rounds import BAD_ANSWER, CONNECT_FAILED, CONNECTION_CLOSED, ERROR_ANSWER, TIMEOUT
from nameserver.metrics.exposition import Family

MAX_SERIES = 500
REASONS = (CONNECT_FAILED, TIMEOUT, CONNECTION_CLOSED, BAD_ANSWER, ERROR_ANSWER)
DIVERGENCE_KINDS = (ROUTE_MISSING, BROKER_MISSING, QUEUE_DATA_MISMATCH, BROKER_ADDRS_MISMATCH)
PER_SERVER_KINDS = (
    "no_writable_queue",
    "read_write_mismatch",
    "no_master",
    "write_perm_wiped",
    "observed_broker_gone",
    "observed_server_down",
)

# per-subject gauges of the live findings: name, help, the finding kind (or divergence kind) and labels
_SUBJECT_FAMILIES = (
    (
        "nsaudit_write_perm_wiped",
        "1 while a server lacks write perm on a broker group's queues that were writable "
        "earlier or are writable on another server (write_perm_wiped)",
        "write_perm_wiped",
        ("broker_name",),
    ),
    (
        "nsaudit_no_writable_queue",
        "1 while a producer asking this server gets no writable queue of the topic (no_writable_queue)",
        "no_writable_queue",
        ("topic",),
    ),
    (
        "nsaudit_no_master",
        "1 while the server's cluster info has the broker group without its master (no_master)",
        "no_master",
        ("broker_name",),
    ),
    (
        "nsaudit_observed_broker_gone",
        "1 while the server no longer lists a broker address it listed (observed_broker_gone)",
        "observed_broker_gone",
        ("broker_addr", "broker_name"),
    ),
    (
        "nsaudit_read_write_mismatch",
        "1 while a topic has fewer read than write queues on a group (read_write_mismatch)",
        "read_write_mismatch",
        ("topic",),
    ),
)
_DIVERGENCE_FAMILIES = (
    (
        "nsaudit_topic_missing",
        "1 per server lacking a topic's route that other servers have, beyond the grace (ns_divergence route_missing)",
        ROUTE_MISSING,
        ("topic",),
    ),
    (
        "nsaudit_topic_routes_differ",
        "1 per server off the majority's QueueData of a topic and broker group, beyond "
        "the grace (ns_divergence queue_data_mismatch)",
        QUEUE_DATA_MISMATCH,
        ("topic", "broker_name"),
    ),
    (
        "nsaudit_broker_missing",
        "1 per server lacking a broker address another server lists, beyond the grace (ns_divergence broker_missing)",
        BROKER_MISSING,
        ("broker_addr", "broker_name"),
    ),
    (
        "nsaudit_broker_addrs_differ",
        "1 per server off the majority's addresses of a broker group, beyond the grace "
        "(ns_divergence broker_addrs_mismatch)",
        BROKER_ADDRS_MISMATCH,
        ("broker_name",),
    ),
)


def server_families(pollers: Sequence[ServerPoller], now_ms: int, unwritable: dict[str, int] | None) -> list[Family]:
    """Per observed server: up, the last good round's age and duration, what it lists, rounds and failures.

    Args:
        unwritable: per server, its open ``no_writable_queue`` findings (None: not judged live).
    """
    fam = _observed_families()
    for poller in pollers:
        ns = poller.target.ns
        view = poller.view
        fam["nsaudit_observed_up"].add(int(view is not None), ns=ns, namesrv_addr=poller.target.addr)
        if poller.last_ok_ms is not None:
            fam["nsaudit_observed_last_success_timestamp_seconds"].add(poller.last_ok_ms / 1000, ns=ns)
            fam["nsaudit_observed_last_success_age_seconds"].add(max(now_ms - poller.last_ok_ms, 0) / 1000, ns=ns)
            assert poller.last_round_s is not None  # set with last_ok_ms
            fam["nsaudit_observed_round_duration_seconds"].add(round(poller.last_round_s, 6), ns=ns)
        if view is not None:
            table = view.broker_addr_table
            fam["nsaudit_observed_brokers"].add(sum(len(e["broker_addrs"]) for e in table.values()), ns=ns)
            fam["nsaudit_observed_broker_groups"].add(len(table), ns=ns)
            fam["nsaudit_observed_topics"].add(len(view.routes), ns=ns)
            fam["nsaudit_observed_groups_without_master"].add(
                sum(
                    1
                    for e in table.values()
                    if e["broker_addrs"] and all(a["broker_id"] != 0 for a in e["broker_addrs"])
                ),
                ns=ns,
            )
            if unwritable is not None:
                fam["nsaudit_observed_topics_without_writable_queue"].add(unwritable.get(ns, 0), ns=ns)
        fam["nsaudit_observed_rounds_total"].add(poller.rounds, ns=ns)
        for reason in REASONS:
            fam["nsaudit_observed_round_failures_total"].add(
                poller.failures_by_reason.get(reason, 0), ns=ns, reason=reason
            )
    return list(fam.values())


def _observed_families() -> dict[str, Family]:
    """The per-server families, empty, by name in the order they are served."""
    return {
        name: Family(name, kind, text)
        for name, kind, text in (
            ("nsaudit_observed_up", "gauge", "1 when the server's last round got every answer, else 0"),
            (
                "nsaudit_observed_last_success_timestamp_seconds",
                "gauge",
                "when the last round that got every answer ended, Unix time",
            ),
            (
                "nsaudit_observed_last_success_age_seconds",
                "gauge",
                "seconds since the last round that got every answer",
            ),
            ("nsaudit_observed_round_duration_seconds", "gauge", "how long the last good round took, seconds"),
            ("nsaudit_observed_brokers", "gauge", "broker addresses in the server's cluster info (last good round)"),
            ("nsaudit_observed_broker_groups", "gauge", "broker names in the server's cluster info (last good round)"),
            ("nsaudit_observed_topics", "gauge", "topics in the server's topic list (last good round)"),
            ("nsaudit_observed_groups_without_master", "gauge", "broker groups in the cluster info without a master"),
            (
                "nsaudit_observed_topics_without_writable_queue",
                "gauge",
                "topics for which a producer asking this server gets no writable queue (open no_writable_queue)",
            ),
            (
                "nsaudit_observed_rounds_total",
                "counter",
                "rounds of the server since the collector started, failed ones included",
            ),
            (
                "nsaudit_observed_round_failures_total",
                "counter",
                "failed rounds since the collector started, by reason",
            ),
        )
    }


def unwritable_counts(judge: LiveJudge) -> dict[str, int]:
    """Per server, its open ``no_writable_queue`` findings."""
    return dict(Counter(key[1] for key in judge.book.open if key[0] == "no_writable_queue"))


def live_families(
    judge: LiveJudge, opened_total: Counter[str], grace_ms: int, max_series: int = MAX_SERIES
) -> list[Family]:
    """The open live findings per subject, the divergences beyond the grace and the live incidents
    (made on the judge's thread after each round, then served as they are)."""
    out: list[Family] = []
    open_findings = sorted(judge.book.open.items(), key=lambda kv: repr(kv[0]))
    counts = Family(
        "nsaudit_live_findings",
        "gauge",
        "open live findings by kind (the nightly audit's finding kinds of observed servers)",
    )
    by_kind = Counter(key[0] if key[0] != "ns_divergence" else "ns_divergence" for key, _ in open_findings)
    for kind in PER_SERVER_KINDS + ("ns_divergence",):
        counts.add(by_kind[kind], kind=kind)
    out.append(counts)
    for name, text, kind, labels in _SUBJECT_FAMILIES:
        family = Family(name, "gauge", text, max_series)
        for key, finding in open_findings:
            if key[0] == kind:
                values = {
                    "broker_addr": finding.subject,
                    "broker_name": finding.detail.get("broker_name", finding.subject),
                    "topic": finding.subject,
                }
                family.add(1, **{label: values[label] for label in labels}, ns=cast(str, finding.ns))  # a server's
        out.append(family)
    divergences = Family(
        "nsaudit_divergences",
        "gauge",
        "disagreements between the observed servers lasting longer than the grace, by kind",
    )
    open_by_kind = Counter(key[1][0] for key, _ in open_findings if key[0] == "ns_divergence")
    for kind in DIVERGENCE_KINDS:
        divergences.add(open_by_kind[kind], kind=kind)
    out.append(divergences)
    out += _divergence_subject_families(judge, open_findings, max_series)
    out += incident_families(judge, opened_total, max_series)
    grace = Family(
        "nsaudit_collect_divergence_grace_seconds",
        "gauge",
        "the divergence grace of the live judgement (the nightly audit's for these servers)",
    )
    grace.add(grace_ms / 1000)
    out.append(grace)
    return out


def _divergence_subject_families(
    judge: LiveJudge, open_findings: list[tuple[FindingKey, LiveFinding]], max_series: int
) -> list[Family]:
    """The per-subject gauges of the divergences beyond the grace: one series per server in each."""
    out: list[Family] = []
    for name, text, kind, labels in _DIVERGENCE_FAMILIES:
        family = Family(name, "gauge", text, max_series)
        for key, finding in open_findings:
            if key[0] != "ns_divergence" or key[1][0] != kind:
                continue
            what = key[1][1]
            values = {
                "topic": what[0] if kind == QUEUE_DATA_MISMATCH else what,
                "broker_name": what[1] if kind == QUEUE_DATA_MISMATCH else judge.addr_names.get(what, what),
                "broker_addr": what,
            }
            views = finding.detail.get("ns_views", {})
            servers = (
                [ns for ns, v in views.items() if v == ABSENT]
                if kind in (ROUTE_MISSING, BROKER_MISSING)
                else list(finding.servers)
            )
            for ns in servers:
                family.add(1, **{label: values[label] for label in labels}, ns=ns)
        out.append(family)
    return out


def incident_families(judge: LiveJudge, opened_total: Counter[str], max_series: int) -> list[Family]:
    """The live incidents open now (one series each, worst first) and counts by root cause."""
    # the alerting series carries only labels an incident keeps while open (its severity and servers
    # may grow: they are in the info series), so an alert's ``for:`` is not restarted by them
    incident = Family(
        "nsaudit_live_incident",
        "gauge",
        "1 while a live incident is open: root cause and subject as the nightly audit names them",
        max_series,
    )
    info = Family(
        "nsaudit_live_incident_info", "gauge", "1 per open live incident with its severity and servers now", max_series
    )
    start = Family(
        "nsaudit_live_incident_start_timestamp_seconds",
        "gauge",
        "when an open live incident began, Unix time",
        max_series,
    )
    counts: Counter[tuple[str, str]] = Counter()
    for found in judge.incidents.open_incidents():
        counts[(found.root_cause, found.severity)] += 1
        incident.add(1, root_cause=found.root_cause, subject=found.subject)
        info.add(
            1,
            root_cause=found.root_cause,
            subject=found.subject,
            severity=found.severity,
            servers=",".join(found.servers),
            incident_id=found.incident_id,
        )
        start.add(found.start_ms / 1000, root_cause=found.root_cause, subject=found.subject)
    totals = Family("nsaudit_live_incidents", "gauge", "open live incidents by root cause and severity")
    for (cause, severity), n in sorted(counts.items()):
        totals.add(n, root_cause=cause, severity=severity)
    opened = Family(
        "nsaudit_live_incidents_opened_total",
        "counter",
        "live incidents opened since the collector started, by root cause",
    )
    for cause, n in sorted(opened_total.items()):
        opened.add(n, root_cause=cause)
    return [incident, info, start, totals, opened]
