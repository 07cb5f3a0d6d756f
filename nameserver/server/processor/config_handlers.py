"""Handlers of the small key-value stores: KV config (100-102, 219) and the server's own config
(318, 319). Neither changes routes."""

from __future__ import annotations

from typing import ClassVar

from nameserver.codec import (
    REQUEST_HEADERS,
    PropertiesError,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    decode_custom_header,
    fastjson,
    format_properties,
    make_response,
    parse_properties,
)
from nameserver.server.kvconfig import KVConfigManager, NamesrvConfigStore
from nameserver.server.processor.context import ConnectionContext, HandlerTable, Outcome


class ConfigHandlers:
    """The KV and config handlers.

    Args:
        kv: KV config (100/101/102/219).
        namesrv_config: the 318/319 property map.
    """

    def __init__(self, kv: KVConfigManager, namesrv_config: NamesrvConfigStore) -> None:
        self.kv = kv
        self.namesrv_config = namesrv_config

    def _put_kv_config(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.PUT_KV_CONFIG])
        self.kv.put_kv_config(h["namespace"], h["key"], h["value"])
        return Outcome(make_response(cmd, ResponseCode.SUCCESS))

    def _get_kv_config(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.GET_KV_CONFIG])
        value = self.kv.get_kv_config(h["namespace"], h["key"])
        if value is None:
            remark = f"No config item, Namespace: {h['namespace']} Key: {h['key']}"
            return Outcome(make_response(cmd, ResponseCode.QUERY_NOT_FOUND, remark=remark, ext_fields={}))
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, ext_fields={"value": value}))

    def _delete_kv_config(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.DELETE_KV_CONFIG])
        self.kv.delete_kv_config(h["namespace"], h["key"])
        return Outcome(make_response(cmd, ResponseCode.SUCCESS))

    def _get_kv_list_by_namespace(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.GET_KVLIST_BY_NAMESPACE])
        table = self.kv.get_kv_list_by_namespace(h["namespace"])
        if table is None:
            remark = f"No config item, Namespace: {h['namespace']}"
            return Outcome(make_response(cmd, ResponseCode.QUERY_NOT_FOUND, remark=remark))
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=fastjson.encode_kv_table(table)))

    def _update_namesrv_config(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
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

    def _get_namesrv_config(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        body = format_properties(self.namesrv_config.snapshot())
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=body or None))

    TABLE: ClassVar[HandlerTable] = {
        RequestCode.PUT_KV_CONFIG: _put_kv_config,
        RequestCode.GET_KV_CONFIG: _get_kv_config,
        RequestCode.DELETE_KV_CONFIG: _delete_kv_config,
        RequestCode.GET_KVLIST_BY_NAMESPACE: _get_kv_list_by_namespace,
        RequestCode.UPDATE_NAMESRV_CONFIG: _update_namesrv_config,
        RequestCode.GET_NAMESRV_CONFIG: _get_namesrv_config,
    }
