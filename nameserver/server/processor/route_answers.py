"""What the server answers to GET_ROUTEINFO_BY_TOPIC (105) and GET_BROKER_CLUSTER_INFO (106), and
every encoded answer it keeps between table changes.

RocketMQ's ``DefaultRequestProcessor.getRouteInfoByTopic`` / ``getAllClusterInfo``. A 105 reaches
:meth:`RouteAnswers.answer` by one of three ways, and all three give the same bytes:

- the request processor's dispatch (``RouteAnswers.TABLE``): every request when access control is
  on, and the requests the other two leave to it;
- the controller's shortcut (:meth:`RouteAnswers.frame`): the answer as it leaves, encoded once
  per topic and flavour and then only given the request's opaque (no clock, no events);
- a connection's decoder (``FrameDecoder.answer_known``), which answers a request seen before
  from its bytes alone, with what :meth:`RouteAnswers.frame` kept under the request's key
  (:meth:`RouteAnswers.known_lookups`).

Encoded answers stay valid while the tables' revision stays: lookups dominate the traffic (every
client polls every topic every 30 s) while the tables change far more rarely (a periodic
re-registration changes no cell, so it keeps them). Sections cited are docs/remoting-protocol.md's.

Example:
    >>> answers = RouteAnswers(RouteInfoManager(), PROFILES["4.9"])
    >>> answers.answer(make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"})).code
    17
"""

from __future__ import annotations

from typing import ClassVar

from nameserver.codec import (
    REQUEST_HEADERS,
    RemotingCommand,
    RequestCode,
    RequestKey,
    ResponseCode,
    ResponseFrame,
    SerializeType,
    Version,
    decode_custom_header,
    fastjson,
    make_response,
    parse_bool,
)
from nameserver.routes.manager import RouteInfoManager
from nameserver.server.processor.context import ConnectionContext, HandlerTable, Outcome
from nameserver.server.profile import ReleaseProfile

# Route bodies (and their encoded answers) kept between table changes; a missing topic is never
# cached, so clients asking for random names cannot grow it.
ROUTE_CACHE_ENTRIES = 50_000

# 4.9's wording (the default profile's); nameserver.server.profile words it per release
TOPIC_NOT_EXIST_REMARK = (
    "No topic route info in name server for the topic: {topic}"
    "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
)

# read on every lookup: module globals, not lookups through the enum classes
_GET_ROUTEINFO_BY_TOPIC = int(RequestCode.GET_ROUTEINFO_BY_TOPIC)
_ROUTE_HEADER = REQUEST_HEADERS[RequestCode.GET_ROUTEINFO_BY_TOPIC]
_SUCCESS = ResponseCode.SUCCESS
_JSON = int(SerializeType.JSON)
_V4_9_4 = int(Version.V4_9_4)

# ResponseFrame.splice_parts(): an answer as FrameDecoder.answer_known splices a request's opaque in
SpliceParts = tuple[tuple[bytes | None, ...], bytes, int]


class RouteAnswers:
    """The answers to route lookups, and the only keeper of their encoded forms.

    Args:
        routes: the route tables answered from; their ``revision`` says when a kept answer is stale.
        profile: the release whose framing and remarks the answers follow.
        shortcuts: whether a 105 may be answered before the processor sees it (:meth:`frame`,
            :meth:`known_lookups`); False with access control on, which checks every request.
    """

    def __init__(self, routes: RouteInfoManager, profile: ReleaseProfile, shortcuts: bool = True) -> None:
        self.routes = routes
        self.profile = profile
        self.shortcuts = shortcuts
        self._route_bodies: dict[tuple[str, bool], bytes] = {}  # (topic, standard) -> body
        # (topic, standard, serialize type) -> the whole SUCCESS frame but for the opaque
        self._route_frames: dict[tuple[str, bool, int], ResponseFrame] = {}
        # request key (FrameDecoder.last_key) -> ResponseFrame.splice_parts() of its answer
        self._known_lookups: dict[RequestKey, SpliceParts] = {}
        self._cluster_body: bytes | None = None
        self._revision = routes.revision

    def invalidate(self) -> None:
        """Forget every kept answer (they are also dropped whenever ``routes.revision`` moves)."""
        self._route_bodies.clear()
        self._route_frames.clear()
        self._known_lookups.clear()  # in place: the server's channels hold it
        self._cluster_body = None
        self._revision = self.routes.revision

    # ------------------------------------------------------------------ 105: the answer

    def answer(self, cmd: RemotingCommand) -> RemotingCommand:
        """The answer to a GET_ROUTEINFO_BY_TOPIC: SUCCESS with the route (§10.3's form), or
        TOPIC_NOT_EXIST with the release's remark (docs/nameserver-semantics.md §2.10).

        Raises:
            RequestError: no ``topic`` (the processor answers SYSTEM_ERROR, §6).
        """
        return self._answer(cmd, keep_body=True)

    def _answer(self, cmd: RemotingCommand, keep_body: bool) -> RemotingCommand:
        # The hottest request: read the two fields directly; the generic decoder only runs to
        # produce its BadHeader when ``topic`` is missing (§6).
        ext = cmd.ext_fields or {}
        topic = ext.get("topic")
        if topic is None:
            topic = decode_custom_header(cmd.ext_fields, _ROUTE_HEADER)["topic"]  # raises BadHeader
        # §10.3: standard form (quoted ids) for 4.9.4+ clients or when asked for explicitly
        standard = cmd.version >= _V4_9_4 or parse_bool(ext.get("acceptStandardJsonOnly"))
        if self.routes.revision != self._revision:
            self.invalidate()
        key = (topic, standard)
        body = self._route_bodies.get(key)
        if body is None:
            route = self.routes.pickup_topic_route_data(topic)
            if route is None:
                remark = self.profile.topic_not_exist_remark(topic)
                return make_response(cmd, ResponseCode.TOPIC_NOT_EXIST, remark=remark)
            body = fastjson.encode_route(route, standard)
            if keep_body:
                if len(self._route_bodies) >= ROUTE_CACHE_ENTRIES:
                    self._route_bodies.clear()  # bounded: answers are cheap to rebuild
                self._route_bodies[key] = body
        return make_response(cmd, _SUCCESS, body=body)

    def _get_route_info(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        # a lookup changes nothing and logs nothing: no events
        return Outcome(self.answer(cmd))

    # ------------------------------------------------------------------ 105: its kept encodings

    def frame(self, cmd: RemotingCommand, request_key: RequestKey | None = None) -> bytes | None:
        """The encoded :meth:`answer` to ``cmd``, framed as the processor would, when it is an
        ordinary GET_ROUTEINFO_BY_TOPIC answered SUCCESS; the frame is kept, so a request asking
        the same costs filling in its opaque.

        ``None`` when the processor must answer: another code, a oneway or flagged request,
        shortcuts off, no ``topic``, an unknown topic (never kept), or an answer the encoder
        would refuse.

        Args:
            cmd: the decoded request.
            request_key: its ``FrameDecoder.last_key``: when given and answered here, every request
                with this key has this answer but for the opaque, so it joins :meth:`known_lookups`.

        Raises:
            ValueError: an opaque outside int32 (never decoded from a frame), as the encoder.
        """
        ext = cmd.ext_fields
        if cmd.code != _GET_ROUTEINFO_BY_TOPIC or cmd.flag or not self.shortcuts or not ext:
            return None
        topic = ext.get("topic")
        if topic is None:
            return None
        if self.routes.revision != self._revision:
            self.invalidate()
        standard = cmd.version >= _V4_9_4 or parse_bool(ext.get("acceptStandardJsonOnly"))
        key = (topic, standard, cmd.serialize_type)
        frame = self._route_frames.get(key)
        if frame is None:
            # the body goes into the frame only: keeping it as a body too would double the memory
            # of the answers (a topic on 1,000 brokers has a route of ~100 KiB)
            answer = self._answer(cmd, keep_body=False)
            if answer.code != _SUCCESS:
                return None
            try:
                frame = ResponseFrame(self.profile.frame(answer))
            except ValueError:
                return None
            if len(self._route_frames) >= ROUTE_CACHE_ENTRIES:
                self._route_frames.clear()  # bounded: answers are cheap to rebuild
            self._route_frames[key] = frame
        answer_bytes = frame.frame(cmd.opaque)
        # the decoder splices the opaque as the request's header writes it, so only an answer in
        # the request's header type joins it (not the 5 profile's JSON answer to a ROCKETMQ request)
        if request_key is not None and (self.profile.answers_in_request_type or cmd.serialize_type == _JSON):
            known = self._known_lookups
            if len(known) >= ROUTE_CACHE_ENTRIES:
                known.clear()  # bounded: a miss costs one full lookup
            known[request_key] = frame.splice_parts()
        return answer_bytes

    def known_lookups(self) -> dict[RequestKey, SpliceParts] | None:
        """The answers to lookups seen before, by request key, valid until the tables' revision
        next moves (for ``FrameDecoder.answer_known``); None with shortcuts off. Filled by
        :meth:`frame` given the request's key."""
        if not self.shortcuts:
            return None
        if self.routes.revision != self._revision:
            self.invalidate()
        return self._known_lookups

    # ------------------------------------------------------------------ 106

    def _get_broker_cluster_info(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        if self.routes.revision != self._revision:
            self.invalidate()
        body = self._cluster_body
        if body is None:
            # §7: always the default form, even for version >= 401
            body = self._cluster_body = fastjson.encode_cluster_info(self.routes.get_all_cluster_info())
        return Outcome(make_response(cmd, _SUCCESS, body=body))

    TABLE: ClassVar[HandlerTable] = {
        RequestCode.GET_ROUTEINFO_BY_TOPIC: _get_route_info,
        RequestCode.GET_BROKER_CLUSTER_INFO: _get_broker_cluster_info,
    }
