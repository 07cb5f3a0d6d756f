"""The request processor: one decoded command in, the response and the events out.

RocketMQ's ``DefaultRequestProcessor``, as a pure function of ``(command, connection, now)``: no
socket, clock or file. It owns the only path to the route tables, so the asyncio shell can run
"change + event append" as one critical section (docs/nameserver-semantics.md A7) by calling :meth:`process` and
appending the returned events back to back. Dispatch is a dict from request code to handler
(docs/remoting-protocol.md §7), joined from the tables of the handler classes, each of which names
its own methods in its ``TABLE``: route changes (:mod:`.route_handlers`), route lookups 105/106
(:mod:`.route_answers`), listings (:mod:`.lookup_handlers`), KV and config
(:mod:`.config_handlers`). Errors follow §9.2.

Example:
    >>> processor = RequestProcessor(RouteInfoManager())
    >>> request = make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "T"}, opaque=1)
    >>> outcome = processor.process(request, ConnectionContext("c1", "127.0.0.1:5000"), now=0)
    >>> outcome.response.code, outcome.events, outcome.changed
    (17, [], False)
"""

from __future__ import annotations

from nameserver.acl import AccessController, Denial
from nameserver.codec import (
    NO_LIMITS,
    RPC_ONEWAY,
    RPC_TYPE,
    CrcMismatch,
    RegisterLimits,
    RemotingCommand,
    RequestError,
    ResponseCode,
    make_response,
)
from nameserver.routes.manager import Event, RouteInfoManager, rejected_event
from nameserver.server.bodycache import RegisterBodyCache
from nameserver.server.kvconfig import KVConfigManager, NamesrvConfigStore
from nameserver.server.processor.config_handlers import ConfigHandlers
from nameserver.server.processor.context import (
    ConnectionContext,
    Handler,
    Outcome,
    bind_table,
    decoded_keys,
    request_context,
)
from nameserver.server.processor.lookup_handlers import LookupHandlers
from nameserver.server.processor.route_answers import RouteAnswers
from nameserver.server.processor.route_handlers import RouteHandlers
from nameserver.server.profile import DEFAULT_PROFILE, PROFILES, ReleaseProfile

# The handler classes; each names its requests in its own ``TABLE``.
_HANDLER_CLASSES = (RouteHandlers, RouteAnswers, LookupHandlers, ConfigHandlers)
# Codes only some releases' name servers answer (ReleaseProfile.extra_codes).
_RELEASE_CODES = frozenset(code for profile in PROFILES.values() for code in profile.extra_codes)


class RequestProcessor:
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

    Attributes:
        route_answers: the answers to route lookups (105, 106) and their kept encodings, which
            the server also answers from before a request reaches :meth:`process`.
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
        self.kv = kv or KVConfigManager()
        self.namesrv_config = namesrv_config or NamesrvConfigStore()
        self.register_bodies = RegisterBodyCache(limits=register_limits)
        # with access control on, every request must reach process() to be checked
        self.route_answers = RouteAnswers(routes, self.profile, shortcuts=access is None)
        handlers = (
            RouteHandlers(routes, self.kv, self.register_bodies),
            self.route_answers,
            LookupHandlers(routes),
            ConfigHandlers(self.kv, self.namesrv_config),
        )
        self._dispatch: dict[int, Handler] = {
            code: handler
            for owner in handlers
            for code, handler in bind_table(owner).items()
            if code not in _RELEASE_CODES or code in self.profile.extra_codes
        }

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
                outcome = handler(cmd, conn, now)
        except RequestError as exc:
            outcome = self._refused(cmd, conn, now, exc)
        except Exception as exc:  # noqa: BLE001 - the server never dies of client input (§9.2)
            self.route_answers.invalidate()  # a handler that failed midway may have touched a table
            outcome = Outcome(
                make_response(cmd, ResponseCode.SYSTEM_ERROR, remark=f"{type(exc).__name__}: {exc}"),
                [
                    rejected_event(
                        now, "internal_error", request_context(conn, cmd), detail=f"{type(exc).__name__}: {exc}"
                    )
                ],
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
            [
                rejected_event(
                    now,
                    "no_permission",
                    request_context(conn, cmd),
                    detail=denial.detail,
                    access_key=denial.access_key,
                    **decoded_keys(cmd),
                )
            ],
        )

    def _refused(self, cmd: RemotingCommand, conn: ConnectionContext, now: int, exc: RequestError) -> Outcome:
        # 103's own CRC answer carries extFields {}; exception-path answers carry none
        # (docs/remoting-protocol.md §4).
        ext: dict[str, str] | None = {} if isinstance(exc, CrcMismatch) else None
        return Outcome(
            make_response(cmd, ResponseCode.SYSTEM_ERROR, remark=exc.remark, ext_fields=ext),
            [rejected_event(now, exc.reason, request_context(conn, cmd), detail=exc.remark, **decoded_keys(cmd))],
        )


# The codes answered with every profile; a profile adds its extra_codes.
SUPPORTED_CODES = frozenset(int(code) for cls in _HANDLER_CLASSES for code in cls.TABLE) - _RELEASE_CODES
# The requests whose handling may change the route tables (live table included) and so must be
# logged: refused while the event log cannot be written.
ROUTE_CHANGE_CODES = frozenset(int(code) for code in RouteHandlers.TABLE)
