"""Request signatures: nsaudit's canonical form (what our clients sign), RocketMQ's ACL signature
as ``AclClientRPCHook`` writes it (``AclUtils.combineRequestContent`` and ``AclSigner``, accepted in
the compatibility mode), and the credentials a client signs with."""

from __future__ import annotations

import base64
import hashlib
import hmac
from collections.abc import Mapping
from dataclasses import dataclass, field

from common.errors import UserError
from nameserver.codec import RemotingCommand, SerializeType

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"
# nsaudit's own extFields of a canonical signature: when it was signed (epoch ms, decimal) and a
# random text that keeps two otherwise equal requests from sharing a signature
TIMESTAMP = "Timestamp"
NONCE = "Nonce"

# The first line of the canonical content: names the form, so it can change without ambiguity.
CANONICAL_FORM = b"nsaudit-acl-v1\n"


class SecretsError(UserError):
    """Secrets that cannot be loaded; the message names the source, never a secret."""


def _java_string_order(key: str) -> bytes:
    # Java compares Strings by UTF-16 code unit; big-endian UTF-16 bytes compare the same way
    # (Python's own str order differs only for characters beyond the BMP).
    return key.encode("utf-16-be", "surrogatepass")


def rocketmq_content(ext_fields: Mapping[str, str | None] | None, body: bytes | None) -> bytes:
    """The bytes RocketMQ signs: sorted extFields values (``Signature`` left out), then the body.

    ``None`` values are skipped, as neither header form sends them. Values are joined without a
    separator and keys are not signed, so text can move between adjacent values (``brokerAddr``
    ``"h:10911"`` + ``brokerId`` ``"0"`` signs as ``"h:1091"`` + ``"10"``): only the
    compatibility mode accepts it.

    Example:
        >>> rocketmq_content({"b": "2", "a": "1", "Signature": "x"}, b"!")
        b'12!'
    """
    items = sorted(
        ((k, v) for k, v in (ext_fields or {}).items() if k != SIGNATURE and v is not None),
        key=lambda kv: _java_string_order(kv[0]),
    )
    # Java's getBytes(UTF-8) writes a lone surrogate as "?"; so does Python's "replace"
    return "".join(v for _, v in items).encode("utf-8", "replace") + (body or b"")


def _escape(text: str) -> str:
    # "%" first, so the three escapes cannot be confused with text that looks like one
    return text.replace("%", "%25").replace("=", "%3D").replace("\n", "%0A")


def canonical_content(
    code: int, version: int, ext_fields: Mapping[str, str | None] | None, body: bytes | None
) -> bytes:
    """The bytes our clients sign: the form's name, the request code and version, one
    ``key=value`` line per extField (``Signature`` and ``None`` values left out) sorted by the
    key's UTF-8 bytes, an empty line, then the hex SHA-256 of the body.

    ``%``, ``=`` and newline are written ``%25``, ``%3D`` and ``%0A`` in keys and values, so
    every line splits back into one key and one value and no text can move between them.

    Example:
        >>> canonical_content(103, 407, {"b": "x=1", "a": "2", "Signature": "s"}, b"!").split(b"\\n")[:5]
        [b'nsaudit-acl-v1', b'103 407', b'a=2', b'b=x%3D1', b'']
    """
    items = sorted(
        (k.encode("utf-8", "surrogatepass"), k, v)
        for k, v in (ext_fields or {}).items()
        if k != SIGNATURE and v is not None
    )
    lines = "".join(f"{_escape(k)}={_escape(v)}\n" for _, k, v in items)
    # surrogatepass: a lone surrogate stays distinct from "?" (RocketMQ's form writes both as "?")
    return (
        CANONICAL_FORM
        + f"{code} {version}\n".encode()
        + lines.encode("utf-8", "surrogatepass")
        + b"\n"
        + hashlib.sha256(body or b"").hexdigest().encode("ascii")
    )


def canonical_signature(content: bytes, secret_key: str) -> str:
    """``Base64(HmacSHA256(secret_key, content))``, the signature of :func:`canonical_content`."""
    digest = hmac.new(secret_key.encode("utf-8"), content, hashlib.sha256).digest()
    return base64.b64encode(digest).decode("ascii")


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


def sign_request(cmd: RemotingCommand, credentials: Credentials, timestamp_ms: int, nonce: str) -> RemotingCommand:
    """Sign ``cmd`` in the canonical form and return it.

    Adds ``AccessKey``, ``SecurityToken`` (if any), ``Timestamp`` (``timestamp_ms``, the sender's
    clock in epoch ms) and ``Nonce`` to extFields, then ``Signature`` =
    ``Base64(HmacSHA256(secretKey, canonical_content(...)))``. The server refuses it outside its
    freshness window and a second time within it, so a resent command must be signed again with
    a new timestamp or nonce (our client does so on every send).

    Args:
        cmd: the request; its code, version, extFields and body are signed.
        credentials: the key to sign with.
        timestamp_ms: now, epoch ms (the caller's clock: this module reads none).
        nonce: any text that differs between requests signed in the same millisecond.
    """
    ext = dict(cmd.ext_fields or {})
    if cmd.serialize_type == SerializeType.ROCKETMQ:
        # that header form cannot carry an empty value (docs/remoting-protocol.md §5): sign what
        # the server will receive
        ext = {k: v for k, v in ext.items() if v != ""}
    ext[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext[SECURITY_TOKEN] = credentials.security_token
    ext[TIMESTAMP] = str(timestamp_ms)
    ext[NONCE] = nonce
    content = canonical_content(cmd.code, cmd.version, ext, cmd.body)
    ext[SIGNATURE] = canonical_signature(content, credentials.secret_key)
    cmd.ext_fields = ext
    return cmd


def sign_request_rocketmq(cmd: RemotingCommand, credentials: Credentials) -> RemotingCommand:
    """Sign ``cmd`` as a RocketMQ peer does: add ``AccessKey``, ``SecurityToken`` (if any) and
    ``Signature`` to it and return it.

    As RocketMQ's ``AclClientRPCHook``: the client puts ``AccessKey`` (and ``SecurityToken`` when
    it has one) into extFields, then::

        content   = UTF-8(concatenation of the extFields values, sorted by key, except Signature)
                    + body bytes
        Signature = Base64(HmacSHA1(key = UTF-8(secretKey), content))

    and adds ``Signature`` to extFields. Keys are sorted as Java's ``TreeMap<String, String>`` sorts
    them (UTF-16 code units); values are concatenated with no separator, and the keys themselves are
    not signed.

    Worked vector (``tests/nameserver/acl/test_acl.py`` recomputes it independently)::

        extFields  {"clusterName": "DefaultCluster", "brokerName": "broker-a",
                    "brokerAddr": "10.0.0.5:10911", "brokerId": "0", "AccessKey": "rocketmq2"}
        body       b'{"counter":3,"timestamp":1700000000000}'
        secretKey  "12345678"
        sorted     AccessKey, brokerAddr, brokerId, brokerName, clusterName  (upper case first)
        content    b'rocketmq2' b'10.0.0.5:10911' b'0' b'broker-a' b'DefaultCluster' + body
        Signature  "sy0mL++DitBbB75iBKWN0+mPqiQ="

    Who signs this way: RocketMQ's mqadmin with the keys of ``conf/tools.yml``; 5.x brokers what
    they send to name servers with ``innerClientAuthenticationCredentials``; a stock 4.9 broker
    signs nothing unless an RPC hook is registered. Our server accepts it only with
    ``[security] accept_rocketmq_signatures`` (it carries no timestamp, so it is neither checked
    for freshness nor for replay); our own clients sign with :func:`sign_request`.

    Signing again (a resent command) gives the same signature: ``Signature`` is not signed.
    """
    ext = dict(cmd.ext_fields or {})
    ext[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext[SECURITY_TOKEN] = credentials.security_token
    ext[SIGNATURE] = calculate_signature(rocketmq_content(ext, cmd.body), credentials.secret_key)
    cmd.ext_fields = ext
    return cmd
