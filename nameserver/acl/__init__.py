"""Access control for route changes: RocketMQ's ACL signature, the key store and the allowlists.

A RocketMQ 4.x name server checks nothing: anyone who can connect may register a broker under any
name and pull a topic's producers to an address of their choosing. With ``[security] enabled``
our server asks every request that changes state for a RocketMQ ACL signature, and a broker
registration must in addition name an allowed cluster and come from, and advertise, an address in
an allowed network. Everything here is pure (no clock, no socket) except
:func:`load_secret_store`, which the command line calls once at start.

Known limits, inherited from the scheme for compatibility: it proves that the sender knows a
secret, not that the request is fresh (nothing stops a replay of a captured signed request),
and values are joined without separators, so text can move between adjacent values without
changing the signature. Keep name servers off untrusted networks all the same.

Parts: :mod:`~nameserver.acl.signature` (signing), :mod:`~nameserver.acl.keystore` (secrets),
:mod:`~nameserver.acl.policy` (what may run, and the start-up notice).
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
from nameserver.acl.signature import (
    ACCESS_KEY,
    SECURITY_TOKEN,
    SIGNATURE,
    Credentials,
    SecretsError,
    calculate_signature,
    sign_request,
    signed_content,
)

__all__ = [
    "ACCESS_KEY", "MAX_LOGGED_ACCESS_KEY", "PROTECTED_CODES", "SECURITY_TOKEN", "SIGNATURE", "AccessController",
    "Credentials", "Denial", "SecretStore", "SecretsError", "calculate_signature", "client_credentials",
    "exposure_notice", "load_secret_store", "parse_ip", "parse_secret_entries", "parse_secrets_env_text",
    "parse_secrets_file_text", "sign_request", "signed_content", "split_host",
]
