"""Access control on a real server (127.0.0.1, port 0): refusals on the wire and in the log,
signed clients and fleets, the start-up notice, and no secret anywhere a run leaves text.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import subprocess
import sys
from argparse import Namespace
from pathlib import Path

import pytest

from common.config import ConfigError, EventLogConfig, NameServerConfig, SecurityConfig, load_config
from nameserver import acl
from nameserver.acl import AccessController, Credentials, SecretsError, SecretStore
from nameserver.client import RemotingClient
from nameserver.codec import ResponseCode
from nameserver.eventlog.writer import read_events
from nameserver.fleet.launcher import options_from_args
from nameserver.fleet.live import Fleet, FleetOptions
from nameserver.model import DataVersion, TopicConfig
from nameserver.server.controller import NameServerController
from nameserver.server.launcher import build_config, serve
from tests.nameserver.server.test_server import arun, start_server, stop_server

SECRET = "Zx8-broker-SECRET-q4"
ADMIN_SECRET = "Zx8-admin-SECRET-w7"
SECRETS = {"broker": SECRET, "admin": ADMIN_SECRET}
BROKER = Credentials("broker", SECRET)
ADMIN = Credentials("admin", ADMIN_SECRET)
M = "127.0.0.1:10911"
TOPICS = [TopicConfig("TopicA", 8, 8)]


@contextlib.asynccontextmanager
async def running(events_dir: Path, access: AccessController | None, ns_id: str = "ns-acl"):
    """An in-process server on 127.0.0.1:0 with this access control, stopped (``ns_stop``) on exit."""
    controller = NameServerController(
        ns_id, events_dir, NameServerConfig(listen="127.0.0.1:0"), EventLogConfig(), access=access
    )
    await controller.start()
    try:
        yield controller
    finally:
        await controller.shutdown("test end")


def guarded(networks=(), clusters=()) -> AccessController:
    return AccessController(SecretStore(SECRETS), networks, clusters)


async def connect(ctl: NameServerController, credentials: Credentials | None = None) -> RemotingClient:
    return await RemotingClient.connect(ctl.host, ctl.port, credentials=credentials)


async def register(client: RemotingClient, addr: str = M, cluster: str = "C1", name: str = "broker-a"):
    return await client.register_broker(
        cluster, addr, name, 0, addr.replace("10911", "10912"), DataVersion(100, 1), TOPICS
    )


def rejected(events_dir: Path, ns_id: str = "ns-acl") -> list[dict]:
    return [e for e in read_events(events_dir, ns_id) if e["type"] == "rejected"]


# ---------------------------------------------------------------------------- on the wire


def test_unsigned_and_forged_changes_are_refused_and_logged(tmp_path):
    async def scenario():
        async with running(tmp_path, guarded()) as ctl:
            broker, anon = await connect(ctl, BROKER), await connect(ctl)
            forger = await connect(ctl, Credentials("broker", "guessed"))
            assert (await register(broker)).code == ResponseCode.SUCCESS
            answers = {
                "register unsigned": await register(anon, "127.0.0.1:20911"),
                "register forged": await register(forger, "127.0.0.1:20911"),
                "unregister unsigned": await anon.unregister_broker("C1", M, "broker-a", 0),
                "unregister forged": await forger.unregister_broker("C1", M, "broker-a", 0),
                "wipe unsigned": await anon.wipe_write_perm("broker-a"),
                "wipe forged": await forger.wipe_write_perm("broker-a"),
            }
            # lookups and other reads are not affected, for anyone
            route = await anon.route("TopicA")
            cluster = await anon.cluster_info()
            for client in (broker, anon, forger):
                await client.close()
            return answers, route, cluster

    answers, route, cluster = arun(scenario())
    for what, answer in answers.items():
        assert answer.code == ResponseCode.NO_PERMISSION == 16, what
        detail = "unsigned" if "unsigned" in what else "bad signature"
        assert answer.remark == f"no permission: {detail}", what
    assert route["broker_datas"][0]["broker_addrs"] == {0: M} and route["queue_datas"][0]["perm"] == 6
    assert list(cluster["broker_addr_table"]) == ["broker-a"]
    refused = rejected(tmp_path)
    assert [(e["request_code"], e["reason"], e["detail"], e.get("access_key")) for e in refused] == [
        (103, "no_permission", "unsigned", None),
        (103, "no_permission", "bad signature", "broker"),
        (104, "no_permission", "unsigned", None),
        (104, "no_permission", "bad signature", "broker"),
        (205, "no_permission", "unsigned", None),
        (205, "no_permission", "bad signature", "broker"),
    ]
    assert refused[0]["broker_addr"] == "127.0.0.1:20911" and refused[0]["remote"].startswith("127.0.0.1:")
    types = [e["type"] for e in read_events(tmp_path, "ns-acl")]
    assert "unregister" not in types and "wipe_write_perm" not in types and types.count("register") == 1


def test_signed_changes_are_accepted(tmp_path):
    async def scenario():
        async with running(tmp_path, guarded()) as ctl:
            broker, admin = await connect(ctl, BROKER), await connect(ctl, ADMIN)
            codes = [(await register(broker)).code]
            wipe = await admin.wipe_write_perm("broker-a")
            codes += [
                wipe.code,
                (await admin.add_write_perm("broker-a")).code,
                (await admin.put_kv_config("ns", "k", "v")).code,
                (await admin.update_namesrv_config("a=b\n")).code,
                (await admin.delete_topic("TopicA")).code,
                (await broker.unregister_broker("C1", M, "broker-a", 0)).code,
            ]
            await broker.close()
            await admin.close()
            return codes, wipe.ext_fields

    codes, wipe_ext = arun(scenario())
    assert codes == [0] * 7 and wipe_ext == {"wipeTopicCount": "1"}
    assert rejected(tmp_path) == []
    types = [e["type"] for e in read_events(tmp_path, "ns-acl") if e["type"] != "channel_close"]
    assert types[1:-1] == ["register", "wipe_write_perm", "add_write_perm", "delete_topic", "unregister"]


def test_allowlists_refuse_foreign_clusters_and_addresses(tmp_path):
    async def scenario():
        async with running(tmp_path, guarded(["127.0.0.0/8"], ["C1"])) as ctl:
            broker = await connect(ctl, BROKER)
            answers = [
                await register(broker, cluster="Evil"),
                await register(broker, "10.9.9.9:10911"),
                await register(broker),
            ]
            await broker.close()
            return answers

    answers = arun(scenario())
    assert [(a.code, a.remark) for a in answers] == [
        (16, "no permission: cluster Evil not allowed"),
        (16, "no permission: address 10.9.9.9 not allowed"),
        (0, None),
    ]
    assert [(e["detail"], e["access_key"], e["cluster"]) for e in rejected(tmp_path)] == [
        ("cluster Evil not allowed", "broker", "Evil"),
        ("address 10.9.9.9 not allowed", "broker", "C1"),
    ]


def test_a_peer_outside_the_networks_is_refused(tmp_path):
    async def scenario():
        async with running(tmp_path, guarded(["10.0.0.0/8"])) as ctl:  # our peer is 127.0.0.1
            broker = await connect(ctl, BROKER)
            answer = await register(broker, "10.0.0.5:10911")
            await broker.close()
            return answer

    assert arun(scenario()).remark == "no permission: peer 127.0.0.1 not allowed"


def test_access_control_off_accepts_signed_and_unsigned_alike(tmp_path):
    async def scenario():
        async with running(tmp_path, None) as ctl:
            anon, signer = await connect(ctl), await connect(ctl, Credentials("whoever", "anything"))
            plain = [await register(anon), await anon.wipe_write_perm("broker-a")]
            signed = [await register(signer), await signer.wipe_write_perm("broker-a")]
            await anon.close()
            await signer.close()
            return plain, signed

    plain, signed = arun(scenario())
    for a, b in zip(plain, signed, strict=True):
        assert (a.code, a.remark, a.ext_fields, a.body) == (b.code, b.remark, b.ext_fields, b.body)
    assert plain[0].code == 0 and rejected(tmp_path) == []


# ------------------------------------------------------------------------------- clients


def test_a_signed_fleet_registers_and_admin_faults_pass(tmp_path):
    lines: list[str] = []

    class Out:
        def write(self, text: str) -> None:
            lines.extend(t for t in text.splitlines() if t)

        def flush(self) -> None:
            pass

    async def scenario():
        async with running(tmp_path, guarded(["127.0.0.0/8", "10.0.0.0/8"])) as ctl:
            options = FleetOptions(
                servers=((ctl.host, ctl.port),),
                brokers=4,
                slaves=1,
                topics=6,
                duration_s=1.0,
                period_ms=300,
                faults=("wipe", "delete_topic"),
                seed=5,
                credentials=ADMIN,
            )
            fleet = Fleet(options, out=Out())
            await fleet.start()
            await fleet.run()
            await fleet.stop()
            return sum(a.errors for a in fleet.agents), repr(options)

    errors, options_repr = arun(scenario())
    assert errors == 0 and ADMIN_SECRET not in options_repr
    events = list(read_events(tmp_path, "ns-acl"))
    types = {e["type"] for e in events}
    assert {"register", "wipe_write_perm", "delete_topic", "unregister"} <= types
    assert rejected(tmp_path) == []


def test_fleet_credentials_come_from_the_config_not_flags(tmp_path, monkeypatch):
    config = tmp_path / "fleet.toml"
    config.write_text('[security]\nsecrets_env = "NSA_FLEET_KEYS"\naccess_key = "admin"\n')
    monkeypatch.setenv("NSA_FLEET_KEYS", f"broker={SECRET},admin={ADMIN_SECRET}")
    args = Namespace(
        ns="127.0.0.1:9876",
        brokers=2,
        slaves=0,
        topics=2,
        duration=1.0,
        period_ms=500,
        faults="none",
        seed=1,
        config=str(config),
    )
    assert options_from_args(args).credentials == ADMIN
    monkeypatch.delenv("NSA_FLEET_KEYS")
    with pytest.raises(SecretsError, match="NSA_FLEET_KEYS"):
        options_from_args(args)


# --------------------------------------------------------------------------- start-up notice


def serve_once(tmp_path: Path, monkeypatch, access: AccessController | None, shown_host: str) -> None:
    """Run :func:`serve` on 127.0.0.1:0, with ``start`` reporting ``shown_host`` as the bound address
    (tests bind loopback only), and stop it once it is ready."""
    real_start = NameServerController.start
    started: list[NameServerController] = []

    async def start(self):
        _, port = await real_start(self)
        started.append(self)
        return shown_host, port

    monkeypatch.setattr(NameServerController, "start", start)

    async def scenario():
        task = asyncio.ensure_future(
            serve("ns-n", str(tmp_path), NameServerConfig(listen="127.0.0.1:0"), EventLogConfig(), access)
        )
        while not started:
            await asyncio.sleep(0.01)
        await asyncio.sleep(0.05)
        started[0].request_stop("test")
        return await task

    assert arun(scenario()) == 0


@pytest.mark.parametrize(
    "shown_host, access, expected",
    [
        (
            "0.0.0.0",
            None,
            "nameserver ns-n: listening on all interfaces; brokers and clients on the network can "
            "reach it; enable [security] to restrict route changes",
        ),
        (
            "10.1.2.3",
            "on",
            "nameserver ns-n: listening on a non-loopback address (10.1.2.3); brokers and clients on "
            "the network can reach it; [security] is enabled: route changes need a signed request",
        ),
        ("127.0.0.1", None, None),
    ],
)
def test_start_up_notice_on_stderr(tmp_path, monkeypatch, capsys, shown_host, access, expected):
    serve_once(tmp_path, monkeypatch, guarded() if access else None, shown_host)
    out, err = capsys.readouterr()
    assert out.startswith(f"nameserver ns-n listening on {shown_host}:")
    assert (err.strip() or None) == expected


def test_enabled_without_loadable_secrets_is_a_one_line_error(tmp_path, monkeypatch):
    config = tmp_path / "acl.toml"
    config.write_text('[security]\nenabled = true\nsecrets_env = "NSA_UNSET_VAR"\n')
    monkeypatch.delenv("NSA_UNSET_VAR", raising=False)
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "nameserver",
            "--ns-id",
            "ns-x",
            "--events",
            str(tmp_path),
            "--listen",
            "127.0.0.1:0",
            "--config",
            str(config),
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert result.stderr.strip().splitlines() == [
        "nsaudit nameserver: error: security.secrets_env names 'NSA_UNSET_VAR', which is not set"
    ]


# ------------------------------------------------------------------------------ no leaks


def test_no_secret_reaches_logs_events_stderr_exceptions_or_reprs(tmp_path, monkeypatch, caplog):
    """One run with access control on, through the CLI and in process, with every refusal and
    error path: no secret value appears in anything it leaves behind."""
    caplog.set_level(logging.DEBUG)
    secrets_file = tmp_path / "secrets"
    secrets_file.write_text(f"# fleet\nbroker={SECRET}\n")
    monkeypatch.setenv("NSA_ADMIN_KEYS", f"admin={ADMIN_SECRET}")
    config = tmp_path / "acl.toml"
    config.write_text(
        f'[security]\nenabled = true\nallowed_networks = ["127.0.0.0/8"]\n'
        f'allowed_clusters = ["C1"]\nsecrets_file = "{secrets_file}"\nsecrets_env = "NSA_ADMIN_KEYS"\n'
    )
    texts: list[str] = []

    # the CLI server: its stdout, stderr and event log
    proc, host, port = start_server(tmp_path / "cli-events", "ns-cli", config=config)

    async def traffic(host: str, port: int) -> list[str]:
        seen = []
        clients = [
            await RemotingClient.connect(host, port, credentials=c)
            for c in (BROKER, ADMIN, None, Credentials("broker", "wrong"), Credentials(SECRET, SECRET))
        ]
        for client in clients:
            for answer in (
                await register(client),
                await register(client, "10.9.9.9:10911"),
                await register(client, cluster="Evil"),
                await client.wipe_write_perm("broker-a"),
                await client.update_namesrv_config("kvConfigPath=/x\n"),
                await client.put_kv_config("n", "k", "v"),
                await client.get_namesrv_config(),
                await client.unregister_broker("C1", M, "broker-a", 0),
            ):
                seen.append(repr(answer))
                seen.append((answer.body or b"").decode("utf-8", "replace"))
            if client.credentials is None or client.credentials.access_key != SECRET:
                seen.append(repr(client.__dict__))  # (a secret used as a key id is the caller's own doing)
            await client.close()
        return seen

    try:
        texts += arun(traffic(host, port))
    finally:
        assert stop_server(proc) == 0
    texts += [proc.stdout.read(), proc.stderr.read()]

    # in process: the controller, its processor and access control, with logging captured
    ns_config, eventlog_config, access = build_config(
        Namespace(config=str(config), listen="127.0.0.1:0", broker_expiry_ms=None, scan_interval_ms=None, ns_id="ns-in")
    )
    texts += [repr(access), repr(access.secrets), str(access.secrets), repr(ns_config), repr(load_config(config))]

    async def in_process():
        async with running(tmp_path / "in-events", access, "ns-in") as ctl:
            texts.extend(await traffic(ctl.host, ctl.port))
            texts.append(repr(ctl.processor.__dict__))

    arun(in_process())

    # exceptions on the way: bad secret files and keys, misconfigured sections
    for bad in (f"broker:{SECRET}", f"broker={SECRET}\nbroker={ADMIN_SECRET}", f"={SECRET}"):
        secrets_file.write_text(bad)
        with pytest.raises(SecretsError) as info:
            acl.load_secret_store(SecurityConfig(secrets_file=str(secrets_file)))
        texts += [str(info.value), repr(info.value)]
    with pytest.raises(SecretsError) as info:
        SecretStore({"broker": SECRET}).merged(SecretStore({"broker": ADMIN_SECRET}), "secrets")
    texts += [str(info.value), repr(info.value)]
    with pytest.raises(SecretsError) as info:
        SecretStore({"broker": SECRET}).credentials("nobody")
    texts.append(str(info.value))
    with pytest.raises(ConfigError) as config_error:
        load_config(_write(tmp_path / "bad.toml", "[security]\nenabled = true\n"))
    texts.append(str(config_error.value))

    texts += [p.read_text() for p in tmp_path.rglob("events-*")]
    texts += [record.getMessage() for record in caplog.records]
    texts += [repr(o) for o in (BROKER, ADMIN, Credentials("x", SECRET, security_token=ADMIN_SECRET))]
    everything = "\n".join(texts)
    assert "no_permission" in everything and "unknown access key" in everything  # the run did refuse
    for secret in (SECRET, ADMIN_SECRET):
        assert secret not in everything


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path
