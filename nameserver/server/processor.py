"""The request processor: one decoded command in, the response and the events out.

RocketMQ's ``DefaultRequestProcessor``, as a pure function of ``(command, connection, now)``: no
socket, clock or file. It owns the only path to the route tables, so the asyncio shell can run
"change + event append" as one critical section (semantics A7) by calling :meth:`process` and
appending the returned events back to back. Dispatch is a dict from request code to handler
(protocol §7); errors follow §9.2.

Example:
    >>> processor = RequestProcessor(RouteInfoManager())
    >>> request = make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, opaque=1)
    >>> outcome = processor.process(request, ConnectionContext("c1", "127.0.0.1:5000"), now=0)
    >>> outcome.response.code, outcome.events, outcome.changed
    (17, [], False)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from nameserver.codec import fastjson
from nameserver.acl import AccessController, Denial
from nameserver.server.bodycache import RegisterBodyCache
from nameserver.codec import (
    REQUEST_HEADERS,
    RPC_ONEWAY,
    RPC_TYPE,
    CrcMismatch,
    MalformedFrame,
    PropertiesError,
    RemotingCommand,
    RequestCode,
    RequestError,
    RequestKey,
    ResponseCode,
    ResponseFrame,
    Version,
    decode_custom_header,
    decode_data_version_body,
    format_properties,
    make_response,
    parse_bool,
    parse_int64,
    parse_properties,
)
from nameserver.server.kvconfig import ORDER_TOPIC_CONFIG, KVConfigManager, NamesrvConfigStore
from nameserver.routes.manager import UNIT_FLAGS, Event, RequestContext, RouteInfoManager, rejected_event

# Route bodies (and their encoded answers) kept between table changes; a missing topic is never
# cached, so clients asking for random names cannot grow it.
ROUTE_CACHE_ENTRIES = 50_000

# What the two hottest handlers use, as module globals: an enum member read through its class
# is a class attribute lookup (~0.1 us) on every request.
_REGISTER_HEADER = REQUEST_HEADERS[RequestCode.REGISTER_BROKER]
_SUCCESS = ResponseCode.SUCCESS
_V4_9_4 = int(Version.V4_9_4)

TOPIC_NOT_EXIST_REMARK = (
    "No topic route info in name server for the topic: {topic}"
    "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
)


@dataclass(frozen=True, slots=True)
class ConnectionContext:
    """One connection as the processor sees it: a stable channel id and the peer ``host:port``."""

    channel: str
    remote: str


@dataclass(slots=True)
class Outcome:
    """What one request did.

    Attributes:
        response: the command to send back, or None (oneway request, stray response).
        events: the events to append, in order (event-log spec, without v/ns/seq).
        changed: True when a route table (live table included) may have changed.
    """

    response: RemotingCommand | None
    events: list[Event] = field(default_factory=list)
    changed: bool = False


Handler = Callable[["RequestProcessor", RemotingCommand, ConnectionContext, int], Outcome]


class RequestProcessor:
    """Dispatches requests to the route tables, the KV store and the config map.

    Args:
        routes: the route tables this processor alone mutates.
        kv: KV config (100/101/102/219); a fresh one by default.
        namesrv_config: the 318/319 property map; a fresh one by default.
        access: access control checked before dispatch; None (the default) checks nothing,
            as RocketMQ's name server does.
    """

    def __init__(
        self,
        routes: RouteInfoManager,
        kv: KVConfigManager | None = None,
        namesrv_config: NamesrvConfigStore | None = None,
        access: AccessController | None = None,
    ) -> None:
        self.routes = routes
        self.access = access
        self.kv = kv or KVConfigManager()
        self.namesrv_config = namesrv_config or NamesrvConfigStore()
        # Encoded 105/106 answers, valid while the tables' revision stays: lookups dominate the
        # traffic (every client polls every topic every 30 s) while the tables change far more
        # rarely (a periodic re-registration changes no cell, so it keeps them).
        self._route_cache: dict[tuple[str, bool], bytes] = {}  # (topic, standard) -> body
        # (topic, standard, serialize type) -> the whole SUCCESS frame but for the opaque
        self._route_frames: dict[tuple[str, bool, int], ResponseFrame] = {}
        # request key (FrameDecoder.last_key) -> ResponseFrame.splice_parts() of its answer: the
        # lookups a decoder answers from their bytes alone (FrameDecoder.answer_known)
        self._known_lookups: dict[RequestKey, tuple] = {}
        self._cluster_cache: bytes | None = None
        self._revision = routes.revision
        self.register_bodies = RegisterBodyCache()

    # ------------------------------------------------------------------ entry points

    def process(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        """Handle one decoded command received at ``now`` (epoch ms) over ``conn``.

        Never raises for anything a client can send: a handler failure becomes SYSTEM_ERROR with
        a ``rejected`` event (§9.2). A oneway request gets no response but keeps its events.
        """
        flag = cmd.flag
        if flag & RPC_TYPE:
            return Outcome(None)  # §3.2: a stray response is dropped, no reply, no event
        handler = _DISPATCH.get(cmd.code)
        try:
            # Access control hook: a refused request never reaches its handler.
            denial = self.access.check(cmd, conn.remote) if self.access is not None else None
            if denial is not None:
                outcome = self._denied(cmd, conn, now, denial)
            elif handler is None:
                outcome = self._unknown_code(cmd, conn, now)
            else:
                outcome = handler(self, cmd, conn, now)
        except RequestError as exc:
            outcome = self._refused(cmd, conn, now, exc)
        except Exception as exc:  # noqa: BLE001 - the server never dies of client input (§9.2)
            self.invalidate()  # a handler that failed midway may have touched a table
            outcome = Outcome(
                make_response(cmd, ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}"),
                [rejected_event(now, "internal_error", _ctx(conn, cmd), detail=f"{type(exc).__name__}: {exc}")],
                True,
            )
        if flag & RPC_ONEWAY:
            outcome.response = None  # §3.2: never answer a oneway request, not even an error
        return outcome

    def on_channel_close(self, conn: ConnectionContext, now: int) -> list[Event]:
        """A connection ended (semantics §2.4): its live addresses are removed."""
        return self.routes.on_channel_close(conn.channel, now, conn.remote)

    def scan_not_active_broker(self, now: int) -> tuple[list[Event], list[str]]:
        """The expiry scan (§2.5): ``expire`` events and the channels to close."""
        return self.routes.scan_not_active_broker(now)

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
                frame = ResponseFrame(make_response(cmd, _SUCCESS, body=body))
            except ValueError:
                return None
            if len(self._route_frames) >= ROUTE_CACHE_ENTRIES:
                self._route_frames.clear()  # bounded: answers are cheap to rebuild
            self._route_frames[key] = frame
        answer = frame.frame(cmd.opaque)
        if request_key is not None:
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

    # ------------------------------------------------------------------ errors

    def _unknown_code(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        # D3: 5.x's answer; 4.9 would stay silent. Codes 217 and 901 land here too (D6).
        return Outcome(
            make_response(
                cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {cmd.code} not supported"
            ),
            [rejected_event(now, "unknown_code", _ctx(conn, cmd))],
        )

    def _denied(self, cmd: RemotingCommand, conn: ConnectionContext, now: int, denial: Denial) -> Outcome:
        # NO_PERMISSION (§9.2) with the reason; the event names the key id, never a secret.
        return Outcome(
            make_response(cmd, ResponseCode.NO_PERMISSION, remark=denial.remark),
            [rejected_event(now, "no_permission", _ctx(conn, cmd), detail=denial.detail,
                            access_key=denial.access_key, **_decoded_keys(cmd))],
        )

    def _refused(self, cmd: RemotingCommand, conn: ConnectionContext, now: int, exc: RequestError) -> Outcome:
        # 103's own CRC answer carries extFields {}; exception-path answers carry none (§4).
        ext = {} if isinstance(exc, CrcMismatch) else None
        return Outcome(
            make_response(cmd, ResponseCode.SYSTEM_ERROR, remark=exc.remark, ext_fields=ext),
            [rejected_event(now, exc.reason, _ctx(conn, cmd), detail=exc.remark, **_decoded_keys(cmd))],
        )

    # ------------------------------------------------------------------ KV config (100-102, 219)

    def _put_kv_config(self, cmd, conn, now) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.PUT_KV_CONFIG])
        self.kv.put_kv_config(h["namespace"], h["key"], h["value"])
        return Outcome(make_response(cmd, ResponseCode.SUCCESS))

    def _get_kv_config(self, cmd, conn, now) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.GET_KV_CONFIG])
        value = self.kv.get_kv_config(h["namespace"], h["key"])
        if value is None:
            remark = f"No config item, Namespace: {h['namespace']} Key: {h['key']}"
            return Outcome(make_response(cmd, ResponseCode.QUERY_NOT_FOUND, remark=remark, ext_fields={}))
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, ext_fields={"value": value}))

    def _delete_kv_config(self, cmd, conn, now) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.DELETE_KV_CONFIG])
        self.kv.delete_kv_config(h["namespace"], h["key"])
        return Outcome(make_response(cmd, ResponseCode.SUCCESS))

    def _get_kv_list_by_namespace(self, cmd, conn, now) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.GET_KVLIST_BY_NAMESPACE])
        table = self.kv.get_kv_list_by_namespace(h["namespace"])
        if table is None:
            remark = f"No config item, Namespace: {h['namespace']}"
            return Outcome(make_response(cmd, ResponseCode.QUERY_NOT_FOUND, remark=remark))
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=fastjson.encode_kv_table(table)))

    # ------------------------------------------------------------------ broker traffic

    def _register_broker(self, cmd, conn, now) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, _REGISTER_HEADER)
        # §8: negative version, CRC, then the body; every refusal happens before any table change.
        body, digest = self.register_bodies.decode(
            cmd.body, version=cmd.version, compressed=h["compressed"], body_crc32=h["bodyCrc32"], now=now
        )
        result = self.routes.register_broker(
            h["clusterName"], h["brokerAddr"], h["brokerName"], h["brokerId"], h["haServerAddr"],
            body.data_version, body.topics, body.filter_servers, now, _ctx(conn, cmd),
            request_version=cmd.version, digest=digest,
        )
        ext: dict[str, str] = {}
        if result.master_addr is not None:  # §2.1 step 8: a slave learns its live master
            ext["masterAddr"] = result.master_addr
            if result.ha_server_addr is not None:
                ext["haServerAddr"] = result.ha_server_addr
        order = self.kv.get_kv_list_by_namespace(ORDER_TOPIC_CONFIG)
        body_out = fastjson.encode_kv_table(order) if order is not None else None
        return Outcome(make_response(cmd, _SUCCESS, ext_fields=ext, body=body_out), result.events, True)

    def _unregister_broker(self, cmd, conn, now) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.UNREGISTER_BROKER])
        events = self.routes.unregister_broker(
            h["clusterName"], h["brokerAddr"], h["brokerName"], h["brokerId"], now, _ctx(conn, cmd)
        )
        return Outcome(make_response(cmd, ResponseCode.SUCCESS), events, True)

    def _broker_heartbeat(self, cmd, conn, now) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.BROKER_HEARTBEAT])
        events = self.routes.broker_heartbeat(h["clusterName"], h["brokerAddr"], h["brokerName"], now, _ctx(conn, cmd))
        return Outcome(make_response(cmd, ResponseCode.SUCCESS), events, True)

    def _query_data_version(self, cmd, conn, now) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.QUERY_DATA_VERSION])
        data_version = decode_data_version_body(cmd.body, now)
        changed, stored, events = self.routes.query_data_version(
            h["clusterName"], h["brokerAddr"], h["brokerName"], h["brokerId"], data_version, now, _ctx(conn, cmd)
        )
        body = fastjson.encode_data_version(stored) if stored is not None else None
        ext = {"changed": "true" if changed else "false"}
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, ext_fields=ext, body=body), events, True)

    # ------------------------------------------------------------------ admin (205, 216, 327)

    def _wipe_write_perm(self, cmd, conn, now) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.WIPE_WRITE_PERM_OF_BROKER])
        count, events = self.routes.wipe_write_perm_of_broker(h["brokerName"], now, _ctx(conn, cmd))
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": str(count)}), events, True)

    def _add_write_perm(self, cmd, conn, now) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.ADD_WRITE_PERM_OF_BROKER])
        count, events = self.routes.add_write_perm_of_broker(h["brokerName"], now, _ctx(conn, cmd))
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, ext_fields={"addTopicCount": str(count)}), events, True)

    def _delete_topic(self, cmd, conn, now) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.DELETE_TOPIC_IN_NAMESRV])
        events = self.routes.delete_topic(h["topic"], h["clusterName"], now, _ctx(conn, cmd))
        return Outcome(make_response(cmd, ResponseCode.SUCCESS), events, True)

    # ------------------------------------------------------------------ lookups (105, 106, lists)

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
            remark = TOPIC_NOT_EXIST_REMARK.format(topic=topic)
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

    # ------------------------------------------------------------------ own config (318, 319)

    def _update_namesrv_config(self, cmd, conn, now) -> Outcome:
        if not cmd.body:
            return Outcome(make_response(cmd, ResponseCode.SUCCESS))
        try:
            properties = parse_properties(cmd.body)
        except PropertiesError:
            return Outcome(make_response(cmd, ResponseCode.SYSTEM_ERROR, remark="string2Properties error"))
        forbidden = self.namesrv_config.check_update(properties)
        if forbidden is not None:  # A6: no route timer changes while running
            return Outcome(make_response(cmd, ResponseCode.NO_PERMISSION, remark=forbidden))
        self.namesrv_config.update(properties)
        return Outcome(make_response(cmd, ResponseCode.SUCCESS))

    def _get_namesrv_config(self, cmd, conn, now) -> Outcome:
        body = format_properties(self.namesrv_config.snapshot())
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=body or None))


_DISPATCH: dict[int, Handler] = {
    RequestCode.PUT_KV_CONFIG: RequestProcessor._put_kv_config,
    RequestCode.GET_KV_CONFIG: RequestProcessor._get_kv_config,
    RequestCode.DELETE_KV_CONFIG: RequestProcessor._delete_kv_config,
    RequestCode.REGISTER_BROKER: RequestProcessor._register_broker,
    RequestCode.UNREGISTER_BROKER: RequestProcessor._unregister_broker,
    RequestCode.GET_ROUTEINFO_BY_TOPIC: RequestProcessor._get_route_info,
    RequestCode.GET_BROKER_CLUSTER_INFO: RequestProcessor._get_broker_cluster_info,
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: RequestProcessor._wipe_write_perm,
    RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: RequestProcessor._get_all_topic_list,
    RequestCode.DELETE_TOPIC_IN_NAMESRV: RequestProcessor._delete_topic,
    RequestCode.GET_KVLIST_BY_NAMESPACE: RequestProcessor._get_kv_list_by_namespace,
    RequestCode.GET_TOPICS_BY_CLUSTER: RequestProcessor._get_topics_by_cluster,
    RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: RequestProcessor._get_system_topic_list,
    RequestCode.GET_UNIT_TOPIC_LIST: RequestProcessor._get_unit_topic_list,
    RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: RequestProcessor._get_unit_topic_list,
    RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: RequestProcessor._get_unit_topic_list,
    RequestCode.UPDATE_NAMESRV_CONFIG: RequestProcessor._update_namesrv_config,
    RequestCode.GET_NAMESRV_CONFIG: RequestProcessor._get_namesrv_config,
    RequestCode.QUERY_DATA_VERSION: RequestProcessor._query_data_version,
    RequestCode.ADD_WRITE_PERM_OF_BROKER: RequestProcessor._add_write_perm,
    RequestCode.BROKER_HEARTBEAT: RequestProcessor._broker_heartbeat,
}

SUPPORTED_CODES = frozenset(_DISPATCH)


def _ctx(conn: ConnectionContext, cmd: RemotingCommand) -> RequestContext:
    return RequestContext(conn.channel, conn.remote, cmd.code)


_BROKER_KEYS = (("clusterName", "cluster"), ("brokerName", "broker_name"), ("brokerAddr", "broker_addr"), ("topic", "topic"))


def _decoded_keys(cmd: RemotingCommand) -> dict[str, Any]:
    """What a refused request decoded, in event-log names (never ACL keys or other extFields)."""
    ext: Mapping[str, str] = cmd.ext_fields or {}
    decoded: dict[str, Any] = {event_key: ext.get(wire_key) for wire_key, event_key in _BROKER_KEYS}
    try:
        decoded["broker_id"] = parse_int64(ext["brokerId"])
    except (KeyError, ValueError):
        pass
    decoded["request_version"] = cmd.version
    return decoded


def malformed_frame_event(now: int, conn: ConnectionContext, exc: MalformedFrame) -> Event:
    """The ``rejected`` event of a frame that closes its connection (§9.1): reason
    ``malformed_frame``, the decoder's reason as ``detail``, plus whatever was decoded."""
    decoded = dict(exc.decoded_so_far)
    code = decoded.pop("code", None)
    version = decoded.pop("version", None)
    event: Event = {
        "ts": now,
        "type": "rejected",
        "request_code": code,
        "channel": conn.channel,
        "remote": conn.remote,
        "reason": "malformed_frame",
        "detail": exc.reason,
    }
    if version is not None:
        event["request_version"] = version
    # the frame's shape keeps its own keys; header fields read before the fault go into detail,
    # because their types differ between the JSON and ROCKETMQ headers (language name vs byte)
    for key in ("frame_length", "serialize_type", "header_length"):
        if key in decoded:
            event[key] = decoded.pop(key)
    if decoded:
        event["detail"] += " (" + ", ".join(f"{k}={v}" for k, v in sorted(decoded.items())) + ")"
    return event


def connection_event(now: int, conn: ConnectionContext, reason: str, **extra: Any) -> Event:
    """A ``rejected`` event for a connection the server refused or cut (limit, slowloris, slow reader)."""
    return {
        "ts": now, "type": "rejected", "request_code": None, "channel": conn.channel,
        "remote": conn.remote, "reason": reason, **extra,
    }
