"""JSON bodies as RocketMQ's fastjson 1.x writes and reads them (docs/remoting-protocol.md §10).

Pure functions, no clock, no I/O: :mod:`~nameserver.codec.fastjson.serializer` (values to bytes),
:mod:`~nameserver.codec.fastjson.bodies` (answer bodies), :mod:`~nameserver.codec.fastjson.parser`
(bytes to values, body parsers; :func:`loads` takes RFC 8259 JSON plus bare-integer object keys,
which come back as strings: ``{0:"a"}`` and ``{"0":"a"}`` parse equal).

Example:
    >>> dumps({1: "b", 0: "a"})
    b'{0:"a",1:"b"}'
"""

from nameserver.codec.fastjson.bodies import (
    encode_cluster_info,
    encode_data_version,
    encode_kv_table,
    encode_route,
    encode_topic_list,
)
from nameserver.codec.fastjson.parser import (
    FastjsonError,
    loads,
    parse_cluster_info,
    parse_kv_table,
    parse_route,
    parse_topic_list,
)
from nameserver.codec.fastjson.serializer import dumps, java_double_text, quote

__all__ = [
    "FastjsonError",
    "dumps",
    "encode_cluster_info",
    "encode_data_version",
    "encode_kv_table",
    "encode_route",
    "encode_topic_list",
    "java_double_text",
    "loads",
    "parse_cluster_info",
    "parse_kv_table",
    "parse_route",
    "parse_topic_list",
    "quote",
]
