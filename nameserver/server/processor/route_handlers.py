"""Handlers of the requests that change the route tables: broker traffic (103, 104, 322, 904)
and admin (205, 216, 327)."""

from __future__ import annotations

from typing import ClassVar

from nameserver.codec import (
    REQUEST_HEADERS,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    decode_custom_header,
    decode_data_version_body,
    fastjson,
    make_response,
)
from nameserver.routes.manager import RouteInfoManager
from nameserver.server.bodycache import RegisterBodyCache
from nameserver.server.kvconfig import ORDER_TOPIC_CONFIG, KVConfigManager
from nameserver.server.processor.context import ConnectionContext, HandlerTable, Outcome, request_context

# read on every registration: a module global, not a lookup through the enum class
_REGISTER_HEADER = REQUEST_HEADERS[RequestCode.REGISTER_BROKER]
_SUCCESS = ResponseCode.SUCCESS


class RouteHandlers:
    """The route-changing handlers: each returns the events of what it changed.

    Args:
        routes: the route tables they change.
        kv: the KV config (a registration's answer carries ``ORDER_TOPIC_CONFIG``).
        register_bodies: the decoder of REGISTER_BROKER bodies, with its caps and cache.
    """

    def __init__(self, routes: RouteInfoManager, kv: KVConfigManager, register_bodies: RegisterBodyCache) -> None:
        self.routes = routes
        self.kv = kv
        self.register_bodies = register_bodies

    def _register_broker(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, _REGISTER_HEADER)
        # docs/remoting-protocol.md §8: negative version, CRC, then the body; every refusal happens
        # before any table change.
        body, digest = self.register_bodies.decode(
            cmd.body, version=cmd.version, compressed=h["compressed"], body_crc32=h["bodyCrc32"], now=now
        )
        result = self.routes.register_broker(
            h["clusterName"],
            h["brokerAddr"],
            h["brokerName"],
            h["brokerId"],
            h["haServerAddr"],
            body.data_version,
            body.topics,
            body.filter_servers,
            now,
            request_context(conn, cmd),
            request_version=cmd.version,
            digest=digest,
        )
        ext: dict[str, str] = {}
        # a slave learns its live master (docs/nameserver-semantics.md §2.1 step 8)
        if result.master_addr is not None:
            ext["masterAddr"] = result.master_addr
            if result.ha_server_addr is not None:
                ext["haServerAddr"] = result.ha_server_addr
        order = self.kv.get_kv_list_by_namespace(ORDER_TOPIC_CONFIG)
        body_out = fastjson.encode_kv_table(order) if order is not None else None
        return Outcome(make_response(cmd, _SUCCESS, ext_fields=ext, body=body_out), result.events, True)

    def _unregister_broker(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.UNREGISTER_BROKER])
        events = self.routes.unregister_broker(
            h["clusterName"], h["brokerAddr"], h["brokerName"], h["brokerId"], now, request_context(conn, cmd)
        )
        return Outcome(make_response(cmd, ResponseCode.SUCCESS), events, True)

    def _broker_heartbeat(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.BROKER_HEARTBEAT])
        events = self.routes.broker_heartbeat(
            h["clusterName"], h["brokerAddr"], h["brokerName"], now, request_context(conn, cmd)
        )
        return Outcome(make_response(cmd, ResponseCode.SUCCESS), events, True)

    def _query_data_version(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.QUERY_DATA_VERSION])
        data_version = decode_data_version_body(cmd.body, now)
        changed, stored, events = self.routes.query_data_version(
            h["clusterName"],
            h["brokerAddr"],
            h["brokerName"],
            h["brokerId"],
            data_version,
            now,
            request_context(conn, cmd),
        )
        body = fastjson.encode_data_version(stored) if stored is not None else None
        ext = {"changed": "true" if changed else "false"}
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, ext_fields=ext, body=body), events, True)

    # ------------------------------------------------------------------ admin (205, 216, 327)

    def _wipe_write_perm(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.WIPE_WRITE_PERM_OF_BROKER])
        count, events = self.routes.wipe_write_perm_of_broker(h["brokerName"], now, request_context(conn, cmd))
        return Outcome(
            make_response(cmd, ResponseCode.SUCCESS, ext_fields={"wipeTopicCount": str(count)}), events, True
        )

    def _add_write_perm(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.ADD_WRITE_PERM_OF_BROKER])
        count, events = self.routes.add_write_perm_of_broker(h["brokerName"], now, request_context(conn, cmd))
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, ext_fields={"addTopicCount": str(count)}), events, True)

    def _delete_topic(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.DELETE_TOPIC_IN_NAMESRV])
        events = self.routes.delete_topic(h["topic"], h["clusterName"], now, request_context(conn, cmd))
        return Outcome(make_response(cmd, ResponseCode.SUCCESS), events, True)

    TABLE: ClassVar[HandlerTable] = {
        RequestCode.REGISTER_BROKER: _register_broker,
        RequestCode.UNREGISTER_BROKER: _unregister_broker,
        RequestCode.BROKER_HEARTBEAT: _broker_heartbeat,
        RequestCode.QUERY_DATA_VERSION: _query_data_version,
        RequestCode.WIPE_WRITE_PERM_OF_BROKER: _wipe_write_perm,
        RequestCode.ADD_WRITE_PERM_OF_BROKER: _add_write_perm,
        RequestCode.DELETE_TOPIC_IN_NAMESRV: _delete_topic,
    }
