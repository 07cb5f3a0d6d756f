"""Ask two name servers the same read requests and compare what they answer.

The four answers compared are GET_ROUTEINFO_BY_TOPIC (105) for every topic either server knows
(and one neither knows), GET_BROKER_CLUSTER_INFO (106), GET_ALL_TOPIC_LIST_FROM_NAMESERVER (206)
and GET_TOPICS_BY_CLUSTER (224) for every cluster. Answers are normalised before comparing: JSON
key order and list order carry no meaning, and a remark's wording is RocketMQ's documentation link.
What else differs is a deviation only when ``docs/nameserver-semantics.md`` lists it; each
normalisation below names the deviation it stands for.
"""

from __future__ import annotations

from typing import Any

from nameserver.client import RemotingClient, route_request, simple_request
from nameserver.codec import fastjson

MISSING_TOPIC = "nsaudit-interop-no-such-topic"

# docs/nameserver-semantics.md D10: BrokerData fields a 5.x name server adds (the acting-master
# flag and zone of 5.x's controller mode); nsaudit answers RocketMQ 4.9's BrokerData.
FIELDS_5X_ONLY = ("enableActingMaster", "zoneName")


def _sorted(value: Any) -> Any:
    """JSON with dict keys as strings in order and every list sorted (by its items' text)."""
    if isinstance(value, dict):
        return {str(k): _sorted(v) for k, v in sorted(value.items(), key=lambda kv: str(kv[0]))
                if k not in FIELDS_5X_ONLY}
    if isinstance(value, list):
        return sorted((_sorted(v) for v in value), key=repr)
    return value


async def _ask(client: RemotingClient, cmd) -> dict[str, Any]:
    answer = await client.request(cmd)
    body = fastjson.loads(answer.body) if answer.body else None
    return {"code": answer.code, "body": _sorted(body)}


async def _answers(addr: str, topics: list[str], clusters: list[str]) -> dict[str, Any]:
    host, port = addr.rsplit(":", 1)
    client = await RemotingClient.connect(host, int(port))
    try:
        out = {"cluster_info": await _ask(client, simple_request(106)),
               "topic_list": await _ask(client, simple_request(206))}
        for cluster in clusters:
            out[f"topics_by_cluster {cluster}"] = await _ask(client, simple_request(224, {"cluster": cluster}))
        for topic in topics:
            out[f"route {topic}"] = await _ask(client, route_request(topic))
        return out
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


async def _compare(java_addr: str, nsaudit_addr: str) -> dict[str, tuple[Any, Any]]:
    topics, clusters = set(), set()
    for addr in (java_addr, nsaudit_addr):
        t, c = await _known(addr)
        topics |= t
        clusters |= c
    topics.add(MISSING_TOPIC)
    java = await _answers(java_addr, sorted(topics), sorted(clusters))
    ours = await _answers(nsaudit_addr, sorted(topics), sorted(clusters))
    return {key: (java[key], ours[key]) for key in java if java[key] != ours[key]}


def differences(java_addr: str, nsaudit_addr: str) -> dict[str, tuple[Any, Any]]:
    """``{answer: (java's, nsaudit's)}`` for every normalised answer that differs; empty when equal."""
    from tests.interop.rocketmq import run_async

    return run_async(_compare(java_addr, nsaudit_addr))
