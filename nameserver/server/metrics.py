"""``nsaudit nameserver``'s metrics (docs/collect.md, "Metrics and alerts"): its tables, the
requests it handled by code, what it refused, its event log and its connections.

Read from the controller's state at scrape time (a few counters and table sizes: nothing is
walked), so serving them costs the name server nothing between scrapes. They are read from the
endpoint's thread (:class:`~nameserver.metrics.endpoint.EndpointThread`): only sizes, numbers and
whole copies of the counters' dicts, each one read the event loop's thread cannot tear.
"""

from __future__ import annotations

import time

from nameserver import package_version
from nameserver.codec import RequestCode
from nameserver.metrics.exposition import Family, render
from nameserver.server.controller import NameServerController

_CODE_NAMES = {int(c): c.name for c in RequestCode}


def server_families(controller: NameServerController, now_ms: int | None = None) -> list[Family]:
    """The name server's families now."""
    now_ms = time.time_ns() // 1_000_000 if now_ms is None else now_ms
    ns = controller.ns_id
    return [
        *_table_families(controller, ns),
        *_request_families(controller, ns),
        *_event_log_families(controller, ns, now_ms),
        *_connection_families(controller, ns),
    ]


def _gauge(name: str, text: str, value: float, ns: str, **labels: str) -> Family:
    """A one-sample gauge."""
    family = Family(name, "gauge", text)
    family.add(value, ns=ns, **labels)
    return family


def _table_families(controller: NameServerController, ns: str) -> list[Family]:
    """The server's identity and the sizes of its route tables."""
    routes = controller.routes
    return [
        _gauge(
            "nsaudit_nameserver_info", "1, with the server id and software version", 1, ns, version=package_version()
        ),
        _gauge(
            "nsaudit_nameserver_start_timestamp_seconds",
            "when this run started, Unix time",
            controller.start_ts / 1000,
            ns,
        ),
        _gauge(
            "nsaudit_nameserver_live_brokers",
            "broker addresses in broker_live_table",
            len(routes.broker_live_table),
            ns,
        ),
        _gauge(
            "nsaudit_nameserver_broker_groups", "broker names in broker_addr_table", len(routes.broker_addr_table), ns
        ),
        _gauge("nsaudit_nameserver_topics", "topics in topic_queue_table", len(routes.topic_queue_table), ns),
    ]


def _request_families(controller: NameServerController, ns: str) -> list[Family]:
    """The requests handled, by request code, and those refused, by reason."""
    requests = Family(
        "nsaudit_nameserver_requests_total",
        "counter",
        "requests handled by request code (REGISTER_BROKER "
        "103 registrations, GET_ROUTEINFO_BY_TOPIC 105 lookups, ...), since the start",
    )
    for code, count in sorted(dict(controller.requests_by_code).items()):
        requests.add(
            count, ns=ns, code=str(code) if code in _CODE_NAMES else "other", name=_CODE_NAMES.get(code, "unknown")
        )
    rejected = Family(
        "nsaudit_nameserver_rejected_total",
        "counter",
        "requests and connections refused, by the reason "
        "of their rejected event (no_permission, malformed_frame, connection_limit, ...)",
    )
    for reason, count in sorted(dict(controller.journal.rejected).items()):
        rejected.add(count, ns=ns, reason=reason)
    return [requests, rejected]


def _event_log_families(controller: NameServerController, ns: str, now_ms: int) -> list[Family]:
    """The event log: its outages, the changes refused during them and how far it is written."""
    journal, writer = controller.journal, controller.writer
    outage = journal.outage
    return [
        _gauge(
            "nsaudit_nameserver_event_log_writable",
            "1 while the event log can be written; 0 during a full-disk outage (route changes refused)",
            int(outage is None),
            ns,
        ),
        _gauge(
            "nsaudit_nameserver_event_log_outage_seconds",
            "how long the current outage has lasted (0: none)",
            0 if outage is None else max(now_ms - outage.since_ts, 0) / 1000,
            ns,
        ),
        gauge_counter(
            "nsaudit_nameserver_event_log_outages_total", "full-disk outages since the start", journal.outages, ns
        ),
        gauge_counter(
            "nsaudit_nameserver_refused_while_log_unavailable_total",
            "route changes refused (SYSTEM_ERROR) because the event log could not be written",
            journal.refused_before + (outage.refused if outage is not None else 0),
            ns,
        ),
        _gauge(
            "nsaudit_nameserver_event_log_last_seq",
            "seq of the last event appended",
            writer.last_seq if writer is not None else 0,
            ns,
        ),
        _gauge(
            "nsaudit_nameserver_event_log_durable_seq",
            "seq up to which every event is durable",
            writer.durable_seq if writer is not None else 0,
            ns,
        ),
    ]


def _connection_families(controller: NameServerController, ns: str) -> list[Family]:
    """The connections open and the bytes they buffer."""
    return [
        _gauge(
            "nsaudit_nameserver_buffered_bytes",
            "bytes of unfinished frames buffered across all connections (bounded by max_buffered_bytes)",
            controller.admission.buffered_bytes,
            ns,
        ),
        _gauge("nsaudit_nameserver_connections", "connections open now", controller.connections, ns),
    ]


def gauge_counter(name: str, text: str, value: int, ns: str) -> Family:
    """A one-sample counter."""
    family = Family(name, "counter", text)
    family.add(value, ns=ns)
    return family


def server_body(controller: NameServerController) -> bytes:
    """The exposition of :func:`server_families` now."""
    return render(server_families(controller))
