"""Access control for route changes: request signatures, the key store and the allowlists.

A RocketMQ 4.x name server checks nothing: anyone who can connect may register a broker under any
name and pull a topic's producers to an address of their choosing. With ``[security] enabled``
our server asks every request that changes state (liveness included) for a signature, and a broker
registration must in addition name an allowed cluster and come from, and advertise, an address in
an allowed network. Everything here is pure (no clock, no socket: ``now`` is an argument) except
:func:`load_secret_store`, which the command line calls once at start.

Our clients sign a canonical form (every key and value, unambiguously separated, with the request
code, the body's digest, a timestamp and a nonce); the server refuses a signature outside its
freshness window or seen before. RocketMQ's own form (values concatenated without separators,
no timestamp) passes only in the compatibility mode, with neither check. What this does and does
not protect against is in README.md, "Access control".

Parts: :mod:`~nameserver.acl.signature` (signing), :mod:`~nameserver.acl.keystore` (secrets),
:mod:`~nameserver.acl.replay` (signatures seen), :mod:`~nameserver.acl.policy` (what may run, and
the start-up notice).
"""

from nameserver.acl.keystore import (
    SecretStore,
    client_credentials,
    load_secret_store,
    parse_secret_entries,
    parse_secrets_env_text,
    parse_secrets_file_text,
)
from nameserver.acl.policy import (
    MAX_LOGGED_ACCESS_KEY,
    PROTECTED_CODES,
    AccessController,
    Denial,
    exposure_notice,
    parse_ip,
    split_host,
)
from nameserver.acl.replay import ReplayCache
from nameserver.acl.signature import (
    ACCESS_KEY,
    NONCE,
    SECURITY_TOKEN,
    SIGNATURE,
    TIMESTAMP,
    Credentials,
    SecretsError,
    calculate_signature,
    canonical_content,
    canonical_signature,
    rocketmq_content,
    sign_request,
    sign_request_rocketmq,
)

__all__ = [
    "ACCESS_KEY",
    "MAX_LOGGED_ACCESS_KEY",
    "NONCE",
    "PROTECTED_CODES",
    "SECURITY_TOKEN",
    "SIGNATURE",
    "TIMESTAMP",
    "AccessController",
    "Credentials",
    "Denial",
    "ReplayCache",
    "SecretStore",
    "SecretsError",
    "calculate_signature",
    "canonical_content",
    "canonical_signature",
    "client_credentials",
    "exposure_notice",
    "load_secret_store",
    "parse_ip",
    "parse_secret_entries",
    "parse_secrets_env_text",
    "parse_secrets_file_text",
    "rocketmq_content",
    "sign_request",
    "sign_request_rocketmq",
    "split_host",
]
