"""``[nameserver] rocketmq_version``: the server answers as the chosen release's name server where
4.9 and 5.x differ (docs/interop.md, "Release profiles"): the header type and version of every
answer, the TOPIC_NOT_EXIST remark, and GET_BROKER_MEMBER_GROUP (901), which only 5.x answers.

Each is checked on a real socket, so the cached and byte-level lookup paths are covered too.
"""

from __future__ import annotations

import dataclasses

import pytest

from common.config import ConfigError, NameServerConfig
from nameserver.client import RemotingClient
from nameserver.codec import FrameDecoder, RemotingCommand, encode_frame, fastjson, make_request
from tests.nameserver.server.test_server import JSON, ROCKETMQ, M, RawConn, arun, register, running

FAQ_49 = "\nSee http://rocketmq.apache.org/docs/faq/ for further details."
FAQ_5 = "\nSee https://rocketmq.apache.org/docs/bestPractice/06FAQ for further details."


def _decoded(answer: bytes) -> RemotingCommand:
    decoder = FrameDecoder()
    decoder.feed(answer)
    return decoder.next_command()


async def _answers(tmp_path, version: str, requests: list[RemotingCommand], repeat: int = 2) -> list[RemotingCommand]:
    """Each request ``repeat`` times over one connection of a server with that profile (a lookup
    seen before is answered from its bytes), after broker-a registered TopicA."""
    async with running(tmp_path, rocketmq_version=version) as ctl:
        broker = await RemotingClient.connect(ctl.host, ctl.port)
        await register(broker)
        conn = await RawConn.open(ctl)
        out = []
        opaque = 1
        for cmd in requests:
            for _ in range(repeat):
                await conn.send(encode_frame(dataclasses.replace(cmd, opaque=opaque)))
                out.append(_decoded(await conn.frame()))
                opaque += 1
        await broker.close()
        return out


LOOKUPS = [
    make_request(code, ext, version=407, serialize_type=serialize_type)
    for serialize_type in (JSON, ROCKETMQ)
    for code, ext in ((105, {"topic": "TopicA"}), (105, {"topic": "NoSuchTopic"}), (106, None))
]


@pytest.mark.parametrize(
    "version, header_types, answer_version, faq",
    [("4.9", [JSON, JSON, JSON, ROCKETMQ, ROCKETMQ, ROCKETMQ], 407, FAQ_49), ("5", [JSON] * 6, 479, FAQ_5)],
)
def test_answers_have_the_releases_header_type_version_and_remark(tmp_path, version, header_types, answer_version, faq):
    answers = arun(_answers(tmp_path, version, LOOKUPS))
    assert [a.serialize_type for a in answers[::2]] == header_types
    assert [a.serialize_type for a in answers[1::2]] == header_types  # the same when answered from the bytes
    assert {a.version for a in answers} == {answer_version}
    assert [a.code for a in answers] == [0, 0, 17, 17, 0, 0] * 2
    missing = [a for a in answers if a.code == 17]
    assert {a.remark for a in missing} == {"No topic route info in name server for the topic: NoSuchTopic" + faq}
    # the bodies do not depend on the profile: the same route whatever the header
    routes = {a.body for a in answers if a.code == 0 and b"queueDatas" in a.body}
    assert len(routes) == 1 and b'"brokerName":"broker-a"' in routes.pop()


def test_get_broker_member_group_is_answered_by_the_5_profile_only(tmp_path):
    member_group = make_request(901, {"clusterName": "C1", "brokerName": "broker-a"})
    unknown_group = make_request(901, {"clusterName": "C1", "brokerName": "nobody"})
    (ours_49,) = arun(_answers(tmp_path / "a", "4.9", [member_group], repeat=1))
    assert ours_49.code == 3 and ours_49.remark == " request type 901 not supported"
    found, missing = arun(_answers(tmp_path / "b", "5", [member_group, unknown_group], repeat=1))
    assert found.code == 0 and found.remark == "not set any response code"  # 5.x's own, never cleared
    assert fastjson.loads(found.body) == {
        "brokerMemberGroup": {"brokerAddrs": {"0": M}, "brokerName": "broker-a", "cluster": "C1"}
    }
    assert found.body == b'{"brokerMemberGroup":{"brokerAddrs":{0:"%s"},"brokerName":"broker-a","cluster":"C1"}}' % (
        M.encode()
    )
    assert fastjson.loads(missing.body)["brokerMemberGroup"]["brokerAddrs"] == {}


def test_a_register_answer_follows_the_profile_too(tmp_path):
    async def run():
        async with running(tmp_path, rocketmq_version="5") as ctl:
            broker = await RemotingClient.connect(ctl.host, ctl.port)
            answer = await register(broker)
            await broker.close()
            return answer

    answer = arun(run())
    assert answer.version == 479 and answer.serialize_type == JSON


@pytest.mark.parametrize("value", ["5.3", "4", ""])
def test_an_unknown_release_is_a_config_error(value):
    with pytest.raises(ConfigError, match="rocketmq_version must be"):
        NameServerConfig(rocketmq_version=value)
