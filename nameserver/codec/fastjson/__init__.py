"""JSON bodies as RocketMQ's fastjson 1.x writes and reads them (docs/remoting-protocol.md §10).

Two output forms (§10.1, §10.3):

* **default form** (``standard=False``): non-string map keys (broker ids) unquoted, ``{0:"addr"}``,
  which is not valid JSON; non-ASCII written as raw UTF-8.
* **standard form** (``standard=True``, fastjson ``BrowserCompatible``): every key quoted,
  ``/`` written ``\\/`` and every character >= U+007F written ``\\uXXXX`` (uppercase UTF-16 units).

Both forms: no whitespace, object fields in alphabetical order, null fields omitted, map keys
sorted (strings by code point, which is UTF-8 byte order; broker ids numerically;
docs/nameserver-semantics.md A3).

Input (:func:`loads`) is RFC 8259 JSON plus bare-integer object keys, which come back as strings
(``{0:"a"}`` and ``{"0":"a"}`` parse equal). Pure functions: no clock, no I/O.

Body builders take the route table's value objects *or* plain mappings with the same
snake_case names (duck typed), so the server passes its dataclasses straight in:

* TopicRouteData: ``broker_datas``, ``queue_datas``, ``filter_server_table``
* BrokerData: ``cluster``, ``broker_name``, ``broker_addrs`` (``{int: str}``)
* QueueData: ``broker_name``, ``read_queue_nums``, ``write_queue_nums``, ``perm``,
  ``topic_sys_flag`` (``nameserver.model.QueueData``)
* ClusterInfo: ``broker_addr_table`` (name -> BrokerData), ``cluster_addr_table`` (cluster -> names)

Example:
    >>> encode_kv_table({"TopicTest": "broker-a:4"})
    b'{"table":{"TopicTest":"broker-a:4"}}'
    >>> dumps({1: "b", 0: "a"})
    b'{0:"a",1:"b"}'

Parts: :mod:`~nameserver.codec.fastjson.serializer` (values to bytes),
:mod:`~nameserver.codec.fastjson.bodies` (answer bodies), :mod:`~nameserver.codec.fastjson.parser`
(bytes to values, body parsers).
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
    "FastjsonError", "dumps", "encode_cluster_info", "encode_data_version", "encode_kv_table", "encode_route",
    "encode_topic_list", "java_double_text", "loads", "parse_cluster_info", "parse_kv_table", "parse_route",
    "parse_topic_list", "quote",
]
