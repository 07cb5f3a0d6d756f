"""Handlers of the listings (206, 224, 304, 311-313) and of 5.x's GET_BROKER_MEMBER_GROUP (901);
route lookups (105, 106) are :mod:`nameserver.server.processor.route_answers`'."""

from __future__ import annotations

from typing import ClassVar

from nameserver.codec import (
    REQUEST_HEADERS,
    RemotingCommand,
    RequestCode,
    ResponseCode,
    decode_custom_header,
    fastjson,
    make_response,
)
from nameserver.routes.manager import UNIT_FLAGS, RouteInfoManager
from nameserver.server.processor.context import ConnectionContext, HandlerTable, Outcome


class LookupHandlers:
    """The listing handlers: read the route tables, change nothing, log nothing.

    Args:
        routes: the route tables they read.
    """

    def __init__(self, routes: RouteInfoManager) -> None:
        self.routes = routes

    def _get_all_topic_list(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        body = fastjson.encode_topic_list(self.routes.get_all_topic_list())
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=body))

    def _get_topics_by_cluster(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.GET_TOPICS_BY_CLUSTER])
        body = fastjson.encode_topic_list(self.routes.get_topics_by_cluster(h["cluster"]))
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=body))

    def _get_system_topic_list(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        items, broker_addr = self.routes.get_system_topic_list()
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=fastjson.encode_topic_list(items, broker_addr)))

    def _get_unit_topic_list(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        topics = self.routes.get_unit_topics(*UNIT_FLAGS[cmd.code])
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, body=fastjson.encode_topic_list(topics)))

    def _get_broker_member_group(self, cmd: RemotingCommand, conn: ConnectionContext, now: int) -> Outcome:
        # 5.x's DefaultRequestProcessor.getBrokerMemberGroup (the "5" profile only): the group's
        # brokerAddrs, empty when the name has no BrokerData. 5.x makes the answer with
        # createResponseCommand(null) and never clears its remark, so a SUCCESS carries it.
        h = decode_custom_header(cmd.ext_fields, REQUEST_HEADERS[RequestCode.GET_BROKER_MEMBER_GROUP])
        broker_data = self.routes.broker_addr_table.get(h["brokerName"])
        addrs = dict(broker_data.broker_addrs) if broker_data is not None else {}
        body = fastjson.dumps(
            {"brokerMemberGroup": {"brokerAddrs": addrs, "brokerName": h["brokerName"], "cluster": h["clusterName"]}}
        )
        return Outcome(make_response(cmd, ResponseCode.SUCCESS, remark="not set any response code", body=body))

    TABLE: ClassVar[HandlerTable] = {
        RequestCode.GET_ALL_TOPIC_LIST_FROM_NAMESERVER: _get_all_topic_list,
        RequestCode.GET_TOPICS_BY_CLUSTER: _get_topics_by_cluster,
        RequestCode.GET_SYSTEM_TOPIC_LIST_FROM_NS: _get_system_topic_list,
        RequestCode.GET_UNIT_TOPIC_LIST: _get_unit_topic_list,
        RequestCode.GET_HAS_UNIT_SUB_TOPIC_LIST: _get_unit_topic_list,
        RequestCode.GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST: _get_unit_topic_list,
        # only some releases' name servers answer it (ReleaseProfile.extra_codes)
        RequestCode.GET_BROKER_MEMBER_GROUP: _get_broker_member_group,
    }
