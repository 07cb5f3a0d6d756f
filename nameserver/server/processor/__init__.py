"""The request processor: one decoded command in, the response and the events out
(:class:`RequestProcessor`); the answers to route lookups, which the server also gives before a
request reaches it (:class:`RouteAnswers`); and the ``rejected`` events of refused frames and
connections."""

from nameserver.server.processor.context import ConnectionContext, Outcome
from nameserver.server.processor.rejections import connection_event, malformed_frame_event
from nameserver.server.processor.request_processor import ROUTE_CHANGE_CODES, SUPPORTED_CODES, RequestProcessor
from nameserver.server.processor.route_answers import ROUTE_CACHE_ENTRIES, TOPIC_NOT_EXIST_REMARK, RouteAnswers

__all__ = [
    "ROUTE_CACHE_ENTRIES",
    "ROUTE_CHANGE_CODES",
    "SUPPORTED_CODES",
    "TOPIC_NOT_EXIST_REMARK",
    "ConnectionContext",
    "Outcome",
    "RequestProcessor",
    "RouteAnswers",
    "connection_event",
    "malformed_frame_event",
]
