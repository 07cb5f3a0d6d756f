"""Access control (``nameserver.acl``) and its hook in the pure processor: signing vectors (the
canonical form and RocketMQ's), freshness and replays, the key store, the allowlists, NO_PERMISSION
answers and ``rejected`` events.

The signing vectors are recomputed here with ``hmac``/``base64``/``hashlib`` from the forms'
descriptions (RocketMQ's ``AclClientRPCHook``, ``AclUtils.combineRequestContent``, ``AclSigner``;
``acl.canonical_content``), not with the module.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import itertools
import os
import pickle

import pytest

from common.config import ConfigError, SecurityConfig, load_config
from nameserver import acl
from nameserver.acl import (
    AccessController,
    Credentials,
    Denial,
    SecretsError,
    SecretStore,
    calculate_signature,
    client_credentials,
    exposure_notice,
    load_secret_store,
    parse_secrets_env_text,
    parse_secrets_file_text,
    rocketmq_content,
    sign_request,
    sign_request_rocketmq,
)
from nameserver.client import register_broker_request, simple_request, unregister_broker_request
from nameserver.codec import RequestCode, ResponseCode, SerializeType, decode_frame, encode_frame, make_request
from nameserver.model import DataVersion, TopicConfig
from nameserver.routes.manager import RouteInfoManager
from nameserver.server.processor import ConnectionContext, RequestProcessor

SECRET = "s3cr3t-Value+/="
CREDS = Credentials("broker-ak", SECRET)
M = "10.0.0.1:10911"
PEER = ConnectionContext("c1", "10.0.0.1:50001")
TOPICS = [TopicConfig("TopicA", 8, 8)]
NOW = 1_700_000_000_000  # the server's clock in these tests, epoch ms
_NONCES = itertools.count()


def hmac_sha1_b64(secret: str, content: bytes) -> str:
    """The signature computed independently of the module."""
    return base64.b64encode(hmac.new(secret.encode(), content, hashlib.sha1).digest()).decode()


def register(addr: str = M, cluster: str = "C1", name: str = "broker-a", broker_id: int = 0, **kw):
    return register_broker_request(
        cluster, addr, name, broker_id, addr.replace("10911", "10912"), DataVersion(100, 1), TOPICS, **kw
    )


def signed(cmd, creds: Credentials = CREDS, at: int = NOW):
    """Signed in the canonical form, stamped ``at``, with a nonce of its own."""
    return sign_request(cmd, creds, at, f"nonce-{next(_NONCES)}")


# ---------------------------------------------------------------------------------- vectors


def test_rocketmq_acl_signer_vector():
    # RocketMQ's AclSignerTest: calSignature("RocketMQ", "12345678")
    assert calculate_signature(b"RocketMQ", "12345678") == "IUc8rrO/0gDch8CjObLQsW2rsiA="
    assert hmac_sha1_b64("12345678", b"RocketMQ") == "IUc8rrO/0gDch8CjObLQsW2rsiA="


def test_worked_vector_of_the_module_docstring():
    ext = {
        "clusterName": "DefaultCluster",
        "brokerName": "broker-a",
        "brokerAddr": "10.0.0.5:10911",
        "brokerId": "0",
        "AccessKey": "rocketmq2",
    }
    body = b'{"counter":3,"timestamp":1700000000000}'
    # Java TreeMap order: "AccessKey" < "brokerAddr" < "brokerId" < "brokerName" < "clusterName"
    content = b"rocketmq2" + b"10.0.0.5:10911" + b"0" + b"broker-a" + b"DefaultCluster" + body
    assert rocketmq_content(ext, body) == content
    assert hmac_sha1_b64("12345678", content) == "sy0mL++DitBbB75iBKWN0+mPqiQ="
    assert calculate_signature(content, "12345678") == "sy0mL++DitBbB75iBKWN0+mPqiQ="
    cmd = make_request(RequestCode.UNREGISTER_BROKER, {k: v for k, v in ext.items() if k != "AccessKey"}, body)
    sign_request_rocketmq(cmd, Credentials("rocketmq2", "12345678"))
    assert cmd.ext_fields["AccessKey"] == "rocketmq2"
    assert cmd.ext_fields["Signature"] == "sy0mL++DitBbB75iBKWN0+mPqiQ="


def test_content_skips_signature_and_none_and_sorts_like_java():
    assert rocketmq_content({"b": "2", "a": "1", "Signature": "x", "c": None}, None) == b"12"
    assert rocketmq_content(None, b"body") == b"body"
    # U+1F600 is a surrogate pair (D83D DE00): before U+FFFF in Java's UTF-16 order, after it in Python's
    ext = {"\U0001f600": "emoji", "\uffff": "last"}
    assert rocketmq_content(ext, None) == b"emojilast"
    assert sorted(ext) == ["\uffff", "\U0001f600"]  # what a naive sort would have signed
    # a lone surrogate (JSON "\ud800") is written "?" as Java's getBytes does, never an error
    assert rocketmq_content({"a": "x\ud800y"}, None) == b"x?y"


def test_rocketmq_signing_adds_keys_and_is_stable_when_repeated():
    cmd = simple_request(RequestCode.UPDATE_NAMESRV_CONFIG, None, b"k=v")
    assert cmd.ext_fields is None
    sign_request_rocketmq(cmd, Credentials("ak", "sk", security_token="tok"))
    first = dict(cmd.ext_fields)
    assert set(first) == {"AccessKey", "SecurityToken", "Signature"}
    assert first["Signature"] == hmac_sha1_b64("sk", b"ak" + b"tok" + b"k=v")
    sign_request_rocketmq(cmd, Credentials("ak", "sk", security_token="tok"))
    assert cmd.ext_fields == first


@pytest.mark.parametrize("serialize_type", [SerializeType.JSON, SerializeType.ROCKETMQ])
def test_a_signature_survives_the_wire_in_both_header_forms(serialize_type):
    controller = AccessController(SecretStore({"broker-ak": SECRET}))
    cmd = signed(register(serialize_type=serialize_type))
    # ROCKETMQ drops empty values (docs/remoting-protocol.md §5); the signer leaves them out there
    cmd.ext_fields["emptyValue"] = ""
    cmd = signed(cmd)
    received = decode_frame(encode_frame(cmd))
    assert controller.check(received, PEER.remote, NOW) is None


# ------------------------------------------------------------------------------- secrets


def test_secrets_file_and_env_formats():
    text = "# fleet keys\n\n  broker-ak = s3cr3t-Value+/=  \nadmin=abc=def\n"
    store = parse_secrets_file_text(text, "secrets file")
    assert store.access_keys == ("admin", "broker-ak")
    assert store.secret_for("broker-ak") == SECRET and store.secret_for("admin") == "abc=def"
    env = parse_secrets_env_text("a=1, b=2 ,", "environment variable X")
    assert env.access_keys == ("a", "b") and env.secret_for("b") == "2"


@pytest.mark.parametrize(
    "text, message",
    [
        ("broker-ak:" + SECRET, "entry 1: expected accessKey=secretKey"),
        ("ok=1\n=" + SECRET, "entry 2: expected accessKey=secretKey"),
        ("ok=1\nbroker-ak=", "entry 2: expected accessKey=secretKey"),
        ("broker-ak=" + SECRET + "\nbroker-ak=" + SECRET + "x", "access key 'broker-ak' is given twice"),
    ],
)
def test_bad_secrets_are_named_without_their_values(text, message):
    with pytest.raises(SecretsError) as info:
        parse_secrets_file_text(text, "secrets file 'k'")
    assert message in str(info.value) and SECRET not in str(info.value)
    assert SECRET not in repr(info.value)


def test_load_secret_store_from_file_and_env(tmp_path):
    path = tmp_path / "secrets"
    path.write_text("broker-ak=" + SECRET + "\n")
    security = SecurityConfig(enabled=True, secrets_file=str(path), secrets_env="NSA_KEYS")
    store = load_secret_store(security, {"NSA_KEYS": "admin=xyz,broker-ak=" + SECRET})
    assert store.access_keys == ("admin", "broker-ak")
    with pytest.raises(SecretsError) as info:
        load_secret_store(security, {"NSA_KEYS": "broker-ak=other-" + SECRET})
    assert "two different secrets" in str(info.value) and SECRET not in str(info.value)
    with pytest.raises(SecretsError, match="'NSA_KEYS', which is not set"):
        load_secret_store(security, {})
    with pytest.raises(SecretsError, match="cannot be read"):
        load_secret_store(SecurityConfig(secrets_file=str(tmp_path / "missing")), {})
    os.mkfifo(tmp_path / "fifo")  # no writer: a read would wait for ever
    for endless in ("/dev/zero", str(tmp_path / "fifo")):
        with pytest.raises(SecretsError, match="not a regular file"):
            load_secret_store(SecurityConfig(secrets_file=endless), {})
    with pytest.raises(SecretsError, match="no secrets"):
        load_secret_store(SecurityConfig(secrets_env="EMPTY"), {"EMPTY": "# none"})


def test_client_credentials_pick_the_configured_key():
    security = SecurityConfig(secrets_env="K", access_key="broker-ak")
    assert client_credentials(security, {"K": "broker-ak=" + SECRET}) == CREDS
    assert client_credentials(SecurityConfig(secrets_env="K"), {"K": "broker-ak=" + SECRET}) is None
    with pytest.raises(SecretsError) as info:
        client_credentials(SecurityConfig(secrets_env="K", access_key="nope"), {"K": "broker-ak=" + SECRET})
    assert "'nope'" in str(info.value) and SECRET not in str(info.value)


def test_reprs_and_pickles_never_show_a_secret():
    store = SecretStore({"broker-ak": SECRET})
    controller = AccessController(store, ["10.0.0.0/8"], ["C1"])
    for obj in (CREDS, store, controller, Credentials("a", SECRET, SECRET)):
        assert SECRET not in repr(obj) and SECRET not in str(obj)
    assert repr(CREDS) == "Credentials(access_key='broker-ak')"
    assert repr(store) == "SecretStore(access_keys=['broker-ak'])"
    with pytest.raises(TypeError):
        pickle.dumps(store)
    with pytest.raises(SecretsError) as info:
        Credentials("", SECRET)
    assert SECRET not in str(info.value)


# ------------------------------------------------------------------------ access control


@pytest.fixture
def controller() -> AccessController:
    return AccessController(SecretStore({"broker-ak": SECRET, "admin-ak": "admin-secret"}))


PROTECTED = {
    RequestCode.PUT_KV_CONFIG: simple_request(RequestCode.PUT_KV_CONFIG, {"namespace": "n", "key": "k", "value": "v"}),
    RequestCode.DELETE_KV_CONFIG: simple_request(RequestCode.DELETE_KV_CONFIG, {"namespace": "n", "key": "k"}),
    RequestCode.REGISTER_BROKER: register(),
    RequestCode.UNREGISTER_BROKER: unregister_broker_request("C1", M, "broker-a", 0),
    RequestCode.WIPE_WRITE_PERM_OF_BROKER: simple_request(RequestCode.WIPE_WRITE_PERM_OF_BROKER, {"brokerName": "b"}),
    RequestCode.DELETE_TOPIC_IN_NAMESRV: simple_request(RequestCode.DELETE_TOPIC_IN_NAMESRV, {"topic": "T"}),
    RequestCode.UPDATE_NAMESRV_CONFIG: simple_request(RequestCode.UPDATE_NAMESRV_CONFIG, None, b"a=b"),
    RequestCode.ADD_WRITE_PERM_OF_BROKER: simple_request(RequestCode.ADD_WRITE_PERM_OF_BROKER, {"brokerName": "b"}),
    RequestCode.QUERY_DATA_VERSION: simple_request(
        RequestCode.QUERY_DATA_VERSION,
        {"clusterName": "C1", "brokerAddr": M, "brokerName": "broker-a", "brokerId": 0},
        b'{"counter":1,"timestamp":100}',
    ),
    RequestCode.BROKER_HEARTBEAT: simple_request(
        RequestCode.BROKER_HEARTBEAT, {"clusterName": "C1", "brokerAddr": M, "brokerName": "broker-a"}
    ),
}


def fresh(code: int):
    cmd = PROTECTED[code]
    return make_request(cmd.code, dict(cmd.ext_fields) if cmd.ext_fields else None, cmd.body)


@pytest.mark.parametrize("code", sorted(PROTECTED))
def test_every_change_needs_a_valid_signature(controller, code):
    assert acl.PROTECTED_CODES == frozenset(PROTECTED)
    assert controller.check(fresh(code), PEER.remote, NOW) == Denial("unsigned")
    assert controller.check(signed(fresh(code)), PEER.remote, NOW) is None
    assert controller.check(signed(fresh(code), Credentials("who", SECRET)), PEER.remote, NOW) == Denial(
        "unknown access key", "who"
    )
    assert controller.check(signed(fresh(code), Credentials("broker-ak", "wrong")), PEER.remote, NOW) == Denial(
        "bad signature", "broker-ak"
    )
    half = fresh(code)
    half.ext_fields = {**(half.ext_fields or {}), "AccessKey": "broker-ak"}  # key without signature
    assert controller.check(half, PEER.remote, NOW) == Denial("unsigned", "broker-ak")


def test_tampering_after_signing_breaks_the_signature(controller):
    cmd = signed(register())
    cmd.ext_fields["brokerAddr"] = "10.9.9.9:10911"
    assert controller.check(cmd, PEER.remote, NOW).detail == "bad signature"
    cmd = signed(register())
    cmd.body = cmd.body + b" "
    assert controller.check(cmd, PEER.remote, NOW).detail == "bad signature"


@pytest.mark.parametrize("code", [105, 106, 101, 219, 224, 206, 304, 319, 9999])
def test_reads_stay_open(controller, code):
    assert controller.check(make_request(code, {"topic": "T"}), PEER.remote, NOW) is None


def test_a_secret_sent_as_the_access_key_is_not_logged(controller):
    cmd = fresh(RequestCode.WIPE_WRITE_PERM_OF_BROKER)
    cmd.ext_fields.update(AccessKey=SECRET, Signature="x")
    assert controller.check(cmd, PEER.remote, NOW) == Denial("unknown access key", None)
    cmd.ext_fields.update(AccessKey="k" * 500)
    assert controller.check(cmd, PEER.remote, NOW).access_key == "k" * acl.MAX_LOGGED_ACCESS_KEY


@pytest.mark.parametrize(
    "cmd, remote, detail",
    [
        (register(cluster="Evil"), PEER.remote, "cluster Evil not allowed"),
        (register(addr="10.9.9.9:10911"), PEER.remote, "address 10.9.9.9 not allowed"),
        (register(addr="broker.example:10911"), PEER.remote, "address broker.example not allowed"),
        (register(), "10.9.9.9:50001", "peer 10.9.9.9 not allowed"),
        (register(), "::ffff:10.0.0.1:50001", None),  # a dual-stack socket's IPv4 peer
        (register(addr="[fd00::5]:10911"), "fd00::7:50001", None),
        (register(addr="[fd01::5]:10911"), "fd00::7:50001", "address fd01::5 not allowed"),
        (unregister_broker_request("Evil", "10.9.9.9:10911", "b", 0), "10.9.9.9:1", None),  # registrations only
    ],
)
def test_registration_allowlists(cmd, remote, detail):
    controller = AccessController(SecretStore({"broker-ak": SECRET}), ["10.0.0.0/24", "fd00::/64"], ["C1"])
    denial = controller.check(signed(cmd), remote, NOW)
    assert (denial.detail if denial else None) == detail
    if denial:
        assert denial.access_key == "broker-ak" and denial.remark == f"no permission: {detail}"


def test_empty_allowlists_allow_any_signed_registration(controller):
    assert controller.check(signed(register(addr="203.0.113.9:10911", cluster="Any")), "198.51.100.1:9", NOW) is None


# ----------------------------------------------------------------- the processor hook


def outcome_key(outcome):
    return (encode_frame(outcome.response) if outcome.response else None, outcome.events, outcome.changed)


def test_processor_refuses_unsigned_changes_with_no_permission_and_logs_them():
    processor = RequestProcessor(RouteInfoManager(), access=AccessController(SecretStore({"broker-ak": SECRET})))
    assert processor.process(signed(register()), PEER, NOW).response.code == ResponseCode.SUCCESS
    before = processor.routes.get_all_cluster_info()
    cases = [
        (register(addr="10.0.0.9:10911"), "unsigned", None),
        (
            signed(unregister_broker_request("C1", M, "broker-a", 0), Credentials("broker-ak", "bad")),
            "bad signature",
            "broker-ak",
        ),
        (fresh(RequestCode.WIPE_WRITE_PERM_OF_BROKER), "unsigned", None),
    ]
    for n, (cmd, detail, key) in enumerate(cases):
        cmd.opaque = 40 + n
        outcome = processor.process(cmd, PEER, NOW + 2000 + n)
        assert outcome.response.code == ResponseCode.NO_PERMISSION == 16
        assert outcome.response.remark == f"no permission: {detail}" and outcome.response.opaque == 40 + n
        assert outcome.response.ext_fields is None and not outcome.changed
        [event] = outcome.events
        assert event["type"] == "rejected" and event["reason"] == "no_permission"
        assert event["detail"] == detail and event.get("access_key") == key
        assert (event["request_code"], event["channel"], event["remote"]) == (cmd.code, "c1", PEER.remote)
        assert SECRET not in repr(event)
    assert processor.routes.get_all_cluster_info() == before
    first = processor.process(cases[0][0], PEER, NOW + 3000).events[0]
    assert (first["cluster"], first["broker_name"], first["broker_addr"], first["broker_id"]) == (
        "C1",
        "broker-a",
        "10.0.0.9:10911",
        0,
    )
    # lookups need nothing
    route = processor.process(make_request(RequestCode.GET_ROUTEINFO_BY_TOPIC, {"topic": "TopicA"}), PEER, NOW + 4000)
    assert route.response.code == ResponseCode.SUCCESS


def test_a_refused_oneway_request_is_silent_but_logged():
    processor = RequestProcessor(RouteInfoManager(), access=AccessController(SecretStore({"broker-ak": SECRET})))
    cmd = fresh(RequestCode.WIPE_WRITE_PERM_OF_BROKER)
    cmd.flag |= 2
    outcome = processor.process(cmd, PEER, NOW)
    assert outcome.response is None and outcome.events[0]["reason"] == "no_permission"


def test_signed_requests_run_exactly_as_without_access_control():
    open_proc = RequestProcessor(RouteInfoManager())
    guarded = RequestProcessor(RouteInfoManager(), access=AccessController(SecretStore({"broker-ak": SECRET})))
    script = [
        register(),
        register(addr="10.0.0.2:10911", broker_id=1),
        fresh(RequestCode.WIPE_WRITE_PERM_OF_BROKER),
        fresh(RequestCode.PUT_KV_CONFIG),
        fresh(RequestCode.UNREGISTER_BROKER),
    ]
    for n, cmd in enumerate(script):
        plain = make_request(cmd.code, dict(cmd.ext_fields) if cmd.ext_fields else None, cmd.body, opaque=n)
        sig = signed(make_request(cmd.code, dict(cmd.ext_fields) if cmd.ext_fields else None, cmd.body, opaque=n))
        assert outcome_key(guarded.process(sig, PEER, NOW + n)) == outcome_key(open_proc.process(plain, PEER, NOW + n))


def test_access_control_off_ignores_acl_keys_byte_for_byte():
    a, b = RequestProcessor(RouteInfoManager()), RequestProcessor(RouteInfoManager())
    for n, cmd in enumerate(
        [register(), fresh(RequestCode.WIPE_WRITE_PERM_OF_BROKER), fresh(RequestCode.DELETE_KV_CONFIG)]
    ):
        plain = make_request(cmd.code, dict(cmd.ext_fields) if cmd.ext_fields else None, cmd.body, opaque=n)
        forged = make_request(
            cmd.code, {**(cmd.ext_fields or {}), "AccessKey": "x", "Signature": "junk"}, cmd.body, opaque=n
        )
        assert outcome_key(a.process(plain, PEER, 1000 + n)) == outcome_key(b.process(forged, PEER, 1000 + n))


# ------------------------------------------------------------------------------- config


def test_security_section_of_the_config(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text(
        '[security]\nenabled = true\nallowed_networks = ["10.0.0.0/8", "fd00::/8"]\n'
        'allowed_clusters = ["C1"]\nsecrets_env = "NSA_KEYS"\naccess_key = "broker-ak"\n'
        "[audit]\nadmin_burst_changes = 5\n"
    )
    config = load_config(path)
    assert config.security == SecurityConfig(True, ("10.0.0.0/8", "fd00::/8"), ("C1",), "", "NSA_KEYS", "broker-ak")
    assert config.audit.admin_burst_changes == 5
    assert load_config(None).security == SecurityConfig()  # conf/nsaudit.toml: off


@pytest.mark.parametrize(
    "body, message",
    [
        ('allowed_networks = ["10.0.0.1/8"]', "is not a CIDR network"),
        ('allowed_networks = "10.0.0.0/8"', "security.allowed_networks must be tuple[str, ...]"),
        ("allowed_clusters = [1]", "security.allowed_clusters must be"),
        ("enabled = true", "needs security.secrets_file or security.secrets_env"),
        ('secret = "x"', "unknown key security.'secret'"),
    ],
)
def test_bad_security_sections(tmp_path, body, message):
    path = tmp_path / "c.toml"
    path.write_text("[security]\n" + body + "\n")
    with pytest.raises(ConfigError, match=message.replace("[", r"\[").replace(".", r"\.")):
        load_config(path)


# ------------------------------------------------------------------------- bind notice


@pytest.mark.parametrize(
    "host, where",
    [
        ("127.0.0.1", None),
        ("::1", None),
        ("localhost", None),
        ("127.8.0.1", None),
        ("0.0.0.0", "all interfaces"),
        ("::", "all interfaces"),
        ("", "all interfaces"),
        ("10.1.2.3", "a non-loopback address (10.1.2.3)"),
        ("ns.example", "a non-loopback address (ns.example)"),
    ],
)
def test_exposure_notice(host, where):
    off, on = exposure_notice(host, False), exposure_notice(host, True)
    if where is None:
        assert off is None and on is None
        return
    assert off == (
        f"listening on {where}; brokers and clients on the network can reach it; "
        "enable [security] to restrict route changes"
    )
    assert on.startswith(f"listening on {where};") and "[security] is enabled" in on
