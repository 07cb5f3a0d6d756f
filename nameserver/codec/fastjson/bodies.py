"""Body builders (docs/remoting-protocol.md §10.6): the route, cluster info, topic lists, KV
tables and data versions as a 4.9 name server answers them.

Body builders take the route table's value objects *or* plain mappings with the same
snake_case names (duck typed), so the server passes its dataclasses straight in; the names
each reads are in :func:`encode_route` and :func:`encode_cluster_info`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from operator import attrgetter
from typing import Any

from nameserver.codec.fastjson.serializer import dumps, quote
from nameserver.model import DataVersion


def _get(obj: Any, name: str) -> Any:
    if isinstance(obj, Mapping):
        return obj.get(name)
    return getattr(obj, name, None)


# The server passes dataclasses: read their attributes in one C call, fall back to mappings.
_BROKER_NAMES = ("broker_name", "cluster", "broker_addrs")
_QUEUE_NAMES = ("broker_name", "perm", "read_queue_nums", "topic_sys_flag", "write_queue_nums")
_BROKER_DATA = attrgetter(*_BROKER_NAMES)
_QUEUE_DATA = attrgetter(*_QUEUE_NAMES)


def _fields(obj: Any, getter: attrgetter[tuple[Any, ...]], names: tuple[str, ...]) -> tuple[Any, ...]:
    try:
        return getter(obj)
    except AttributeError:
        if not isinstance(obj, Mapping):
            raise
        return tuple(map(obj.get, names))


def _name_key(fields: tuple[Any, ...]) -> str:
    return fields[0] or ""


def _sorted_ids(addrs: Mapping[Any, str]) -> list[tuple[int, str]]:
    """Broker ids in numeric order (docs/nameserver-semantics.md A3), null addresses dropped."""
    try:
        ids = sorted(addrs.items())  # keys are unique: only keys are compared
        if not ids or type(ids[0][0]) is int:
            return [(i, a) for i, a in ids if a is not None]
    except TypeError:  # mixed key types
        pass
    return sorted((int(k), a) for k, a in addrs.items() if a is not None)  # keys parsed from text


def _broker_data_text(fields: tuple[Any, ...], standard: bool) -> str:
    name, cluster, addrs = fields
    if standard:
        entries = ",".join([f'"{i}":{quote(a, True)}' for i, a in _sorted_ids(addrs or {})])
    else:
        entries = ",".join([f"{i}:{quote(a)}" for i, a in _sorted_ids(addrs or {})])
    if name is not None and cluster is not None:  # the usual case, in one step
        return (
            f'{{"brokerAddrs":{{{entries}}},"brokerName":{quote(name, standard)},"cluster":{quote(cluster, standard)}}}'
        )
    parts = ['{"brokerAddrs":{', entries, "}"]
    if name is not None:  # §10.1 rule 2: null fields are omitted
        parts += [',"brokerName":', quote(name, standard)]
    if cluster is not None:
        parts += [',"cluster":', quote(cluster, standard)]
    parts.append("}")
    return "".join(parts)


def _queue_data_text(fields: tuple[Any, ...], standard: bool) -> str:
    name, perm, read_queue_nums, topic_sys_flag, write_queue_nums = fields
    head = '{"brokerName":' + quote(name, standard) + "," if name is not None else "{"
    return (
        f'{head}"perm":{perm:d},"readQueueNums":{read_queue_nums:d}'
        f',"topicSysFlag":{topic_sys_flag or 0:d},"writeQueueNums":{write_queue_nums:d}}}'
    )


def encode_route(route: Any, standard: bool = False) -> bytes:
    """TopicRouteData body (§10.6): ``{"brokerDatas":[..],"filterServerTable":{..},"queueDatas":[..]}``.

    Args:
        route: a TopicRouteData-like object or mapping with ``broker_datas``, ``queue_datas`` and
            ``filter_server_table``. A BrokerData has ``cluster``, ``broker_name`` and
            ``broker_addrs`` (``{int: str}``); a QueueData has ``broker_name``, ``read_queue_nums``,
            ``write_queue_nums``, ``perm`` and ``topic_sys_flag`` (``nameserver.model.QueueData``).
            Both lists are written sorted by broker name; ``filter_server_table`` maps a broker
            address to its filter-server list (written as given) and may be missing or ``None``
            (``{}``).
        standard: the standard form (request version >= 401 or ``acceptStandardJsonOnly``, §10.3).
    """
    broker_fields = [_fields(b, _BROKER_DATA, _BROKER_NAMES) for b in _get(route, "broker_datas") or ()]
    queue_fields = [_fields(q, _QUEUE_DATA, _QUEUE_NAMES) for q in _get(route, "queue_datas") or ()]
    brokers = ",".join([_broker_data_text(f, standard) for f in sorted(broker_fields, key=_name_key)])
    queues = ",".join([_queue_data_text(f, standard) for f in sorted(queue_fields, key=_name_key)])
    filters = _get(route, "filter_server_table") or {}
    filter_text = ",".join(
        quote(addr, standard) + ":[" + ",".join(quote(f, standard) for f in servers) + "]"
        for addr, servers in sorted(filters.items())
        if servers is not None
    )
    text = '{"brokerDatas":[' + brokers + '],"filterServerTable":{' + filter_text + '},"queueDatas":[' + queues + "]}"
    return text.encode("utf-8", "replace")


def encode_cluster_info(cluster_info: Any) -> bytes:
    """ClusterInfo body (§10.6), always the default form (§7, code 106).

    Args:
        cluster_info: a ClusterInfo-like object or mapping with ``broker_addr_table`` (broker
            name -> BrokerData-like, as in :func:`encode_route`) and ``cluster_addr_table``
            (cluster name -> broker names, any iterable; written sorted).
    """
    brokers = ",".join(
        quote(name) + ":" + _broker_data_text(_fields(bd, _BROKER_DATA, _BROKER_NAMES), False)
        for name, bd in sorted((_get(cluster_info, "broker_addr_table") or {}).items())
        if bd is not None
    )
    clusters = ",".join(
        quote(cluster) + ":[" + ",".join(quote(n) for n in sorted(names)) + "]"
        for cluster, names in sorted((_get(cluster_info, "cluster_addr_table") or {}).items())
        if names is not None
    )
    text = '{"brokerAddrTable":{' + brokers + '},"clusterAddrTable":{' + clusters + "}}"
    return text.encode("utf-8", "replace")


def encode_topic_list(topics: Iterable[str], broker_addr: str | None = None) -> bytes:
    """TopicList body: ``{"topicList":[..]}``, topics sorted; ``brokerAddr`` only when given (304)."""
    names = ",".join(quote(t) for t in sorted(topics))
    head = '{"brokerAddr":' + quote(broker_addr) + "," if broker_addr is not None else "{"
    return (head + '"topicList":[' + names + "]}").encode("utf-8", "replace")


def encode_kv_table(table: Mapping[str, str]) -> bytes:
    """KVTable body: ``{"table":{"<key>":"<value>",..}}``, keys sorted, ``None`` values omitted.

    Example:
        >>> encode_kv_table({"TopicTest": "broker-a:4"})
        b'{"table":{"TopicTest":"broker-a:4"}}'
    """
    return dumps({"table": dict(table)})


def encode_data_version(data_version: DataVersion) -> bytes:
    """DataVersion body in the 4.x form ``{"counter":3,"timestamp":1700000000000}`` (G10f)."""
    return f'{{"counter":{data_version.counter},"timestamp":{data_version.timestamp}}}'.encode()
