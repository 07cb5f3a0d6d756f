"""One round against one name server over an open connection: 106, 206, then 105 per topic.

Only read-only requests are ever sent (:data:`READ_ONLY_CODES`): a QUERY_DATA_VERSION (322) whose
data version matches refreshes a broker's live entry and would hide a dead broker, and admin codes
change the tables being observed. Routes are asked for in the standard JSON form
(``acceptStandardJsonOnly`` and a request version of at least V4_9_4), paced evenly over a share of
the interval with at most ``concurrency`` in flight. Any failure ends the round with
:class:`ObserveFailure`; a partial round is never logged.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from nameserver.client import RemotingClient, RemotingError, route_request, simple_request
from nameserver.codec import SERVER_VERSION, RemotingCommand, RequestCode, ResponseCode, fastjson
from nameserver.collect.view import ServerView, cluster_view, route_entry

_T = TypeVar("_T")
# a route answer's body and the view entry made of it
RouteBody = tuple[bytes, dict[str, Any]]

READ_ONLY_CODES = frozenset(
    {
        RequestCode.GET_BROKER_CLUSTER_INFO,
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER,
        RequestCode.GET_ROUTEINFO_BY_TOPIC,
    }
)
V4_9_4 = 401  # MQVersion ordinal from which a name server answers routes in standard JSON

# observe_error reasons
CONNECT_FAILED = "connect_failed"
TIMEOUT = "timeout"
CONNECTION_CLOSED = "connection_closed"
BAD_ANSWER = "bad_answer"
ERROR_ANSWER = "error_answer"


class ObserveFailure(Exception):
    """A round that did not get every answer.

    Attributes:
        reason: one of the ``observe_error`` reasons (``connect_failed``, ``timeout``,
            ``connection_closed``, ``bad_answer``, ``error_answer``).
        detail: one line for a person.
    """

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True)
class RoundResult:
    """A round that got every answer.

    Attributes:
        view: what the server answered.
        requests: requests sent in the round.
        bodies: topic -> the body of its route answer and the entry made of it (the next round's
            ``known``).
    """

    view: ServerView
    requests: int
    bodies: dict[str, RouteBody] = field(default_factory=dict)


async def connect(host: str, port: int, timeout_s: float) -> RemotingClient:
    """Open the connection a server's rounds use.

    Raises:
        ObserveFailure: ``connect_failed`` or ``timeout``.
    """
    try:
        return await RemotingClient.connect(host, port, timeout=timeout_s)
    except TimeoutError:
        raise ObserveFailure(TIMEOUT, f"no connection within {timeout_s:g} s") from None
    except OSError as exc:
        raise ObserveFailure(CONNECT_FAILED, exc.strerror or str(exc)) from None


async def ask(client: RemotingClient, cmd: RemotingCommand, timeout_s: float) -> RemotingCommand:
    """Send one read-only request and wait for its answer.

    Raises:
        ValueError: ``cmd`` is not one of :data:`READ_ONLY_CODES` (a bug, never a server's fault).
        ObserveFailure: no answer in time, the connection ended, or the answer was not a frame.
    """
    if cmd.code not in READ_ONLY_CODES:
        raise ValueError(f"the collector never sends request code {cmd.code}")
    name = RequestCode(cmd.code).name
    try:
        return await client.request(cmd, timeout_s)
    except TimeoutError:
        raise ObserveFailure(TIMEOUT, f"no answer to {name} within {timeout_s:g} s") from None
    except RemotingError as exc:
        text = str(exc)
        reason = BAD_ANSWER if "malformed" in text else CONNECTION_CLOSED
        raise ObserveFailure(reason, f"{name}: {text}") from None


def _parsed(parse: Callable[[bytes], _T], answer: RemotingCommand, name: str) -> _T:
    if answer.code != ResponseCode.SUCCESS:
        raise ObserveFailure(ERROR_ANSWER, f"{name} answered code {answer.code} {answer.remark or ''}".rstrip())
    try:
        return parse(answer.body or b"{}")
    except (ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ObserveFailure(BAD_ANSWER, f"{name}: body not understood: {exc}") from None


async def observe_round(
    client: RemotingClient,
    timeout_s: float,
    concurrency: int,
    spread_s: float,
    known: Mapping[str, RouteBody] | None = None,
) -> RoundResult:
    """Ask one server everything a round needs.

    Args:
        client: an open connection to the server.
        timeout_s: the longest wait for each answer.
        concurrency: GET_ROUTEINFO_BY_TOPIC requests in flight at most.
        spread_s: the route requests start evenly over this many seconds (sooner is never
            needed; later happens when answers are slow).
        known: the previous round's :attr:`RoundResult.bodies`: a route answer whose body is
            byte for byte the one before is that entry again, not parsed anew. Most rounds change
            nothing, so a round then makes almost no new objects: parsing is a quarter of a
            round's CPU, and every object a round keeps for the next is one more for the garbage
            collector's full passes, which hold the interpreter (and a metrics scrape) meanwhile.

    Raises:
        ObserveFailure: the first failure; the other requests of the round are abandoned.
    """
    answer = await ask(client, simple_request(RequestCode.GET_BROKER_CLUSTER_INFO), timeout_s)
    brokers = cluster_view(_parsed(fastjson.parse_cluster_info, answer, "GET_BROKER_CLUSTER_INFO"))
    answer = await ask(client, simple_request(RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER), timeout_s)
    listed = _parsed(fastjson.parse_topic_list, answer, "GET_ALL_TOPIC_LIST_FROM_NAMESERVER")["topic_list"]
    topics = sorted({t for t in listed if isinstance(t, str)})
    bodies: dict[str, RouteBody] = {}
    routes = await _ask_routes(client, topics, timeout_s, concurrency, spread_s, known or {}, bodies)
    return RoundResult(ServerView(brokers, routes), 2 + len(topics), bodies)


async def _ask_routes(
    client: RemotingClient,
    topics: list[str],
    timeout_s: float,
    concurrency: int,
    spread_s: float,
    known: Mapping[str, RouteBody],
    bodies: dict[str, RouteBody],
) -> dict[str, dict[str, Any] | None]:
    routes: dict[str, dict[str, Any] | None] = {}
    loop = asyncio.get_running_loop()
    slots = asyncio.Semaphore(concurrency)
    tasks: set[asyncio.Task[Any]] = set()
    failures: list[ObserveFailure] = []
    version = max(SERVER_VERSION, V4_9_4)

    async def one(topic: str) -> None:
        try:
            answer = await ask(client, route_request(topic, version=version, accept_standard_json_only=True), timeout_s)
            if answer.code == ResponseCode.TOPIC_NOT_EXIST:
                routes[topic] = None
                return
            before = known.get(topic)
            if before is not None and answer.code == ResponseCode.SUCCESS and before[0] == answer.body:
                entry = before[1]  # the same bytes parse to the same entry
            else:
                entry = route_entry(_parsed(fastjson.parse_route, answer, f"GET_ROUTEINFO_BY_TOPIC {topic}"))
            routes[topic] = entry
            bodies[topic] = (answer.body or b"", entry)
        except ObserveFailure as exc:
            failures.append(exc)
        finally:
            slots.release()

    start = loop.time()
    step = spread_s / len(topics) if topics else 0.0
    try:
        for i, topic in enumerate(topics):
            delay = start + i * step - loop.time()
            if delay > 0.001:
                await asyncio.sleep(delay)
            await slots.acquire()
            if failures:
                slots.release()
                break
            task = asyncio.create_task(one(topic))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
    if failures:
        raise failures[0]
    return routes
