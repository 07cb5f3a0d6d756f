"""Ask two name servers the same read requests and compare what they answer, frame and body.

The answers compared are GET_ROUTEINFO_BY_TOPIC (105) for every topic either server knows (and one
neither knows), GET_BROKER_CLUSTER_INFO (106), GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206) and
GET_TOPICS_BY_CLUSTER (224) for every cluster, each asked once with a JSON header and once with a
ROCKETMQ header. An answer is its whole frame: code, remark, flag, language, version, header type,
extFields and body; so ``nsaudit nameserver`` must run with the release profile of the server it is
compared with (``[nameserver] rocketmq_version``, docs/interop.md). The body is normalised before
comparing: JSON key order and list order carry no meaning, and the fields a 5.x name server adds to
a BrokerData are left out. What else differs is a deviation only when
``docs/nameserver-semantics.md`` lists it; each normalisation below names the deviation it stands for.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from nameserver.client import RemotingClient, route_request, simple_request
from nameserver.codec import SerializeType, fastjson

MISSING_TOPIC = "nsaudit-interop-no-such-topic"

# docs/nameserver-semantics.md D10: BrokerData fields a 5.x name server adds (the acting-master
# flag and zone of 5.x's controller mode); nsaudit answers RocketMQ 4.9's BrokerData.
FIELDS_5X_ONLY = ("enableActingMaster", "zoneName")
HEADER_TYPES = {"json": SerializeType.JSON, "rocketmq": SerializeType.ROCKETMQ}


def _sorted(value: Any) -> Any:
    """JSON with dict keys as strings in order and every list sorted (by its items' text)."""
    if isinstance(value, dict):
        return {
            str(k): _sorted(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0])) if k not in FIELDS_5X_ONLY
        }
    if isinstance(value, list):
        return sorted((_sorted(v) for v in value), key=repr)
    return value


async def _ask(client: RemotingClient, cmd, header: int) -> dict[str, Any]:
    answer = await client.request(dataclasses.replace(cmd, serialize_type=header))
    body = fastjson.loads(answer.body) if answer.body else None
    return {
        "code": answer.code,
        "remark": answer.remark,
        "flag": answer.flag,
        "language": answer.language,
        "version": answer.version,
        "header": SerializeType(answer.serialize_type).name,
        "ext_fields": answer.ext_fields or None,
        "body": _sorted(body),
    }


async def _answers(addr: str, topics: list[str], clusters: list[str]) -> dict[str, Any]:
    host, port = addr.rsplit(":", 1)
    client = await RemotingClient.connect(host, int(port))
    try:
        requests = {"cluster_info": simple_request(106), "topic_list": simple_request(206)}
        requests.update(
            {f"topics_by_cluster {cluster}": simple_request(224, {"cluster": cluster}) for cluster in clusters}
        )
        requests.update({f"route {topic}": route_request(topic) for topic in topics})
        return {
            f"{key} ({name} header)": await _ask(client, cmd, header)
            for key, cmd in requests.items()
            for name, header in HEADER_TYPES.items()
        }
    finally:
        await client.close()


async def _known(addr: str) -> tuple[set[str], set[str]]:
    host, port = addr.rsplit(":", 1)
    client = await RemotingClient.connect(host, int(port))
    try:
        info = await client.cluster_info()
        return set(await client.get_all_topic_list()), set(info["cluster_addr_table"])
    finally:
        await client.close()


async def _compare(java_addr: str, nsaudit_addr: str) -> tuple[dict[str, tuple[Any, Any]], int]:
    topics, clusters = set(), set()
    for addr in (java_addr, nsaudit_addr):
        t, c = await _known(addr)
        topics |= t
        clusters |= c
    topics.add(MISSING_TOPIC)
    java = await _answers(java_addr, sorted(topics), sorted(clusters))
    ours = await _answers(nsaudit_addr, sorted(topics), sorted(clusters))
    return {key: (java[key], ours[key]) for key in java if java[key] != ours[key]}, len(java)


def differences(java_addr: str, nsaudit_addr: str) -> dict[str, tuple[Any, Any]]:
    """``{answer: (java's, nsaudit's)}`` for every normalised answer that differs; empty when equal."""
    from tests.interop.rocketmq import run_async

    return run_async(_compare(java_addr, nsaudit_addr))[0]


def compared(java_addr: str, nsaudit_addr: str) -> tuple[dict[str, tuple[Any, Any]], int]:
    """:func:`differences` and how many answers were compared."""
    from tests.interop.rocketmq import run_async

    return run_async(_compare(java_addr, nsaudit_addr))
