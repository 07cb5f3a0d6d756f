"""The event log's bytes do not change when the events are built differently: a seeded simulated day
and a scripted run of every event the simulator never writes, through the real writer, against the
SHA-256 of each segment as the code before ``nameserver.events`` wrote them.

The digests were recorded at commit 3260321 (before the builders) by running this module's
``_simulated_day`` and ``_scripted`` on that code. A change here means the log's format changed,
which v1 does not allow (docs/event-log.md, Versioning); regenerate them only for a deliberate,
documented change of what is written.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import nameserver.sim.engine
from common.config import EventLogConfig
from common.timeutil import parse_time
from nameserver.codec import MalformedFrame, RemotingCommand
from nameserver.collect.live.findings import LiveFinding
from nameserver.collect.live.incidents import LiveIncident
from nameserver.collect.record import ObservedServer
from nameserver.collect.view import ServerView
from nameserver.eventlog.writer import EventLogWriter
from nameserver.model import DataVersion, TopicConfig
from nameserver.routes.manager import RequestContext, RouteInfoManager, ns_start_event, ns_stop_event, rejected_event
from nameserver.server.journal import Outage, log_unavailable_event
from nameserver.server.processor.context import ConnectionContext, decoded_keys
from nameserver.server.processor.rejections import connection_event, malformed_frame_event
from nameserver.sim.options import FAULTS, SimOptions
from nameserver.sim.run import simulate

# every fault at 40 times its rate for 4 hours across midnight: restarts, expiries, partitions,
# promotions, unregisters, wipes and deletes, segments rotating at the day boundary
SIMULATED_DAY = {
    "ns-a/2026-11-21/events-00000000000000000001.jsonl": "4ca302f91c49d25cd2d10862a7534c2231d7a00d1e629b4f632300e71e0eae6e",
    "ns-a/2026-11-21/events-00000000000000000915.jsonl": "a98412f9efa42e332eb64680e952bd6212991b8e7e69e652b27573b80901720c",
    "ns-a/2026-11-21/events-00000000000000000936.jsonl": "84761640e2b31ff8e14e3d8712e87efc2f44f529bf8f93a219fdfc8a4131dfdc",
    "ns-a/2026-11-21/events-00000000000000001435.jsonl": "15781c8ef68066e91a04031d1a7dc868faf454d96abbab998a2248c23c727a24",
    "ns-a/2026-11-21/events-00000000000000001474.jsonl": "2ee926470a0fc234cbca3378b42ff6f3d180a6521d72c247669734a4c1bc1755",
    "ns-a/2026-11-21/events-00000000000000001560.jsonl": "dcc065814d3f3478aa7276d51fe2501e9b1dd5420d67d9e2b04313928b19de9e",
    "ns-a/2026-11-22/events-00000000000000002179.jsonl": "699e03425e24af6f6b012654a0b05c51e2780f6132c299c6f693aab9ac7eb7f3",
    "ns-a/2026-11-22/events-00000000000000002795.jsonl": "ee69c767e81770a25dd5080e7bd75210a2033ebacf0e9f4b6495dc0206c4d218",
    "ns-a/2026-11-22/events-00000000000000002876.jsonl": "001f0a9705be2a51335229d5dea0d58cbd8c1cac2d47bf7246979fd7cab1d2cb",
    "ns-a/2026-11-22/events-00000000000000003048.jsonl": "84945378cc53609e1fe80156a158c56ee50e7004bf615740fe7dc21b48c5b16e",
    "ns-a/2026-11-22/events-00000000000000003170.jsonl": "afa8d5fa11044ed2b49bf5a6c62d5e96542bf19915ed488218924b66c7f0214f",
    "ns-a/2026-11-22/events-00000000000000004008.jsonl": "51c806f9efe480c0efdda00d532fcf4b3452e6475f8a0b1ac377b54440eb058e",
    "ns-a/2026-11-22/events-00000000000000004230.jsonl": "c5a0399b2b3e18f3db9b80a8223fb3bde605379bb051ad268f17a3c6f4f1f14b",
    "ns-a/2026-11-22/events-00000000000000004372.jsonl": "829e0bdf9a464bc449696963582ce2a8480f5d3b7c3a7b0bd1b9723ada7cf5f1",
    "ns-b/2026-11-21/events-00000000000000000001.jsonl": "3b11f9206a9da49782d4efbe513873eaf66773fbd1d4c37c1ae647833cac3447",
    "ns-b/2026-11-21/events-00000000000000000335.jsonl": "06116d2a268f745221579d4f394c27f1e4e154bcc06cbdee33172fab7574cede",
    "ns-b/2026-11-21/events-00000000000000000952.jsonl": "529fd0b88ff5d21cd134173a8740085b44448a6558e12c4ba8fb4533e0f740df",
    "ns-b/2026-11-22/events-00000000000000002295.jsonl": "bb1a03ff9efa3e0ab2a47cdddfb2f2df673b34e0565c71027c02b837032724b7",
    "ns-b/2026-11-22/events-00000000000000003565.jsonl": "597a9b505cc2ce7e14058d9df7f3417f39ce07976292a375631468b8a7026069",
    "ns-b/2026-11-22/events-00000000000000004187.jsonl": "41a7e331bb9f3395cae472befc56094d671de756a251c6d309c01db36e8b1348",
    "ns-b/2026-11-22/events-00000000000000004278.jsonl": "a019beab5c1cf9a0cb443ed7dca2eca556f32390c50168e58326259b1aa94ecd",
    "ns-b/2026-11-22/events-00000000000000004451.jsonl": "7135f8748c3958c5705dc5cf5c6f11c8a78485d30576c987a81e30af4525fdd0",
    "ns-c/2026-11-21/events-00000000000000000001.jsonl": "24f16a2616fa35e95edbe6f27a49cd61b3ad7bf46272453db5dadef3ed7ac33b",
    "ns-c/2026-11-21/events-00000000000000001031.jsonl": "d71346de4be33a6d821fe51281cbde48e918b3d254f4da215a6965337b6c109f",
    "ns-c/2026-11-21/events-00000000000000001235.jsonl": "102349980db2049afc6e3d880dc61df60a0d753a4418126bdf380ad685f1e565",
    "ns-c/2026-11-21/events-00000000000000001966.jsonl": "a4bcaa6344de96d245157ea197d06e04a07245d7812ffd871cb592f03bf5e967",
    "ns-c/2026-11-22/events-00000000000000002246.jsonl": "b9eeff4d5d8362d926163b4e93bc41a29764bf92d262546a5b4454d541022ce8",
    "ns-c/2026-11-22/events-00000000000000002775.jsonl": "afff6fa4f8423f2b1d25327b6414c4855da0dae026c6ad7191cffc3cc525c472",
    "ns-c/2026-11-22/events-00000000000000002996.jsonl": "76e0314cabc5cfb52a6eb8116b342198a9e98fb9661d218c5e7d92148338dc23",
    "ns-c/2026-11-22/events-00000000000000003355.jsonl": "5586b15f09e60a1092ef5a51f9987cee8b1b45a10732573fb38ef0f566479bcd",
    "ns-c/2026-11-22/events-00000000000000003457.jsonl": "934fe8ade581d204f981bc06521234a389244c35d2f24fedad88a1264aa63ad1",
    "ns-c/2026-11-22/events-00000000000000004322.jsonl": "c5d92bafff28c82dc3ecfa4fc5bfdca46b10fc47d2bccb56461682f2c19edb4d",
}
SCRIPTED = {
    "ns-a/2026-11-21/events-00000000000000000001.jsonl": "70f75cda2007f975525ef0a51b2ed5f1d062b27e71cb7b4113d281a114af7b18",
    "obs-a/2026-11-21/events-00000000000000000001.jsonl": "be57cb75ae16c7ce86628b0de4e1489843def8f441a218e0a51d2ed991ea0679",
}
T0 = 1_795_219_200_000
ADDR = "10.0.0.5:10911"


def server_events() -> list[dict]:
    """A server's events beyond the simulator's: 904 and 322 heartbeats, deletes, every refusal."""
    routes, ctx = RouteInfoManager(broker_expiry_ms=120_000), RequestContext("c1", "10.0.0.5:50112", 103)
    dv = DataVersion(T0 - 100_000, 3)
    topics = [TopicConfig("TopicTest", 8, 8, 6, 0, False, "SINGLE_TAG")]
    events = [ns_start_event(T0, 120_000, 10_000, "0.0.0")]
    events += routes.register_broker(
        "DefaultCluster", ADDR, "broker-a", 0, "10.0.0.5:10912", dv, topics, [], T0 + 1, ctx
    ).events
    events += routes.broker_heartbeat("DefaultCluster", ADDR, "broker-a", T0 + 2, RequestContext("c1", "r", 904))
    for version in (dv, DataVersion(T0, 4)):
        events += routes.query_data_version(
            "DefaultCluster", ADDR, "broker-a", 0, version, T0 + 3, RequestContext("c1", "r", 322)
        )[2]
    events += routes.delete_topic("TopicTest", None, T0 + 4, RequestContext("c2", "10.0.0.9:1", 216))
    events += routes.delete_topic("Other", "DefaultCluster", T0 + 4, RequestContext("c2", "10.0.0.9:1", 216))
    conn = ConnectionContext("c3", "10.0.0.7:4000")
    cmd = RemotingCommand(
        103,
        version=401,
        ext_fields={"clusterName": "DefaultCluster", "brokerName": "broker-a", "brokerAddr": ADDR, "brokerId": "0"},
    )
    events += [
        rejected_event(T0 + 5, "unknown_code", RequestContext("c3", "10.0.0.7:4000", 999)),
        rejected_event(T0 + 5, "internal_error", RequestContext("c3", "10.0.0.7:4000", 103), detail="KeyError: 'x'"),
        rejected_event(
            T0 + 5,
            "no_permission",
            RequestContext("c3", "10.0.0.7:4000", 103),
            detail="denied",
            access_key="AK1",
            **decoded_keys(cmd),
        ),
        rejected_event(
            T0 + 5,
            "crc_mismatch",
            RequestContext("c3", "10.0.0.7:4000", 103),
            detail="bad crc",
            **decoded_keys(RemotingCommand(103, version=7)),
        ),
        malformed_frame_event(
            T0 + 6,
            conn,
            MalformedFrame(
                "bad_header",
                {
                    "frame_length": 40,
                    "serialize_type": 0,
                    "header_length": 99,
                    "code": 103,
                    "version": 401,
                    "language": "JAVA",
                },
                "x",
            ),
        ),
        malformed_frame_event(T0 + 6, conn, MalformedFrame("frame_too_large", {"frame_length": 1 << 30})),
        connection_event(T0 + 7, conn, "connection_limit", max_connections=10),
        connection_event(T0 + 7, conn, "slow_reader", write_buffer_bytes=1 << 20),
        connection_event(T0 + 7, conn, "frame_timeout", frame_timeout_ms=30_000),
        log_unavailable_event(T0 + 8, Outage(T0 + 1, "ENOSPC", refused=3, unlogged=2)),
        log_unavailable_event(T0 + 9, Outage(T0 + 1, "EIO", refused=1), routes.refresh_credits({ADDR: T0 + 8})),
    ]
    events += routes.unregister_broker("DefaultCluster", ADDR, "broker-a", 0, T0 + 10, RequestContext("c1", "r", 104))
    events += routes.on_channel_close("c1", T0 + 11, "10.0.0.5:50112")
    events.append(ns_stop_event(T0 + 12, "SIGTERM", 2))
    events.append(ns_stop_event(T0 + 13, None))
    return events


def observation_events() -> list[dict]:
    """A collector's stream: start, snapshot, changes, an outage, a recovery, stop, a live incident."""
    server = ObservedServer("10.0.0.2:9876", interval_ms=10_000)
    brokers = {
        "broker-a": {
            "cluster": "DefaultCluster",
            "broker_name": "broker-a",
            "broker_addrs": [{"broker_id": 0, "broker_addr": ADDR}],
        }
    }
    route = {
        "queue_datas": [
            {"broker_name": "broker-a", "read_queue_nums": 8, "write_queue_nums": 8, "perm": 6, "topic_sys_flag": 0}
        ],
        "broker_datas": [brokers["broker-a"]],
        "filter_server_table": [],
    }
    events = server.start(T0)
    events += server.observed(ServerView(brokers, {"TopicTest": route, "Unrouted": None}), T0 + 1, 1)
    events += server.observed(ServerView({}, {"TopicTest": dict(route, queue_datas=[])}), T0 + 2, 2)
    events += server.failed(T0 + 3, 3, "timeout", "no answer within 5 s")
    events += server.observed(ServerView(brokers, {}), T0 + 4, 4)
    events += server.stop(T0 + 5, "SIGTERM")
    finding = LiveFinding(
        "write_perm_wiped",
        "obs-a",
        "broker-a",
        T0,
        "critical",
        family="broker",
        cause_key="broker-a",
        servers=("obs-a",),
    )
    incident = LiveIncident("live-3f0c4a9be210", "broker", "broker-a", T0, T0, seen=[finding])
    events += [incident.event("open", T0 + 6), incident.event("close", T0 + 7)]
    return events


def _digests(events_dir: Path) -> dict[str, str]:
    return {
        p.relative_to(events_dir).as_posix(): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(events_dir.glob("*/*/events-*"))
    }


def _simulated_day(events_dir: Path) -> dict[str, str]:
    simulate(
        SimOptions(
            events_dir=events_dir,
            ns=3,
            brokers=12,
            slaves=1,
            topics=40,
            start_ms=parse_time("2026-11-21T22:00:00Z"),
            hours=4.0,
            seed=3,
            faults=FAULTS,
            fault_rate=40.0,
            quiet=True,
        )
    )
    return _digests(events_dir)


def _scripted(events_dir: Path) -> dict[str, str]:
    for ns, events in (("ns-a", server_events()), ("obs-a", observation_events())):
        with EventLogWriter(events_dir, ns, EventLogConfig(durability="none")) as writer:
            for event in events:
                writer.append(event)
    return _digests(events_dir)


def test_a_simulated_day_writes_the_same_bytes(tmp_path, monkeypatch):
    # ns_start carries the software version: pin it, so a release does not change the digests
    monkeypatch.setattr(nameserver.sim.engine, "package_version", lambda: "0.0.0")
    assert _simulated_day(tmp_path / "events") == SIMULATED_DAY


def test_every_other_event_writes_the_same_bytes(tmp_path):
    assert _scripted(tmp_path / "events") == SCRIPTED
