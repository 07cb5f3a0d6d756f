"""What may run: the protected request codes, the signature check (form, freshness, replay) and the
broker allowlists (clusters, networks); and the start-up notice of a server reachable from the
network."""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from common.config import SecurityConfig
from nameserver.acl.keystore import SecretStore
from nameserver.acl.replay import ReplayCache
from nameserver.acl.signature import (
    ACCESS_KEY,
    SIGNATURE,
    TIMESTAMP,
    calculate_signature,
    canonical_content,
    canonical_signature,
    rocketmq_content,
)
from nameserver.codec import RemotingCommand, RequestCode, parse_int64

# The requests that change what the server answers (routes, liveness, KV, its own config) and so
# need a signature when access control is on. 322 and 904 refresh a broker's liveness: left open,
# anyone could keep a dead broker in the routes. Lookups and every other read stay open.
PROTECTED_CODES: frozenset[int] = frozenset(
    {
        RequestCode.PUT_KV_CONFIG,  # 100
        RequestCode.DELETE_KV_CONFIG,  # 102
        RequestCode.REGISTER_BROKER,  # 103
        RequestCode.UNREGISTER_BROKER,  # 104
        RequestCode.WIPE_WRITE_PERM_OF_BROKER,  # 205
        RequestCode.DELETE_TOPIC_IN_NAMESRV,  # 216
        RequestCode.UPDATE_NAMESRV_CONFIG,  # 318
        RequestCode.QUERY_DATA_VERSION,  # 322
        RequestCode.ADD_WRITE_PERM_OF_BROKER,  # 327
        RequestCode.BROKER_HEARTBEAT,  # 904
    }
)

# A logged access key is the sender's text; keep a hostile one from bloating the event log.
MAX_LOGGED_ACCESS_KEY = 64


@dataclass(frozen=True, slots=True)
class Denial:
    """Why a request is refused.

    Attributes:
        detail: what was wrong (``unsigned``, ``bad signature``, ``unknown access key``,
            ``no timestamp``, ``timestamp outside window``, ``replayed``, ``timestamp older than
            the replay cache``, ``cluster X not allowed``, ``address H not allowed``,
            ``peer H not allowed``).
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

    A protected request must carry a canonical signature (``acl.sign_request``) stamped within
    ``skew_ms`` of the server's clock and not seen before; with ``accept_rocketmq_signatures`` a
    RocketMQ-style signature (``acl.sign_request_rocketmq``) passes too, unchecked for freshness
    and replay, since it carries no timestamp and a RocketMQ broker's periodic requests repeat
    byte for byte.

    Args:
        secrets: the known access keys and secrets.
        allowed_networks: CIDRs a registering broker's address and peer must lie in; empty = any.
        allowed_clusters: cluster names a broker may register in; empty = any.
        skew_ms: the freshness window: how far a signature's ``Timestamp`` may lie from ``now``,
            either way.
        replay_cache_entries: the most signatures remembered (:class:`~nameserver.acl.replay.ReplayCache`).
        accept_rocketmq_signatures: the compatibility mode.

    Example:
        >>> wipe = make_request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "broker-a"})
        >>> AccessController(SecretStore({"ak": "sk"})).check(wipe, "10.0.0.1:50112", now=0)
        Denial(detail='unsigned', access_key=None)
    """

    def __init__(
        self,
        secrets: SecretStore,
        allowed_networks: Iterable[str] = (),
        allowed_clusters: Iterable[str] = (),
        *,
        skew_ms: int = SecurityConfig.signature_skew_ms,
        replay_cache_entries: int = SecurityConfig.replay_cache_entries,
        accept_rocketmq_signatures: bool = False,
    ) -> None:
        self.secrets = secrets
        self.allowed_networks = tuple(ipaddress.ip_network(n) for n in allowed_networks)
        self.allowed_clusters = frozenset(allowed_clusters)
        self.skew_ms = skew_ms
        self.accept_rocketmq_signatures = accept_rocketmq_signatures
        self.replays = ReplayCache(skew_ms, replay_cache_entries)

    def __repr__(self) -> str:
        networks = [str(n) for n in self.allowed_networks]
        return (
            f"AccessController(access_keys={list(self.secrets.access_keys)!r}, "
            f"allowed_networks={networks!r}, allowed_clusters={sorted(self.allowed_clusters)!r}, "
            f"skew_ms={self.skew_ms}, accept_rocketmq_signatures={self.accept_rocketmq_signatures})"
        )

    @classmethod
    def from_config(cls, security: SecurityConfig, secrets: SecretStore) -> AccessController:
        """The controller of a loaded ``[security]`` section."""
        return cls(
            secrets,
            security.allowed_networks,
            security.allowed_clusters,
            skew_ms=security.signature_skew_ms,
            replay_cache_entries=security.replay_cache_entries,
            accept_rocketmq_signatures=security.accept_rocketmq_signatures,
        )

    def check(self, cmd: RemotingCommand, remote: str, now: int) -> Denial | None:
        """None when ``cmd``, received from peer ``remote`` (``host:port``) at ``now`` (epoch ms),
        may run. An accepted canonical signature is remembered, so the same request is refused
        next time.

        The signature is checked first, so a sender without a key learns nothing about the
        allowlists.
        """
        if cmd.code not in PROTECTED_CODES:
            return None
        ext = cmd.ext_fields or {}
        denial = self._check_signature(cmd, ext, now)
        if denial is None and cmd.code == RequestCode.REGISTER_BROKER:
            denial = self._check_registration(ext, remote)
        return denial

    def _check_signature(self, cmd: RemotingCommand, ext: Mapping[str, str], now: int) -> Denial | None:
        access_key, signature = ext.get(ACCESS_KEY), ext.get(SIGNATURE)
        if not access_key or not signature:
            return Denial("unsigned", self._loggable(access_key))
        secret = self.secrets.secret_for(access_key)
        if secret is None:
            return Denial("unknown access key", self._loggable(access_key))
        expected = canonical_signature(canonical_content(cmd.code, cmd.version, ext, cmd.body), secret)
        if _same(expected, signature):
            detail = self._check_fresh(ext.get(TIMESTAMP), expected, now)
            return Denial(detail, access_key) if detail is not None else None
        if self.accept_rocketmq_signatures and _same(
            calculate_signature(rocketmq_content(ext, cmd.body), secret), signature
        ):
            return None
        return Denial("bad signature", access_key)

    def _check_fresh(self, stamp: str | None, signature: str, now: int) -> str | None:
        """Why a valid canonical signature is refused (stale, early, seen before), or None."""
        try:
            timestamp_ms = parse_int64(stamp) if stamp is not None else None
        except ValueError:
            timestamp_ms = None
        if timestamp_ms is None:
            return "no timestamp"
        if abs(now - timestamp_ms) > self.skew_ms:
            return "timestamp outside window"
        return self.replays.admit(signature, timestamp_ms, now)

    def _check_registration(self, ext: Mapping[str, str], remote: str) -> Denial | None:
        # A missing clusterName or brokerAddr is left to the handler's bad_header answer
        # (docs/remoting-protocol.md §6).
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


def _same(expected: str, signature: str) -> bool:
    """Constant-time comparison of the computed signature with the one sent."""
    return hmac.compare_digest(expected.encode("ascii"), signature.encode("utf-8", "replace"))


def exposure_notice(host: str, access_enabled: bool) -> str | None:
    """The start-up line for a server bound to ``host``; None on a loopback address.

    A name server on the network lets anyone there change routes unless ``[security]`` is on.
    """
    ip = parse_ip(host)
    if ip is not None and ip.is_loopback or host == "localhost":
        return None
    where = (
        "all interfaces" if not host or (ip is not None and ip.is_unspecified) else f"a non-loopback address ({host})"
    )
    consequence = (
        "[security] is enabled: route changes need a signed request"
        if access_enabled
        else "enable [security] to restrict route changes"
    )
    return f"listening on {where}; brokers and clients on the network can reach it; {consequence}"
