"""Which Apache RocketMQ release the server answers as: ``[nameserver] rocketmq_version``.

The route tables keep 4.9's semantics whichever release is chosen (docs/nameserver-semantics.md
D1); what differs between the releases' name servers on the wire is the frame of an answer and
a few remarks and request codes (docs/interop.md, "Release profiles"):

- **header type**: 4.9's ``NettyRemotingAbstract.processRequestCommand`` answers in the request's
  serialize type; 5.x's ``writeResponse`` never copies it, so every answer has the process
  default header, JSON (docs/remoting-protocol.md §3.1);
- **version**: an answer carries the server's ``MQVersion.CURRENT_VERSION`` (4.9.7: 407, 5.3.3: 479);
- **TOPIC_NOT_EXIST (17) remark**: ``FAQUrl.APPLY_TOPIC_URL`` of the release;
- **codes**: 5.x's ``DefaultRequestProcessor`` answers GET_BROKER_MEMBER_GROUP (901); 4.9 does not
  know it (answered as any unknown code, D3).

Example:
    >>> answer = make_response(make_request(105, {"topic": "T"}, serialize_type=1), 17)
    >>> PROFILES["5"].frame(answer).serialize_type, answer.version
    (0, 479)
"""

from __future__ import annotations

from dataclasses import dataclass

from nameserver.codec import RemotingCommand, RequestCode, SerializeType, Version, make_request, make_response  # noqa: F401 (the example)

DEFAULT_PROFILE = "4.9"


@dataclass(frozen=True)
class ReleaseProfile:
    """What a release's name server does on the wire where 4.9 and 5.x differ.

    Attributes:
        name: ``"4.9"`` or ``"5"``.
        server_version: the ``version`` of every answer (the release's ``MQVersion`` ordinal).
        answers_in_request_type: answer in the request's serialize type (4.9), else always JSON (5.x).
        faq_url: ``FAQUrl.APPLY_TOPIC_URL``, which the TOPIC_NOT_EXIST remark links.
        extra_codes: request codes this release answers beyond those both answer.
    """

    name: str
    server_version: int
    answers_in_request_type: bool
    faq_url: str
    extra_codes: frozenset[int] = frozenset()

    def frame(self, response: RemotingCommand) -> RemotingCommand:
        """Give an answer this release's header type and version (in place; returns it)."""
        response.version = self.server_version
        if not self.answers_in_request_type:
            response.serialize_type = SerializeType.JSON
        return response

    def topic_not_exist_remark(self, topic: str) -> str:
        """The remark of TOPIC_NOT_EXIST (17) for ``topic``, as this release words it
        (``ClientRequestProcessor`` / ``DefaultRequestProcessor.getRouteInfoByTopic``)."""
        return f"No topic route info in name server for the topic: {topic}\nSee {self.faq_url} for further details."


PROFILES = {
    "4.9": ReleaseProfile("4.9", int(Version.V4_9_7), True, "http://rocketmq.apache.org/docs/faq/"),
    "5": ReleaseProfile(
        "5",
        int(Version.V5_3_3),
        False,
        "https://rocketmq.apache.org/docs/bestPractice/06FAQ",
        frozenset({int(RequestCode.GET_BROKER_MEMBER_GROUP)}),
    ),
}
