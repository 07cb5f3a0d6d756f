"""Numbers of the remoting protocol: codes, languages, versions, flag bits, limits.

Re-exported by :mod:`nameserver.codec`; import them from there. Sections cited are those of
docs/remoting-protocol.md.
"""

from __future__ import annotations

from enum import IntEnum

# §2: Netty allows a whole frame of 16 MiB, the 4-byte length field included.
MAX_FRAME_BYTES = 16_777_216
MAX_FRAME_LENGTH = MAX_FRAME_BYTES - 4  # largest value of the length field
MAX_HEADER_LENGTH = 0xFFFFFF  # 24-bit header length (§2)

# §3.2 flag bits.
RPC_TYPE = 1  # bit 0: 0 = request, 1 = response
RPC_ONEWAY = 2  # bit 1: the request expects no response

ROCKETMQ_FIXED_HEADER_BYTES = 21  # §5: 2+1+2+4+4+4+4


def is_response(flag: int) -> bool:
    """True when flag bit 0 (RPC_TYPE) marks a response (§3.2)."""
    return flag & RPC_TYPE == RPC_TYPE


def is_oneway(flag: int) -> bool:
    """True when flag bit 1 (RPC_ONEWAY) marks a request that expects no response (§3.2)."""
    return flag & RPC_ONEWAY == RPC_ONEWAY


class SerializeType(IntEnum):
    """Header serialization, byte 4 of a frame (§3.1)."""

    JSON = 0
    ROCKETMQ = 1


class LanguageCode(IntEnum):
    """Sender language (§3.4): JSON headers carry the name, ROCKETMQ headers the byte."""

    JAVA = 0
    CPP = 1
    DOTNET = 2
    PYTHON = 3
    DELPHI = 4
    ERLANG = 5
    RUBY = 6
    OTHER = 7
    HTTP = 8
    GO = 9
    PHP = 10
    OMS = 11
    RUST = 12
    NODE_JS = 13


# A JSON header whose language is missing or not a known name (§4: "read as unknown").
UNKNOWN_LANGUAGE = -1

LANGUAGE_BY_NAME: dict[str, LanguageCode] = {lang.name: lang for lang in LanguageCode}


class Version(IntEnum):
    """Ordinals of RocketMQ's ``MQVersion.Version`` that matter here (§3.5)."""

    V3_0_11 = 37  # REGISTER_BROKER body format boundary (§8.1)
    V4_0_0 = 213
    V4_3_0 = 273  # compressed / bodyCrc32 header fields exist since
    V4_5_1 = 315
    V4_9_4 = 401  # route JSON form boundary (§10.3)
    V4_9_7 = 407  # our server's version in every response
    V5_0_0 = 413  # 5.x compressed body has a mapping section (§8.3)
    V5_3_3 = 479


SERVER_VERSION = Version.V4_9_7


class RequestCode(IntEnum):
    """Request codes of the name server's world (§7), as RocketMQ's ``RequestCode`` numbers them."""

    PUT_KV_CONFIG = 100
    GET_KV_CONFIG = 101
    DELETE_KV_CONFIG = 102
    REGISTER_BROKER = 103
    UNREGISTER_BROKER = 104
    GET_ROUTEINFO_BY_TOPIC = 105
    GET_BROKER_CLUSTER_INFO = 106
    WIPE_WRITE_PERM_OF_BROKER = 205
    GET_ALL_TOPIC_LIST_FROM_NAMESERVER = 206
    DELETE_TOPIC_IN_BROKER = 215  # broker-side; not handled by the name server
    DELETE_TOPIC_IN_NAMESRV = 216
    REGISTER_TOPIC_IN_NAMESRV = 217  # 5.x; not supported here (docs/nameserver-semantics.md D6)
    GET_KVLIST_BY_NAMESPACE = 219
    GET_TOPICS_BY_CLUSTER = 224
    GET_SYSTEM_TOPIC_LIST_FROM_NS = 304
    GET_UNIT_TOPIC_LIST = 311
    GET_HAS_UNIT_SUB_TOPIC_LIST = 312
    GET_HAS_UNIT_SUB_UNUNIT_TOPIC_LIST = 313
    UPDATE_NAMESRV_CONFIG = 318
    GET_NAMESRV_CONFIG = 319
    QUERY_DATA_VERSION = 322
    ADD_WRITE_PERM_OF_BROKER = 327
    GET_BROKER_MEMBER_GROUP = 901  # 5.x; not supported here (docs/nameserver-semantics.md D6)
    BROKER_HEARTBEAT = 904
    NOTIFY_MIN_BROKER_ID_CHANGE = 905  # never sent (§7 notes)


class ResponseCode(IntEnum):
    """``RemotingSysResponseCode`` + ``ResponseCode`` (§9.2)."""

    SUCCESS = 0
    SYSTEM_ERROR = 1
    SYSTEM_BUSY = 2
    REQUEST_CODE_NOT_SUPPORTED = 3
    TRANSACTION_FAILED = 4
    FLUSH_DISK_TIMEOUT = 10
    SLAVE_NOT_AVAILABLE = 11
    FLUSH_SLAVE_TIMEOUT = 12
    MESSAGE_ILLEGAL = 13
    SERVICE_NOT_AVAILABLE = 14
    VERSION_NOT_SUPPORTED = 15
    NO_PERMISSION = 16
    TOPIC_NOT_EXIST = 17
    TOPIC_EXIST_ALREADY = 18
    PULL_NOT_FOUND = 19
    PULL_RETRY_IMMEDIATELY = 20
    PULL_OFFSET_MOVED = 21
    QUERY_NOT_FOUND = 22
    SUBSCRIPTION_PARSE_FAILED = 23
    SUBSCRIPTION_NOT_EXIST = 24
    SUBSCRIPTION_NOT_LATEST = 25
    SUBSCRIPTION_GROUP_NOT_EXIST = 26
    FILTER_DATA_NOT_EXIST = 27
    FILTER_DATA_NOT_LATEST = 28
