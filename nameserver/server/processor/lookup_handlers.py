"""Handlers of the lookups (105, 106 and the topic lists) and the cache of their encoded answers.

Encoded answers stay valid while the tables' revision stays: lookups dominate the traffic (every
client polls every topic every 30 s) while the tables change far more rarely (a periodic
re-registration changes no cell, so it keeps them). Sections cited are docs/remoting-protocol.md's.
"""

from __future__ import annotations

from nameserver.acl import AccessController
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
from nameserver.routes.manager import UNIT_FLAGS, RouteInfoManager
from nameserver.server.processor.context import Outcome
from nameserver.server.profile import ReleaseProfile

# Route bodies (and their encoded answers) kept between table changes; a missing topic is never
# cached, so clients asking for random names cannot grow it.
ROUTE_CACHE_ENTRIES = 50_000

# read on every lookup: module globals, not lookups through the enum classes
_SUCCESS = ResponseCode.SUCCESS
_JSON = int(SerializeType.JSON)
_V4_9_4 = int(Version.V4_9_4)

# 4.9's wording (the default profile's); nameserver.server.profile words it per release
TOPIC_NOT_EXIST_REMARK = (
    "No topic route info in name server for the topic: {topic}"
    "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
)


class LookupHandlers:
    """The lookup handlers and answer cache of :class:`~nameserver.server.processor.RequestProcessor`."""

    routes: RouteInfoManager
    access: AccessController | None
    profile: ReleaseProfile
    _route_cache: dict[tuple[str, bool], bytes]
    _route_frames: dict[tuple[str, bool, int], ResponseFrame]
    _known_lookups: dict[RequestKey, tuple]
    _cluster_cache: bytes | None
    _revision: int

    def invalidate(self) -> None:
        """Forget every cached answer (they are also dropped whenever ``routes.revision`` moves)."""
        self._route_cache.clear()
        self._route_frames.clear()
        self._known_lookups.clear()  # in place: the server's channels hold it
        self._cluster_cache = None
        self._revision = self.routes.revision

    def known_lookups(self) -> dict[RequestKey, tuple] | None:
        """The answers to lookups seen before, by request key, valid until the tables' revision
        next moves (for ``FrameDecoder.answer_known``); None with access control on (every
        request is checked). Filled by :meth:`route_answer_frame` given the request's key."""
        if self.access is not None:
            return None
        if self.routes.revision != self._revision:
            self.invalidate()
        return self._known_lookups

    def route_answer_frame(self, cmd: RemotingCommand, request_key: RequestKey | None = None) -> bytes | None:
        """The encoded SUCCESS answer to an ordinary GET_ROUTEINFO_BY_TOPIC, from the cache.

        The same bytes :meth:`process` and the encoder would give, without the Outcome, the
        response command or the header encoding: only the opaque is filled in. ``None`` when
        :meth:`process` must answer: a oneway or flagged request, access control on, no
        ``topic``, an unknown topic (never cached), or an answer the encoder would refuse.
        A lookup changes nothing and logs nothing, so there are no events to return.

        Args:
            cmd: the decoded request.
            request_key: its ``FrameDecoder.last_key``: when given and answered here, every request
                with this key has this answer but for the opaque, so it joins
                :meth:`known_lookups`.

        Raises:
            ValueError: an opaque outside int32 (never decoded from a frame), as the encoder.
        """
        ext = cmd.ext_fields
        if cmd.flag or self.access is not None or not ext:
            return None
        topic = ext.get("topic")
        if topic is None:
            return None
        if self.routes.revision != self._revision:
            self.invalidate()
        # §10.3: standard form (quoted ids) for 4.9.4+ clients or when asked for explicitly
        standard = cmd.version >= _V4_9_4 or parse_bool(ext.get("acceptStandardJsonOnly"))
        key = (topic, standard, cmd.serialize_type)
        frame = self._route_frames.get(key)
        if frame is None:
            # the body goes into the frame only: keeping it in _route_cache too would double
            # the memory of the answers (a topic on 1,000 brokers has a route of ~100 KiB)
            body = self._route_cache.get((topic, standard))
            if body is None:
                route = self.routes.pickup_topic_route_data(topic)
                if route is None:
                    return None
                body = fastjson.encode_route(route, standard)
            try:
                frame = ResponseFrame(self.profile.frame(make_response(cmd, _SUCCESS, body=body)))
            except ValueError:
                return None
            if len(self._route_frames) >= ROUTE_CACHE_ENTRIES:
                self._route_frames.clear()  # bounded: answers are cheap to rebuild
            self._route_frames[key] = frame
        answer = frame.frame(cmd.opaque)
        # the byte-level shortcut splices the opaque as the request's header writes it, so only an
        # answer in the request's header type joins it (not the 5 profile's JSON answer to a
        # ROCKETMQ request)
        if request_key is not None and (self.profile.answers_in_request_type or cmd.serialize_type == _JSON):
            known = self._known_lookups
            if len(known) >= ROUTE_CACHE_ENTRIES:
                known.clear()  # bounded: a miss costs one full lookup
            known[request_key] = frame.splice_parts()
        return answer

    def _route_body(self, topic: str, standard: bool) -> bytes | None:
        """The encoded route of ``topic`` (cached), or None without a route; the caller has
        checked the revision."""
        key = (topic, standard)
        body = self._route_cache.get(key)
        if body is None:
            route = self.routes.pickup_topic_route_data(topic)
            if route is not None:
                body = fastjson.encode_route(route, standard)
                if len(self._route_cache) >= ROUTE_CACHE_ENTRIES:
                    self._route_cache.clear()  # bounded: answers are cheap to rebuild
                self._route_cache[key] = body
        return body


    def _get_route_info(self, cmd, conn, now) -> Outcome:
        # The hottest request: read the two fields directly; the generic decoder only runs to
        # produce its BadHeader when ``topic`` is missing (§6).
        ext = cmd.ext_fields
        topic = ext.get("topic") if ext else None
        if topic is None:
            decode_custom_header(ext, REQUEST_HEADERS[RequestCode.GET_ROUTEINFO_BY_TOPIC])
        # §10.3: standard form (quoted ids) for 4.9.4+ clients or when asked for explicitly
        standard = cmd.version >= _V4_9_4 or parse_bool(ext.get("acceptStandardJsonOnly"))
        if self.routes.revision != self._revision:
            self.invalidate()
        body = self._route_body(topic, standard)
        if body is None:
            remark = self.profile.topic_not_exist_remark(topic)
            return Outcome(make_response(cmd, ResponseCode.TOPIC_NOT_EXIST, remark=remark))
        return Outcome(make_response(cmd, _SUCCESS, body=body))

    def _get_broker_cluster_info(self, cmd, conn, now) -> Outcome:
        if self.routes.revision != self._revision:
            self.invalidate()
        body = self._cluster_cache
        if body is None:
            info = self.routes.get_all_cluster_info()
            # §7: always the default form, even for version >= 401
            body = self._cluster_cache = fastjson.encode_cluster_info(info)
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=body))

    def _get_all_topic_list(self, cmd, conn, now) -> Outcome:
        body = fastjson.encode_topic_list(self.routes.get_all_topic_list())
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=body))

    def _get_topics_by_cluster(self, cmd, conn, now) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.GET_TOPICS_BY_CLUSTER])
        body = fastjson.encode_topic_list(self.routes.get_topics_by_cluster(h["cluster"]))
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=body))

    def _get_system_topic_list(self, cmd, conn, now) -> Outcome:
        items, broker_addr = self.routes.get_system_topic_list()
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=fastjson.encode_topic_list(items, broker_addr)))

    def _get_unit_topic_list(self, cmd, conn, now) -> Outcome:
        topics = self.routes.get_unit_topics(*UNIT_FLAGS[cmd.code])
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=fastjson.encode_topic_list(topics)))

    def _get_broker_member_group(self, cmd, conn, now) -> Outcome:
        # 5.x's DefaultRequestProcessor.getBrokerMemberGroup (the "5" profile only): the group's
        # brokerAddrs, empty when the name has no BrokerData. 5.x makes the answer with
        # createResponseCommand(null) and never clears its remark, so a SUCCESS carries it.
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.GET_BROKER_MEMBER_GROUP])
        broker_data = self.routes.broker_addr_table.get(h["brokerName"])
        addrs = dict(broker_data.broker_addrs) if broker_data is not None else {}
        body = fastjson.dumps({"brokerMemberGroup": {"brokerAddrs": addrs, "brokerName": h["brokerName"],
                                                     "cluster": h["clusterName"]}})
        return Outcome(make_response(cmd, _SUCCESS, remark="not set any response code", body=body))
