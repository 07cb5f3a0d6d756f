"""What to log about one observed server, round by round (no I/O, no clock: ``now`` is an argument).

:class:`ObservedServer` turns the rounds of one server into the events of its stream
(docs/event-log.md, Observations): ``observe_start`` once; a full snapshot (``observe_snapshot``
followed by one ``observed_broker`` per broker name and one ``observed_route`` per topic) after the
start, at the first round of each UTC day and at the first answer after a failure; otherwise only
the brokers and routes that changed since the previous round; one ``observe_error`` when the
server stops answering; ``observe_stop`` at the end.

Example:
    >>> server = ObservedServer("10.0.0.1:9876", interval_ms=10_000)
    >>> [e["type"] for e in server.start(now=0)]
    ['observe_start']
    >>> [e["type"] for e in server.observed(ServerView({}, {"T": None}), now=5, round_no=1)]
    ['observe_snapshot', 'observed_route']
    >>> server.observed(ServerView({}, {"T": None}), now=9, round_no=2)
    []
"""

from __future__ import annotations

from typing import Any

from nameserver.collect.view import ServerView
from nameserver.events import (
    observe_error_event,
    observe_snapshot_event,
    observe_start_event,
    observe_stop_event,
    observed_broker_event,
    observed_route_event,
)

DAY_MS = 86_400_000

# observe_snapshot reasons
START, DAY, RECOVERED = "start", "day", "recovered"


class ObservedServer:
    """One observed name server's last known view and the events that describe each new round.

    Args:
        namesrv_addr: ``host:port`` as given to the collector.
        interval_ms: the polling interval, logged in ``observe_start``.

    Attributes:
        view: the last view logged, None before the first answer and after a failure.
        failing: the server's last round failed (an ``observe_error`` was logged for it).
    """

    def __init__(self, namesrv_addr: str, interval_ms: int) -> None:
        self.namesrv_addr = namesrv_addr
        self.interval_ms = interval_ms
        self.view: ServerView | None = None
        self.failing = False
        self._snapshot_day: int | None = None
        self._started = False

    def start(self, now: int) -> list[dict[str, Any]]:
        """``observe_start``: the stream of a collector run begins (no state known yet)."""
        self._started = True
        return [observe_start_event(now, self.namesrv_addr, self.interval_ms)]

    def observed(self, view: ServerView, now: int, round_no: int) -> list[dict[str, Any]]:
        """The events for a round that got every answer: a snapshot or the changes.

        Args:
            view: what the server answered.
            now: epoch ms the round's answers were in (every event of the round carries it).
            round_no: the round's number, from 1.
        """
        if not self._started:
            raise RuntimeError("observed() before start()")
        day = now // DAY_MS
        if self.view is None:
            events = self._snapshot(view, now, round_no, RECOVERED if self.failing else START)
        elif day != self._snapshot_day:
            events = self._snapshot(view, now, round_no, DAY)
        else:
            events = changes(self.view, view, now, round_no)
        self.view, self.failing = view, False
        return events

    def failed(self, now: int, round_no: int, reason: str, detail: str) -> list[dict[str, Any]]:
        """The events for a round that did not get every answer: ``observe_error`` the first time.

        From then on nothing is known of the server's tables until the next full snapshot, so
        repeated failures log nothing more (the collector's stderr shows each retry).
        """
        if self.failing:
            return []
        self.view, self.failing = None, True
        return [observe_error_event(now, self.namesrv_addr, round_no, reason, detail)]

    def stop(self, now: int, reason: str) -> list[dict[str, Any]]:
        """``observe_stop``: the collector stops observing this server."""
        return [observe_stop_event(now, reason)]

    def _snapshot(self, view: ServerView, now: int, round_no: int, reason: str) -> list[dict[str, Any]]:
        self._snapshot_day = now // DAY_MS
        head = observe_snapshot_event(
            now, self.namesrv_addr, round_no, reason, len(view.broker_addr_table), len(view.routes)
        )
        return (
            [head]
            + [broker_event(name, entry, now, round_no) for name, entry in sorted(view.broker_addr_table.items())]
            + [route_event(topic, route, now, round_no) for topic, route in sorted(view.routes.items())]
        )


def broker_event(broker_name: str, entry: dict[str, Any] | None, now: int, round_no: int) -> dict[str, Any]:
    """``observed_broker`` for one broker name; ``entry`` None: it left the cluster info."""
    if entry is None:
        return observed_broker_event(now, round_no, broker_name, None, None)
    return observed_broker_event(now, round_no, broker_name, entry["cluster"], entry["broker_addrs"])


def route_event(topic: str, route: dict[str, Any] | None, now: int, round_no: int) -> dict[str, Any]:
    """``observed_route`` for one topic; ``route`` None: TOPIC_NOT_EXIST or no longer listed."""
    if route is None:
        return observed_route_event(now, round_no, topic, None, None, None)
    return observed_route_event(
        now, round_no, topic, route["queue_datas"], route["broker_datas"], route["filter_server_table"]
    )


def changes(before: ServerView, after: ServerView, now: int, round_no: int) -> list[dict[str, Any]]:
    """The ``observed_broker`` and ``observed_route`` events that turn ``before`` into ``after``.

    A topic that left the topic list and a topic answered TOPIC_NOT_EXIST both read as a null
    route, so moving between the two logs nothing.
    """
    events = []
    for name in sorted(before.broker_addr_table.keys() | after.broker_addr_table.keys()):
        old, new = before.broker_addr_table.get(name), after.broker_addr_table.get(name)
        if old != new:
            events.append(broker_event(name, new, now, round_no))
    for topic in sorted(before.routes.keys() | after.routes.keys()):
        old, new = before.routes.get(topic), after.routes.get(topic)
        if old != new:
            events.append(route_event(topic, new, now, round_no))
    return events
