"""The request processor: one decoded command in, the response and the events out.

RocketMQ's ``DefaultRequestProcessor``, as a pure function of ``(command, connection, now)``: no
socket, clock or file. It owns the only path to the route tables, so the asyncio shell can run
"change + event append" as one critical section (docs/nameserver-semantics.md A7) by calling :meth:`process` and
appending the returned events back to back. Dispatch is a dict from request code to handler
(docs/remoting-protocol.md §7); errors follow its §9.2.

Example:
    >>> processor = RequestProcessor(RouteInfoManager())
    >>> request = make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, opaque=1)
    >>> outcome = processor.process(request, ConnectionContext("c1", "127.0.0.1:5000"), now=0)
    >>> outcome.response.code, outcome.events, outcome.changed
    (17, [], False)
"""

from __future__ import annotations

from typing import Callable

from nameserver.acl import AccessController, Denial
from nameserver.codec import (
    NO_LIMITS,
    RPC_ONEWAY,
    RPC_TYPE,
    CrcMismatch,
    RegisterLimits,
    RemotingCommand,
    RequestCode,
    RequestError,
    RequestKey,
    ResponseCode,
    ResponseFrame,
    make_response,
)
from nameserver.routes.manager import Event, RouteInfoManager, rejected_event
from nameserver.server.bodycache import RegisterBodyCache
from nameserver.server.kvconfig import KVConfigManager, NamesrvConfigStore
from nameserver.server.processor.config_handlers import ConfigHandlers
from nameserver.server.processor.context import ConnectionContext, Outcome, decoded_keys, request_context
from nameserver.server.processor.lookup_handlers import LookupHandlers
from nameserver.server.processor.route_handlers import RouteHandlers
from nameserver.server.profile import DEFAULT_PROFILE, PROFILES, ReleaseProfile

Handler = Callable[["RequestProcessor", RemotingCommand, ConnectionContext, int], Outcome]


class RequestProcessor(RouteHandlers, LookupHandlers, ConfigHandlers):
    """Dispatches requests to the route tables, the KV store and the config map.

    Args:
        routes: the route tables this processor alone mutates.
        kv: KV config (100/101/102/219); a fresh one by default.
        namesrv_config: the 318/319 property map; a fresh one by default.
        access: access control checked before dispatch; None (the default) checks nothing,
            as RocketMQ's name server does.
        register_limits: the caps on a REGISTER_BROKER body (``[nameserver]
            max_register_topics``, ``max_register_body_bytes``); none by default.
        profile: the RocketMQ release whose framing, remarks and extra codes the answers follow
            (:mod:`nameserver.server.profile`); 4.9 by default.
    """

    def __init__(
        self,
        routes: RouteInfoManager,
        kv: KVConfigManager | None = None,
        namesrv_config: NamesrvConfigStore | None = None,
        access: AccessController | None = None,
        register_limits: RegisterLimits = NO_LIMITS,
        profile: ReleaseProfile | None = None,
    ) -> None:
        self.routes = routes
        self.access = access
        self.profile = profile or PROFILES[DEFAULT_PROFILE]
        self._dispatch = {**_DISPATCH, **{code: _RELEASE_DISPATCH[code] for code in self.profile.extra_codes}}
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
        self.register_bodies = RegisterBodyCache(limits=register_limits)

    # ------------------------------------------------------------------ entry points

    def process(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        """Handle one decoded command received at ``now`` (epoch ms) over ``conn``.

        Never raises for anything a client can send: a handler failure becomes SYSTEM_ERROR with
        a ``rejected`` event (§9.2). A oneway request gets no response but keeps its events.
        """
        flag = cmd.flag
        if flag & RPC_TYPE:
            return Outcome(None)  # §3.2: a stray response is dropped, no reply, no event
        handler = self._dispatch.get(cmd.code)
        try:
            # Access control hook: a refused request never reaches its handler.
            denial = self.access.check(cmd, conn.remote, now) if self.access is not None else None
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
                [rejected_event(now, "internal_error", request_context(conn, cmd), detail=f"{type(exc).__name__}: {exc}")],
                True,
            )
        if flag & RPC_ONEWAY:
            outcome.response = None  # §3.2: never answer a oneway request, not even an error
        elif outcome.response is not None:
            self.profile.frame(outcome.response)
        return outcome

    def on_channel_close(self, conn: ConnectionContext, now: int) -> list[Event]:
        """A connection ended (docs/nameserver-semantics.md §2.4): its live addresses are removed."""
        return self.routes.on_channel_close(conn.channel, now, conn.remote)

    def scan_not_active_broker(self, now: int) -> tuple[list[Event], list[str]]:
        """The expiry scan (docs/nameserver-semantics.md §2.5): ``expire`` events and the channels
        to close."""
        return self.routes.scan_not_active_broker(now)

    # ------------------------------------------------------------------ errors

    def _unknown_code(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        # D3: 5.x's answer; 4.9 would stay silent. Code 217 lands here too (D6), and 901 with the
        # 4.9 profile (a 4.9 name server does not know it).
        return Outcome(
            make_response(
                cmd, ResponseCode.REQUEST_CODE_NOT_SUPPORTED, remark=f" request type {cmd.code} not supported"
            ),
            [rejected_event(now, "unknown_code", request_context(conn, cmd))],
        )

    def _denied(self, cmd: RemotingCommand, conn: ConnectionContext, now: int, denial: Denial) -> Outcome:
        # NO_PERMISSION (§9.2) with the reason; the event names the key id, never a secret.
        return Outcome(
            make_response(cmd, ResponseCode.NO_PERMISSION, remark=denial.remark),
            [rejected_event(now, "no_permission", request_context(conn, cmd), detail=denial.detail,
                            access_key=denial.access_key, **decoded_keys(cmd))],
        )

    def _refused(self, cmd: RemotingCommand, conn: ConnectionContext, now: int, exc: RequestError) -> Outcome:
        # 103's own CRC answer carries extFields {}; exception-path answers carry none
        # (docs/remoting-protocol.md §4).
        ext = {} if isinstance(exc, CrcMismatch) else None
        return Outcome(
            make_response(cmd, ResponseCode.SYSTEM_ERROR, remark=exc.remark, ext_fields=ext),
            [rejected_event(now, exc.reason, request_context(conn, cmd), detail=exc.remark, **decoded_keys(cmd))],
        )


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

# Codes only some releases' name servers answer (ReleaseProfile.extra_codes).
_RELEASE_DISPATCH: dict[int, Handler] = {
    RequestCode.GET_BROKER_MEMBER_GROUP: RequestProcessor._get_broker_member_group,
}

SUPPORTED_CODES = frozenset(_DISPATCH)  # with every profile; a profile adds its extra_codes
# The requests whose handling may change the route tables (live table included) and so must be
# logged: refused while the event log cannot be written.
ROUTE_CHANGE_CODES = frozenset(int(c) for c in (
    RequestCode.REGISTER_BROKER, RequestCode.UNREGISTER_BROKER, RequestCode.WIPE_WRITE_PERM_OF_BROKER,
    RequestCode.ADD_WRITE_PERM_OF_BROKER, RequestCode.DELETE_TOPIC_IN_NAMESRV, RequestCode.QUERY_DATA_VERSION,
    RequestCode.BROKER_HEARTBEAT,
))
