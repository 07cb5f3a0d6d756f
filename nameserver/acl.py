"""Access control for route changes: RocketMQ's ACL signature, the key store and the allowlists.

A RocketMQ 4.x name server checks nothing: anyone who can connect may register a broker under any
name and pull a topic's producers to an address of their choosing. With ``[security] enabled``
our server asks every request that changes state for a RocketMQ ACL signature, and a broker
registration must in addition name an allowed cluster and come from, and advertise, an address in
an allowed network. Everything here is pure (no clock, no socket) except
:func:`load_secret_store`, which the command line calls once at start.

Signature, as RocketMQ's ``AclClientRPCHook`` writes it (``AclUtils.combineRequestContent`` and
``AclSigner``): the client puts ``AccessKey`` (and ``SecurityToken`` when it has one) into
extFields, then

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

Known limits, inherited from the scheme for compatibility: it proves that the sender knows a
secret, not that the request is fresh (nothing stops a replay of a captured signed request),
and values are joined without separators, so text can move between adjacent values without
changing the signature. Keep name servers off untrusted networks all the same.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import ipaddress
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Mapping

from nameserver.codec import RemotingCommand, RequestCode
from common.config import SecurityConfig
from common.errors import UserError

ACCESS_KEY = "AccessKey"
SIGNATURE = "Signature"
SECURITY_TOKEN = "SecurityToken"

# The requests that change what the server answers (routes, KV, its own config) and so need a
# signature when access control is on. Lookups, 322/904 refreshes of an address that is already
# live, and every other read stay open, as the issue asks.
PROTECTED_CODES: frozenset[int] = frozenset({
    RequestCode.PUT_KV_CONFIG,  # 100
    RequestCode.DELETE_KV_CONFIG,  # 102
    RequestCode.REGISTER_BROKER,  # 103
    RequestCode.UNREGISTER_BROKER,  # 104
    RequestCode.WIPE_WRITE_PERM_OF_BROKER,  # 205
    RequestCode.DELETE_TOPIC_IN_NAMESRV,  # 216
    RequestCode.UPDATE_NAMESRV_CONFIG,  # 318
    RequestCode.ADD_WRITE_PERM_OF_BROKER,  # 327
})

# A logged access key is the sender's text; keep a hostile one from bloating the event log.
MAX_LOGGED_ACCESS_KEY = 64


class SecretsError(UserError):
    """Secrets that cannot be loaded; the message names the source, never a secret."""


# ---------------------------------------------------------------------------------- signing


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

    Signing again (a resent command) gives the same signature: ``Signature`` is not signed.
    """
    ext = dict(cmd.ext_fields or {})
    ext[ACCESS_KEY] = credentials.access_key
    if credentials.security_token is not None:
        ext[SECURITY_TOKEN] = credentials.security_token
    ext[SIGNATURE] = calculate_signature(signed_content(ext, cmd.body), credentials.secret_key)
    cmd.ext_fields = ext
    return cmd


# ------------------------------------------------------------------------------- the key store


class SecretStore:
    """Access key -> secret key. Its repr and errors name access keys only.

    Args:
        secrets: the pairs; keys and secrets must be non-empty.
    """

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        for access_key, secret in (secrets or {}).items():
            Credentials(access_key, secret)  # the same non-empty rule, the same secret-free error
        self._secrets = dict(secrets or {})

    def __repr__(self) -> str:
        return f"SecretStore(access_keys={sorted(self._secrets)!r})"

    __str__ = __repr__

    def __len__(self) -> int:
        return len(self._secrets)

    def __contains__(self, access_key: object) -> bool:
        return access_key in self._secrets

    def __reduce__(self):  # a pickled store would carry the secrets into files and other processes
        raise TypeError("a SecretStore cannot be pickled")

    @property
    def access_keys(self) -> tuple[str, ...]:
        """The known key ids, sorted."""
        return tuple(sorted(self._secrets))

    def secret_for(self, access_key: str) -> str | None:
        """The secret of ``access_key``, or None when the key is unknown."""
        return self._secrets.get(access_key)

    def credentials(self, access_key: str) -> Credentials:
        """Credentials to sign with.

        Raises:
            SecretsError: the key is not in the store.
        """
        secret = self._secrets.get(access_key)
        if secret is None:
            raise SecretsError(f"access key {access_key!r} has no secret in the configured secrets")
        return Credentials(access_key, secret)

    def is_secret(self, text: str) -> bool:
        """Whether ``text`` equals one of the secrets (to keep a misplaced secret out of logs)."""
        candidate = text.encode("utf-8", "replace")
        return any(hmac.compare_digest(candidate, s.encode("utf-8")) for s in self._secrets.values())

    def merged(self, other: "SecretStore", source: str) -> "SecretStore":
        """Both stores' pairs.

        Raises:
            SecretsError: an access key appears in both with different secrets.
        """
        for access_key, secret in other._secrets.items():
            mine = self._secrets.get(access_key)
            if mine is not None and not hmac.compare_digest(mine.encode(), secret.encode()):
                raise SecretsError(f"{source}: access key {access_key!r} is given two different secrets")
        return SecretStore({**self._secrets, **other._secrets})


def parse_secret_entries(entries: Iterable[tuple[int, str]], source: str) -> SecretStore:
    """``accessKey=secretKey`` entries (numbered for errors) into a store.

    Blank entries and ``#`` comments are skipped; the secret is everything after the first ``=``
    (Base64 secrets end in ``=``), both sides stripped.

    Raises:
        SecretsError: an entry without ``=`` or with an empty side, or a repeated access key. The
            message gives the source and entry number, never the entry's text.
    """
    secrets: dict[str, str] = {}
    for number, raw in entries:
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        access_key, sep, secret = (part.strip() for part in text.partition("="))
        if not sep or not access_key or not secret:
            raise SecretsError(f"{source}, entry {number}: expected accessKey=secretKey")
        if access_key in secrets:
            raise SecretsError(f"{source}, entry {number}: access key {access_key!r} is given twice")
        secrets[access_key] = secret
    return SecretStore(secrets)


def parse_secrets_file_text(text: str, source: str) -> SecretStore:
    """A secrets file: one ``accessKey=secretKey`` per line."""
    return parse_secret_entries(enumerate(text.splitlines(), 1), source)


def parse_secrets_env_text(text: str, source: str) -> SecretStore:
    """An environment value: ``accessKey=secretKey[,accessKey=secretKey...]``."""
    return parse_secret_entries(enumerate(text.split(","), 1), source)


def load_secret_store(security: SecurityConfig, environ: Mapping[str, str] | None = None) -> SecretStore:
    """Read the secrets ``[security]`` points at: ``secrets_file`` and/or the variable named by
    ``secrets_env`` (the command line's only way in; never flags).

    Args:
        security: the loaded section.
        environ: the environment (``os.environ`` when None).

    Raises:
        SecretsError: a source that is missing, unreadable or malformed, or no secret at all.
    """
    environ = os.environ if environ is None else environ
    store = SecretStore()
    if security.secrets_file:
        path = Path(security.secrets_file)
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise SecretsError(f"security.secrets_file {str(path)!r} cannot be read: {reason}") from None
        store = store.merged(parse_secrets_file_text(text, f"secrets file {str(path)!r}"), "secrets")
    if security.secrets_env:
        value = environ.get(security.secrets_env)
        if value is None:
            raise SecretsError(f"security.secrets_env names {security.secrets_env!r}, which is not set")
        store = store.merged(parse_secrets_env_text(value, f"environment variable {security.secrets_env}"),
                             "secrets")
    if not len(store):
        raise SecretsError("no secrets: security.secrets_file / security.secrets_env hold no accessKey=secretKey")
    return store


def client_credentials(security: SecurityConfig, environ: Mapping[str, str] | None = None) -> Credentials | None:
    """What our own clients (``nsaudit fleet``) sign with: ``security.access_key`` and its secret
    from the configured secrets, or None when ``access_key`` is not set.

    Raises:
        SecretsError: the secrets cannot be loaded or lack that key.
    """
    if not security.access_key:
        return None
    return load_secret_store(security, environ).credentials(security.access_key)


# ---------------------------------------------------------------------------------- checking


@dataclass(frozen=True, slots=True)
class Denial:
    """Why a request is refused.

    Attributes:
        detail: what was wrong (``unsigned``, ``bad signature``, ``unknown access key``,
            ``cluster X not allowed``, ``address H not allowed``, ``peer H not allowed``).
        access_key: the key id the request named, for the event log; None when it named none
            (or named a secret, which must not be logged).
    """

    detail: str
    access_key: str | None = None

    @property
    def remark(self) -> str:
        """The NO_PERMISSION answer's remark."""
        return f"no permission: {self.detail}"


def split_host(address: str | None) -> str | None:
    """The host of ``host:port`` / ``[v6]:port``; None for None or a text without a port.

    Example:
        >>> split_host("[::1]:10911"), split_host("10.0.0.5:10911"), split_host("no-port")
        ('::1', '10.0.0.5', None)
    """
    if not address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not host or not port.isdigit():
        return None
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def parse_ip(host: str | None) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """An IP address from a host text, IPv4-mapped IPv6 as IPv4 (a dual-stack socket's peers);
    None for a host name or None."""
    if not host:
        return None
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])  # drop an IPv6 zone id
    except ValueError:
        return None
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


class AccessController:
    """Decides whether a request may run, before it is dispatched.

    Args:
        secrets: the known access keys and secrets.
        allowed_networks: CIDRs a registering broker's address and peer must lie in; empty = any.
        allowed_clusters: cluster names a broker may register in; empty = any.

    Example:
        >>> wipe = make_request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        >>> AccessController(SecretStore({"ak": "sk"})).check(wipe, "10.0.0.1:50112")
        Denial(detail='unsigned', access_key=None)
    """

    def __init__(
        self,
        secrets: SecretStore,
        allowed_networks: Iterable[str] = (),
        allowed_clusters: Iterable[str] = (),
    ) -> None:
        self.secrets = secrets
        self.allowed_networks = tuple(ipaddress.ip_network(n) for n in allowed_networks)
        self.allowed_clusters = frozenset(allowed_clusters)

    def __repr__(self) -> str:
        networks = [str(n) for n in self.allowed_networks]
        return (f"AccessController(access_keys={list(self.secrets.access_keys)!r}, "
                f"allowed_networks={networks!r}, allowed_clusters={sorted(self.allowed_clusters)!r})")

    @classmethod
    def from_config(cls, security: SecurityConfig, secrets: SecretStore) -> "AccessController":
        """The controller of a loaded ``[security]`` section."""
        return cls(secrets, security.allowed_networks, security.allowed_clusters)

    def check(self, cmd: RemotingCommand, remote: str) -> Denial | None:
        """None when ``cmd``, received from peer ``remote`` (``host:port``), may run.

        The signature is checked first, so a sender without a key learns nothing about the
        allowlists.
        """
        if cmd.code not in PROTECTED_CODES:
            return None
        ext = cmd.ext_fields or {}
        denial = self._check_signature(ext, cmd.body)
        if denial is None and cmd.code == RequestCode.REGISTER_BROKER:
            denial = self._check_registration(ext, remote)
        return denial

    def _check_signature(self, ext: Mapping[str, str], body: bytes | None) -> Denial | None:
        access_key, signature = ext.get(ACCESS_KEY), ext.get(SIGNATURE)
        if not access_key or not signature:
            return Denial("unsigned", self._loggable(access_key))
        secret = self.secrets.secret_for(access_key)
        if secret is None:
            return Denial("unknown access key", self._loggable(access_key))
        expected = calculate_signature(signed_content(ext, body), secret)
        if not hmac.compare_digest(expected.encode("ascii"), signature.encode("utf-8", "replace")):
            return Denial("bad signature", access_key)
        return None

    def _check_registration(self, ext: Mapping[str, str], remote: str) -> Denial | None:
        # A missing clusterName or brokerAddr is left to the handler's bad_header answer (§6).
        access_key = ext.get(ACCESS_KEY)
        cluster, broker_addr = ext.get("clusterName"), ext.get("brokerAddr")
        if self.allowed_clusters and cluster is not None and cluster not in self.allowed_clusters:
            return Denial(f"cluster {cluster} not allowed", access_key)
        if self.allowed_networks:
            # the advertised address is where clients will be sent; the peer is who asks
            addr_host = split_host(broker_addr) or broker_addr
            if broker_addr is not None and not self._in_networks(addr_host):
                return Denial(f"address {addr_host} not allowed", access_key)
            peer_host = split_host(remote) or remote
            if not self._in_networks(peer_host):
                return Denial(f"peer {peer_host} not allowed", access_key)
        return None

    def _in_networks(self, host: str | None) -> bool:
        ip = parse_ip(host)
        return ip is not None and any(ip in network for network in self.allowed_networks)

    def _loggable(self, access_key: str | None) -> str | None:
        """The key id for the event log, unless it is absent or is in fact a secret."""
        if not access_key or self.secrets.is_secret(access_key):
            return None
        return access_key[:MAX_LOGGED_ACCESS_KEY]


# ------------------------------------------------------------------------------- bind notice


def exposure_notice(host: str, access_enabled: bool) -> str | None:
    """The start-up line for a server bound to ``host``; None on a loopback address.

    A name server on the network lets anyone there change routes unless ``[security]`` is on.
    """
    ip = parse_ip(host)
    if ip is not None and ip.is_loopback or host == "localhost":
        return None
    where = "all interfaces" if not host or (ip is not None and ip.is_unspecified) else f"a non-loopback address ({host})"
    consequence = ("[security] is enabled: route changes need a signed request" if access_enabled
                   else "enable [security] to restrict route changes")
    return f"listening on {where}; brokers and clients on the network can reach it; {consequence}"
