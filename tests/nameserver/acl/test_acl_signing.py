"""The canonical signature and what the server checks of it (``nameserver.acl``): the form's
vector and its separators, freshness, the replay cache, RocketMQ's form in the compatibility mode,
and liveness requests (322, 904) in the pure processor.

The canonical vector is recomputed here with ``hmac``/``hashlib`` from the form's description.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools

import pytest

from common.config import ConfigError, SecurityConfig, load_config
from nameserver.acl import (
    AccessController,
    Credentials,
    Denial,
    ReplayCache,
    SecretStore,
    canonical_content,
    sign_request,
    sign_request_rocketmq,
)
from nameserver.client import register_broker_request, simple_request
from nameserver.codec import RemotingCommand, RequestCode, ResponseCode, fastjson
from nameserver.model import DataVersion, TopicConfig
from nameserver.routes.manager import RouteInfoManager
from nameserver.server.processor import ConnectionContext, RequestProcessor

SECRET = "s3cr3t-Value+/="
CREDS = Credentials("broker-ak", SECRET)
M = "10.0.0.1:10911"
PEER = ConnectionContext("c1", "10.0.0.1:50001")
NOW = 1_700_000_000_000
SKEW = 300_000
_NONCES = itertools.count()


def hmac_sha256_b64(secret: str, content: bytes) -> str:
    return base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha256).digest()).decode()


def signed(cmd: RemotingCommand, at: int = NOW, creds: Credentials = CREDS) -> RemotingCommand:
    return sign_request(cmd, creds, at, f"nonce-{next(_NONCES)}")


def register(addr: str = M, broker_id: int = 0) -> RemotingCommand:
    return register_broker_request(
        "C1", addr, "broker-a", broker_id, "10.0.0.1:10912", DataVersion(100, 1), [TopicConfig("TopicA", 8, 8)]
    )


def copy(cmd: RemotingCommand, **ext: str) -> RemotingCommand:
    return RemotingCommand(code=cmd.code, version=cmd.version, ext_fields={**cmd.ext_fields, **ext}, body=cmd.body)


@pytest.fixture
def controller() -> AccessController:
    return AccessController(SecretStore({"broker-ak": SECRET}), skew_ms=SKEW)


# ---------------------------------------------------------------------------------- the form


def test_canonical_vector():
    cmd = simple_request(
        RequestCode.UNREGISTER_BROKER, {"brokerName": "broker-a", "brokerAddr": "10.0.0.5:10911"}, b"{}", version=407
    )
    sign_request(cmd, Credentials("ak", "12345678"), 1700000000000, "n1")
    content = (
        b"nsaudit-acl-v1\n104 407\n"
        b"AccessKey=ak\nNonce=n1\nTimestamp=1700000000000\nbrokerAddr=10.0.0.5:10911\nbrokerName=broker-a\n"
        b"\n" + hashlib.sha256(b"{}").hexdigest().encode()
    )
    assert canonical_content(cmd.code, cmd.version, cmd.ext_fields, cmd.body) == content
    assert cmd.ext_fields["Signature"] == hmac_sha256_b64("12345678", content)
    assert set(cmd.ext_fields) == {"AccessKey", "Nonce", "Timestamp", "Signature", "brokerAddr", "brokerName"}


@pytest.mark.parametrize(
    "one, other",
    [
        ({"brokerAddr": "h:10911", "brokerId": "0"}, {"brokerAddr": "h:1091", "brokerId": "10"}),  # value shift
        ({"a=b": "c"}, {"a": "b=c"}),  # "=" moving from key to value
        ({"a": "x\nb=y"}, {"a": "x", "b": "y"}),  # a newline forging a line
        ({"a": "%3D"}, {"a": "="}),  # an escape written out
        ({"a": "1", "b": ""}, {"a": "1"}),  # an empty value is still signed
    ],
)
def test_different_fields_never_sign_alike(one, other):
    assert canonical_content(103, 1, one, None) != canonical_content(103, 1, other, None)


def test_code_version_and_body_are_signed(controller):
    for change in (dict(code=RequestCode.UNREGISTER_BROKER), dict(version=1), dict(body=b"other")):
        cmd = signed(register())
        forged = RemotingCommand(
            **{"code": cmd.code, "version": cmd.version, "ext_fields": cmd.ext_fields, "body": cmd.body, **change}
        )
        assert controller.check(forged, PEER.remote, NOW) == Denial("bad signature", "broker-ak")


def test_a_value_shift_is_refused_and_the_original_passes(controller):
    cmd = signed(register("10.0.0.1:10911", 0))
    assert controller.check(copy(cmd, brokerAddr="10.0.0.1:1091", brokerId="10"), PEER.remote, NOW).detail == (
        "bad signature"
    )
    assert controller.check(cmd, PEER.remote, NOW) is None


# ------------------------------------------------------------------------- freshness, replay


@pytest.mark.parametrize(
    "stamped, detail",
    [
        (NOW - SKEW, None),
        (NOW + SKEW, None),
        (NOW - SKEW - 1, "timestamp outside window"),
        (NOW + SKEW + 1, "timestamp outside window"),
    ],
)
def test_the_freshness_window(controller, stamped, detail):
    denial = controller.check(signed(register(), at=stamped), PEER.remote, NOW)
    assert (denial.detail if denial else None) == detail


@pytest.mark.parametrize("stamp", [None, "", "soon", "1e12", "99999999999999999999"])
def test_a_canonical_signature_without_a_usable_timestamp_is_refused(controller, stamp):
    cmd = register()
    cmd.ext_fields = {**cmd.ext_fields, "AccessKey": "broker-ak"}
    if stamp is not None:
        cmd.ext_fields["Timestamp"] = stamp
    cmd.ext_fields["Signature"] = hmac_sha256_b64(
        SECRET, canonical_content(cmd.code, cmd.version, cmd.ext_fields, cmd.body)
    )
    assert controller.check(cmd, PEER.remote, NOW) == Denial("no timestamp", "broker-ak")


def test_a_replay_is_refused_within_the_window_and_stale_after_it(controller):
    cmd = signed(register())
    assert controller.check(cmd, PEER.remote, NOW) is None
    assert controller.check(cmd, "10.9.9.9:1", NOW + 1) == Denial("replayed", "broker-ak")
    assert controller.check(cmd, PEER.remote, NOW + SKEW) == Denial("replayed", "broker-ak")
    assert controller.check(cmd, PEER.remote, NOW + SKEW + 1).detail == "timestamp outside window"
    # two equal requests signed in the same millisecond differ by their nonce
    assert controller.check(signed(register()), PEER.remote, NOW) is None


def test_a_refused_signature_is_not_remembered(controller):
    cmd = signed(register(), at=NOW - SKEW - 1)
    assert controller.check(cmd, PEER.remote, NOW).detail == "timestamp outside window"
    assert len(controller.replays) == 0


def test_the_replay_cache_is_bounded_and_never_forgets_into_a_replay():
    cache = ReplayCache(window_ms=1000, max_entries=2)
    assert [cache.admit(s, t, now=5000) for s, t in (("a", 4500), ("b", 4600), ("c", 4700))] == [None] * 3
    assert len(cache) == 2 and cache.floor_ms == 4500  # "a" was dropped: nothing that old passes
    assert cache.admit("a", 4500, now=5000) == "timestamp older than the replay cache"
    assert cache.admit("d", 4400, now=5000) == "timestamp older than the replay cache"
    assert cache.admit("b", 4600, now=5000) == "replayed"
    # entries leave with the window, and raise the floor so a clock stepping back lets none in
    assert cache.admit("e", 5701, now=5701) is None
    assert len(cache) == 1 and cache.floor_ms == 4700
    assert cache.admit("c", 4700, now=5000) == "timestamp older than the replay cache"


# ------------------------------------------------------------------------ compatibility mode


def test_rocketmq_signatures_pass_only_in_the_compatibility_mode():
    strict = AccessController(SecretStore({"broker-ak": SECRET}))
    compat = AccessController(SecretStore({"broker-ak": SECRET}), accept_rocketmq_signatures=True)
    peer = sign_request_rocketmq(register(), CREDS)
    assert strict.check(peer, PEER.remote, NOW) == Denial("bad signature", "broker-ak")
    assert compat.check(peer, PEER.remote, NOW) is None
    assert compat.check(peer, PEER.remote, NOW + 1) is None  # the weaker form: no replay check
    shifted = sign_request_rocketmq(register("10.0.0.1:1091", 10), CREDS)
    assert shifted.ext_fields["Signature"] == peer.ext_fields["Signature"]  # the known weakness
    # canonical signatures keep every check in either mode
    ours = signed(register())
    assert compat.check(ours, PEER.remote, NOW) is None
    assert compat.check(ours, PEER.remote, NOW) == Denial("replayed", "broker-ak")
    assert compat.check(sign_request_rocketmq(register(), Credentials("broker-ak", "x")), PEER.remote, NOW) == (
        Denial("bad signature", "broker-ak")
    )


# ------------------------------------------------------------------- liveness in the processor


def heartbeat() -> RemotingCommand:
    return simple_request(
        RequestCode.BROKER_HEARTBEAT, {"clusterName": "C1", "brokerAddr": M, "brokerName": "broker-a"}
    )


def query_data_version() -> RemotingCommand:
    return simple_request(
        RequestCode.QUERY_DATA_VERSION,
        {"clusterName": "C1", "brokerAddr": M, "brokerName": "broker-a", "brokerId": 0},
        fastjson.encode_data_version(DataVersion(100, 1)),
    )


@pytest.mark.parametrize("sign", [False, True])
def test_only_signed_liveness_requests_keep_a_broker_alive(sign):
    processor = RequestProcessor(RouteInfoManager(), access=AccessController(SecretStore({"broker-ak": SECRET})))
    assert processor.process(signed(register()), PEER, NOW).response.code == ResponseCode.SUCCESS
    expiry = 120_000
    for t in range(NOW + 30_000, NOW + 3 * expiry, 30_000):
        for cmd in (heartbeat(), query_data_version()):
            outcome = processor.process(signed(cmd, at=t) if sign else cmd, ConnectionContext("c9", "10.9.9.9:1"), t)
            if cmd.code == RequestCode.QUERY_DATA_VERSION:
                assert outcome.response.code == (ResponseCode.SUCCESS if sign else ResponseCode.NO_PERMISSION)
            if not sign:
                [event] = outcome.events
                assert (event["type"], event["reason"], event["detail"]) == ("rejected", "no_permission", "unsigned")
    events, _ = processor.scan_not_active_broker(NOW + 3 * expiry)
    assert [e["broker_addr"] for e in events if e["type"] == "expire"] == ([] if sign else [M])


# ------------------------------------------------------------------------------------ config


def test_freshness_keys_of_the_config(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        "[security]\nsignature_skew_ms = 60000\nreplay_cache_entries = 10\naccept_rocketmq_signatures = true\n"
    )
    security = load_config(path).security
    assert (security.signature_skew_ms, security.replay_cache_entries, security.accept_rocketmq_signatures) == (
        60000,
        10,
        True,
    )
    access = AccessController.from_config(security, SecretStore({"broker-ak": SECRET}))
    assert (access.skew_ms, access.replays.max_entries, access.accept_rocketmq_signatures) == (60000, 10, True)
    defaults = load_config(None).security  # conf/nsaudit.toml states the defaults
    assert (
        (defaults.signature_skew_ms, defaults.replay_cache_entries, defaults.accept_rocketmq_signatures)
        == (300_000, 200_000, False)
        == (
            SecurityConfig().signature_skew_ms,
            SecurityConfig().replay_cache_entries,
            SecurityConfig().accept_rocketmq_signatures,
        )
    )


@pytest.mark.parametrize(
    "body, message",
    [
        ("signature_skew_ms = 0", "security.signature_skew_ms must be >= 1"),
        ("replay_cache_entries = 0", "security.replay_cache_entries must be >= 1"),
        ('accept_rocketmq_signatures = "yes"', "security.accept_rocketmq_signatures must be bool"),
    ],
)
def test_bad_freshness_keys(tmp_path, body, message):
    path = tmp_path / "c.toml"
    path.write_text("[security]\n" + body + "\n")
    with pytest.raises(ConfigError, match=message.replace(".", r"\.")):
        load_config(path)
