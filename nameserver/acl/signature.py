"""RocketMQ's ACL signature, as ``AclClientRPCHook`` writes it (``AclUtils.combineRequestContent``
and ``AclSigner``), and the credentials a client signs with."""

from __future__ import annotations

import base64
import hashlib
import hmac
from dataclasses import dataclass, field
from typing import Mapping

from common.errors import UserError
from nameserver.codec import RemotingCommand

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"


class SecretsError(UserError):
    """Secrets that cannot be loaded; the message names the source, never a secret."""


def _java_string_order(key: str) -> bytes:
    # Java compares Strings by UTF-16 code unit; big-endian UTF-16 bytes compare the same way
    # (Python's own str order differs only for characters beyond the BMP).
    return key.encode("utf-16-be", "surrogatepass")


def signed_content(ext_fields: Mapping[str, str | None] | None, body: bytes | None) -> bytes:
    """The bytes RocketMQ signs: sorted extFields values (``Signature`` left out), then the body.

    ``None`` values are skipped, as neither header form sends them.

    Example:
        >>> signed_content({"b": "2", "a": "1", "Signature": "x"}, b"!")
        b'12!'
    """
    items = sorted(((k, v) for k, v in (ext_fields or {}).items() if k != SIGNATURE and v is not None),
                   key=lambda kv: _java_string_order(kv[0]))
    # Java's getBytes(UTF-8) writes a lone surrogate as "?"; so does Python's "replace"
    return "".join(v for _, v in items).encode("utf-8", "replace") + (body or b"")


def calculate_signature(content: bytes, secret_key: str) -> str:
    """``Base64(HmacSHA1(secret_key, content))``, RocketMQ's ``AclSigner.calSignature``.

    Example:
        >>> calculate_signature(b"RocketMQ", "12345678")  # RocketMQ's AclSignerTest vector
        'IUc8rrO/0gDch8CjObLQsW2rsiA='
    """
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha1).digest()
    return base64.b64encode(digest).decode("ascii")


@dataclass(frozen=True, slots=True)
class Credentials:
    """An access key and its secret, as a client signs with them; the repr shows the key only.

    Attributes:
        access_key: the key id, sent in clear as ``AccessKey``.
        secret_key: the HMAC key; never sent, logged or shown.
        security_token: optional ``SecurityToken`` extField (signed like any value).
    """

    access_key: str
    secret_key: str = field(repr=False)
    security_token: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not self.access_key or not self.secret_key:
            # Java's SecretKeySpec refuses an empty key; an empty id could never be looked up
            raise SecretsError("credentials need a non-empty access key and secret key")


def sign_request(cmd: RemotingCommand, credentials: Credentials) -> RemotingCommand:
    """Add ``AccessKey``, ``SecurityToken`` (if any) and ``Signature`` to ``cmd`` and return it.

    As RocketMQ's ``AclClientRPCHook``: the client puts ``AccessKey`` (and ``SecurityToken`` when
    it has one) into extFields, then::

        content   = UTF-8(concatenation of the extFields values, sorted by key, except Signature)
                    + body bytes
        Signature = Base64(HmacSHA1(key = UTF-8(secretKey), content))

    and adds ``Signature`` to extFields. Keys are sorted as Java's ``TreeMap<String, String>`` sorts
    them (UTF-16 code units); values are concatenated with no separator, and the keys themselves are
    not signed.

    Worked vector (``tests/nameserver/test_acl.py`` recomputes it independently)::

        extFields  {"clusterName": "DefaultCluster", "brokerName": "broker-a",
                    "brokerAddr": "10.0.0.5:10911", "brokerId": "0", "AccessKey": "rocketmq2"}
        body       b'{"counter":3,"timestamp":1700000000000}'
        secretKey  "12345678"
        sorted     AccessKey, brokerAddr, brokerId, brokerName, clusterName  (upper case first)
        content    b'rocketmq2' b'10.0.0.5:10911' b'0' b'broker-a' b'DefaultCluster' + body
        Signature  "sy0mL++DitBbB75iBKWN0+mPqiQ="

    Who signs: RocketMQ's mqadmin signs with the keys of ``conf/tools.yml``; 5.x brokers sign what
    they send to name servers with ``innerClientAuthenticationCredentials``; a stock 4.9 broker signs
    nothing unless an RPC hook is registered, so with access control on its registrations are
    refused. Our ``RemotingClient`` and ``nsaudit fleet`` sign when given credentials.

    Signing again (a resent command) gives the same signature: ``Signature`` is not signed.
    """
    ext = dict(cmd.ext_fields or {})
    ext[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext[SECURITY_TOKEN] = credentials.security_token
    ext[SIGNATURE] = calculate_signature(signed_content(ext, cmd.body), credentials.secret_key)
    cmd.ext_fields = ext
    return cmd
