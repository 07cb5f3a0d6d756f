"""A day of ``nsaudit collect`` against three real RocketMQ name servers, with the faults operators
meet, and a fault-free run of the same fleet before it (issue "Audit the RocketMQ cluster you
already run", its end-to-end acceptance).

Three Java name servers (``nsA``, ``nsB``, ``nsC``), master brokers of one cluster and the client
JVM (for ``mqadmin``) run on 127.0.0.1; the collector runs as a user starts it, with the servers
named ``nsA=HOST:PORT;...``. A shadow ``nsaudit nameserver`` (``shadow``, answering as the release's
name server) is in every broker's ``namesrvAddr`` too, starts once the topics exist and logs into
``collected/`` (README, "Audit an existing cluster"). First a fault-free run: brokers ``scn-a``,
``scn-k`` and ``scn-s`` (which alone carries topic ``ScnSolo``) list every server, the collector
writes to ``clean/`` for a while and stops. Then broker ``scn-b`` starts, a second collector writes
to ``collected/``, and one after the other, each seen in its streams before the next:

- ``partition``: ``scn-b`` lists only nsA and nsB in its ``namesrvAddr``, from its start;
- ``wipe``: ``mqadmin wipeWritePerm -b scn-a -n <nsA>``: scn-a's write permission on nsA only;
- ``ns_restart``: nsC stopped, then started again on its port: empty until the brokers register;
- ``delete_topic``: ``mqadmin deleteTopic -t ScnDoomed -c scn -n <nsB>``: the topic goes from the
  brokers and from nsB; nsA and nsC keep their route (a 4.9 or 5.x name server adds a broker's
  topics at a registration with a new data version but never removes one). The new data version
  also rewrites scn-a's queue data on nsA at its next registration: the wipe ends there;
- ``broker_kill``: ``kill -9`` of broker ``scn-k``: each server drops it when its channel closes;
- ``read_only``: ``mqadmin updateTopic -p 4`` of ``ScnSolo``: scn-s registers it read-only with a new
  data version, on every server within a round (no WIPE_WRITE_PERM);
- ``broker_shutdown``: SIGTERM of ``scn-s``: it unregisters from every server (the shadow logs the
  UNREGISTER_BROKER) and ``ScnSolo`` is then on no server.

Each fault is held longer than the divergence grace of an audit configured for this fleet
(:data:`AUDIT_CONFIG`: the brokers register every 10 s), so the audit of the day can be checked
against the truth. :func:`run_scenario` returns the collected logs and the ground truth (also
written to ``<events>/_truth/faults.jsonl`` in the simulator's shape: ``kind``, ``ns``,
``subject``, ``start_ms``, ``end_ms``), with the time of each fault's injection; ``ns_restart``
also has ``ready_ms``, when the restarted server said it was ready.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from nameserver.eventlog.segments import read_events
from tests.interop.rocketmq import (
    REPO,
    Driver,
    JavaProcess,
    Release,
    _java,
    free_port,
    start_broker,
    start_nsaudit_nameserver,
    wait_for,
)

CLUSTER = "scn"
SERVERS = ("nsA", "nsB", "nsC")
SHADOW = "shadow"  # the nsaudit nameserver every broker also registers with (its own stream)
KEPT, DOOMED, SOLO = "ScnKept", "ScnDoomed", "ScnSolo"  # SOLO: on scn-s alone
# A broker creates this system topic at its transaction service's first check (60 s after its start
# by default): a new data version, whose registration would end the wipe before the delete does.
# The scenario's brokers check after 1 s, so the topic is there before anything is collected.
HALF_TOPIC = "RMQ_SYS_TRANS_HALF_TOPIC"
BROKER_SETTINGS = {"transactionCheckInterval": 1000}
INTERVAL_MS = 2000
REGISTER_PERIOD_MS = 10000  # the brokers' registerNameServerPeriod
SEEN_TIMEOUT_S = 60
# what an operator of this fleet sets for its audit: the brokers' registration period, and no clock
# skew (one host); the grace is then 10 s + 10 s scan + 2 s poll = 22 s
AUDIT_CONFIG = f"[audit]\nheartbeat_period_ms = {REGISTER_PERIOD_MS}\nclock_skew_ms = 0\n"
HOLD_S = 26  # each fault's state is held longer than that grace


@dataclass
class Scenario:
    """What a scenario run left: the collected streams, their ids and addresses, and the truth.

    Attributes:
        events: the collector's event directory of the day with faults.
        clean_events: the event directory of the fault-free run before it.
        addrs: stream id -> the server's ``host:port``.
        brokers: broker name -> its address.
        truth: the injected faults, in the simulator's truth shape.
        collector_err: the collector's stderr (its progress and health lines).
    """

    events: Path
    clean_events: Path
    addrs: dict[str, str]
    brokers: dict[str, str]
    truth: list[dict] = field(default_factory=list)
    collector_err: Path | None = None

    def stream(self, ns: str, events: Path | None = None) -> list[dict]:
        problems: list = []
        found = list(read_events(events or self.events, ns, problems))
        assert problems == [], problems
        return found

    def fault(self, kind: str) -> dict:
        return next(f for f in self.truth if f["kind"] == kind)


def _now_ms() -> int:
    return int(time.time() * 1000)


def start_namesrv_on(release: Release, run_dir: Path, name: str, port: int) -> JavaProcess:
    """Start Apache RocketMQ's name server on ``port`` (again, for a restart); not yet ready."""
    conf = run_dir / f"{name}.properties"
    conf.write_text(f"listenPort={port}\n")
    return JavaProcess(
        name,
        _java(release.server_lib, run_dir, "org.apache.rocketmq.namesrv.NamesrvStartup", "-c", str(conf)),
        run_dir / f"{name}.log",
        "boot success",
        run_dir,
    ).start()


# ---------------------------------------------------------------------------- reading the streams


def brokers_seen(log: list[dict]) -> set[str]:
    """The broker names of the server's state after the last event of ``log`` (empty when unknown)."""
    names: set[str] = set()
    for event in log:
        if event["type"] in ("observe_snapshot", "observe_error", "observe_start"):
            names = set()
        elif event["type"] == "observed_broker":
            if event["broker_addrs"] is None:
                names.discard(event["broker_name"])
            else:
                names.add(event["broker_name"])
    return names


def route_seen(log: list[dict], topic: str) -> list[dict] | None | bool:
    """The topic's last observed ``queue_datas`` (None: no route), or False when never observed since
    the last snapshot."""
    found: list[dict] | None | bool = False
    for event in log:
        if event["type"] in ("observe_snapshot", "observe_error", "observe_start"):
            found = False
        elif event["type"] == "observed_route" and event["topic"] == topic:
            found = event["queue_datas"]
    return found


def first_ts(log: list[dict], after_ms: int, test) -> int | None:
    """The ``ts`` of the first event at or after ``after_ms`` after which ``test(prefix)`` holds."""
    for i, event in enumerate(log):
        if event["ts"] >= after_ms and test(log[: i + 1]):
            return event["ts"]
    return None


def perm_of(queue_datas, broker: str) -> int | None:
    if not queue_datas:
        return None
    return next((q["perm"] for q in queue_datas if q["broker_name"] == broker), None)


# ---------------------------------------------------------------------------- the run


def start_collector(addrs: dict[str, str], events: Path, err_path: Path) -> subprocess.Popen:
    """``nsaudit collect`` as a user starts it, the servers named by their stream ids, with the
    configuration the day is audited with (its live judgement uses the same grace)."""
    namesrv_arg = ";".join(f"{ns}={addr}" for ns, addr in addrs.items())
    config = err_path.parent / "nsaudit.toml"
    config.write_text(AUDIT_CONFIG, encoding="utf-8")
    with open(err_path, "w") as err:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "nsaudit.cli",
                "collect",
                "--namesrv",
                namesrv_arg,
                "--events",
                str(events),
                "--interval-ms",
                str(INTERVAL_MS),
                "--config",
                str(config),
            ],
            cwd=REPO,
            env={**os.environ, "PYTHONPATH": str(REPO)},
            stdout=subprocess.DEVNULL,
            stderr=err,
        )


def stop_collector(collector: subprocess.Popen, err_path: Path) -> None:
    collector.send_signal(signal.SIGTERM)
    assert collector.wait(30) == 0, err_path.read_text()[-2000:]


def run_scenario(release: Release, run_dir: Path, clean_closed: Callable[[Path], None] | None = None) -> Scenario:
    """Start the cluster, collect a fault-free run, then a run with the faults; stop everything.
    ``clean_closed`` is called with the fault-free run's event directory once its streams are
    closed, while the faults go on (to audit it meanwhile)."""
    release.check()
    processes: list[JavaProcess] = []
    driver = collector = None
    ports = {ns: free_port() for ns in SERVERS}
    addrs = {ns: f"127.0.0.1:{port}" for ns, port in ports.items()}
    namesrvs = {}
    try:
        for ns in SERVERS:
            namesrvs[ns] = start_namesrv_on(release, run_dir, ns, ports[ns])
            processes.append(namesrvs[ns])
        # the shadow joins an existing cluster: in every namesrvAddr, started once the topics are
        # there (its first registrations bring them; it sees no topic created)
        shadow_port = free_port()
        shadow_addr = f"127.0.0.1:{shadow_port}"
        for proc in namesrvs.values():
            proc.wait_ready()
        every = ";".join([*addrs.values(), shadow_addr])
        brokers = {
            name: start_broker(release, run_dir, name, CLUSTER, every, **BROKER_SETTINGS)
            for name in ("scn-a", "scn-k", "scn-s")
        }
        processes += [b.process for b in brokers.values()]
        driver = Driver(release, run_dir).start()
        for broker in brokers.values():
            broker.process.wait_ready()

        def create_topics() -> None:
            # on every master of the cluster (mqadmin prints a line per broker); a broker that has
            # not registered with nsA yet is not in its cluster info: try again
            def created(topic: str) -> bool:
                out = driver.admin("updateTopic", "-t", topic, "-c", CLUSTER, "-r", 4, "-w", 4, "-n", addrs["nsA"])
                return all(f"create topic to {b.addr} success" in out for b in brokers.values())

            for topic in (KEPT, DOOMED):
                wait_for(lambda topic=topic: created(topic), SEEN_TIMEOUT_S, f"{topic} created on every broker")

        def settled(events: Path, want: dict[str, set[str]]) -> bool:
            logs = {ns: scenario.stream(ns, events) for ns in SERVERS}
            return all(
                brokers_seen(logs[ns]) == want[ns]
                and route_seen(logs[ns], KEPT)
                and route_seen(logs[ns], DOOMED)
                and route_seen(logs[ns], SOLO)
                and all(perm_of(route_seen(logs[ns], HALF_TOPIC), b) for b in want[ns])
                for ns in SERVERS
            )

        def solo_topic(perm: int) -> None:
            driver.admin(
                "updateTopic", "-t", SOLO, "-b", brokers["scn-s"].addr, "-r", 4, "-w", 4, "-p", perm, "-n", addrs["nsA"]
            )

        create_topics()
        solo_topic(6)
        # expiry well past the brokers' period, RocketMQ's scan interval
        shadow, _ = start_nsaudit_nameserver(
            run_dir,
            SHADOW,
            run_dir / "collected",
            expiry_ms=40_000,
            scan_ms=10_000,
            rocketmq_version=release.name,
            port=shadow_port,
        )
        processes.append(shadow)
        scenario = Scenario(run_dir / "collected", run_dir / "clean", addrs, {}, collector_err=run_dir / "collect.err")

        # the fault-free run: every broker on every server, held past the grace
        clean_err = run_dir / "collect-clean.err"
        collector = start_collector(addrs, scenario.clean_events, clean_err)
        everywhere = {ns: {"scn-a", "scn-k", "scn-s"} for ns in SERVERS}
        wait_for(
            lambda: settled(scenario.clean_events, everywhere),
            SEEN_TIMEOUT_S,
            "every server's stream of the fault-free run to show its brokers, both topics and the half topic",
        )
        time.sleep(HOLD_S)
        stop_collector(collector, clean_err)
        if clean_closed is not None:
            clean_closed(scenario.clean_events)

        # the run with faults: scn-b's namesrvAddr lacks nsC from its start
        brokers["scn-b"] = start_broker(
            release, run_dir, "scn-b", CLUSTER, f"{addrs['nsA']};{addrs['nsB']};{shadow_addr}", **BROKER_SETTINGS
        )
        processes.append(brokers["scn-b"].process)
        brokers["scn-b"].process.wait_ready()
        # scn-b carries no topic of the others: one created on it now, a minute before the delete,
        # would be the same topic's change to a shadow that sees it (one incident from its creation)
        scenario.brokers.update({name: b.addr for name, b in brokers.items()})
        collector = start_collector(addrs, scenario.events, scenario.collector_err)
        want = {
            "nsA": {"scn-a", "scn-b", "scn-k", "scn-s"},
            "nsB": {"scn-a", "scn-b", "scn-k", "scn-s"},
            "nsC": {"scn-a", "scn-k", "scn-s"},
        }
        wait_for(
            lambda: settled(scenario.events, want),
            SEEN_TIMEOUT_S,
            "every server's stream to show its brokers, both topics and the half topic",
        )
        scenario.truth.append(
            {
                "kind": "partition",
                "ns": ["nsC"],
                "subject": "scn-b",
                "start_ms": None,
                "end_ms": None,
                "broker_addr": brokers["scn-b"].addr,
            }
        )

        # wipe: scn-a's write permission on nsA only
        # A registration with a new data version (the brokers' own, after the topics were created)
        # restores the perm at once; on a loaded machine that can come before the collector's next
        # round sees the wipe: wipe again until a round has seen it.
        for attempt in range(4):
            start = _now_ms()
            out = driver.admin("wipeWritePerm", "-b", "scn-a", "-n", addrs["nsA"])
            assert "wipe write perm of broker[scn-a] in name server[" in out, out
            try:
                wait_for(
                    lambda: perm_of(route_seen(scenario.stream("nsA"), KEPT), "scn-a") == 4,
                    15,
                    "the wipe in nsA's stream",
                )
                break
            except TimeoutError:
                if attempt == 3:
                    raise
        wipe = {"kind": "wipe", "ns": ["nsA"], "subject": "scn-a", "start_ms": start, "end_ms": None}
        scenario.truth.append(wipe)
        time.sleep(HOLD_S)  # the partition and the wipe, past the grace

        # ns_restart: nsC down, then up again on its port, empty until the brokers register
        start = _now_ms()
        namesrvs["nsC"].stop()
        wait_for(
            lambda: any(e["type"] == "observe_error" and e["ts"] >= start for e in scenario.stream("nsC")),
            SEEN_TIMEOUT_S,
            "nsC's observe_error",
        )
        time.sleep(INTERVAL_MS / 1000 * 2)
        restarted = _now_ms()
        namesrvs["nsC"] = start_namesrv_on(release, run_dir, "nsC-restarted", ports["nsC"])
        processes.append(namesrvs["nsC"])
        namesrvs["nsC"].wait_ready()
        ready = _now_ms()  # a JVM's start takes 5-40 s on a loaded 2-core machine
        wait_for(
            lambda: brokers_seen(scenario.stream("nsC")) == {"scn-a", "scn-k", "scn-s"},
            SEEN_TIMEOUT_S,
            "the brokers back in nsC's stream",
        )
        scenario.truth.append(
            {
                "kind": "ns_restart",
                "ns": ["nsC"],
                "subject": "nsC",
                "start_ms": start,
                "end_ms": restarted,
                "ready_ms": ready,
            }
        )

        # delete_topic: from the brokers and nsB only; the new data version ends the wipe on nsA
        start = _now_ms()
        out = driver.admin("deleteTopic", "-t", DOOMED, "-c", CLUSTER, "-n", addrs["nsB"])
        assert "from NameServer success" in out, out
        wait_for(
            lambda: route_seen(scenario.stream("nsB"), DOOMED) is None,
            SEEN_TIMEOUT_S,
            "the deleted topic's null route in nsB's stream",
        )
        scenario.truth.append(
            {"kind": "delete_topic", "ns": ["nsB"], "subject": DOOMED, "start_ms": start, "end_ms": None}
        )
        wait_for(
            lambda: perm_of(route_seen(scenario.stream("nsA"), KEPT), "scn-a") == 6,
            SEEN_TIMEOUT_S,
            "scn-a's write permission back on nsA after its next registration",
        )
        log = scenario.stream("nsA")
        wiped = first_ts(log, wipe["start_ms"], lambda prefix: perm_of(route_seen(prefix, KEPT), "scn-a") == 4)
        wipe["end_ms"] = first_ts(log, wiped + 1, lambda prefix: perm_of(route_seen(prefix, KEPT), "scn-a") == 6)
        time.sleep(HOLD_S)  # the delete and the partition since nsC's restart, past the grace

        # broker_kill: kill -9, every server drops it when its channel closes
        start = _now_ms()
        brokers["scn-k"].process.kill()
        wait_for(
            lambda: all("scn-k" not in brokers_seen(scenario.stream(ns)) for ns in SERVERS),
            SEEN_TIMEOUT_S,
            "scn-k gone from every server's stream",
        )
        scenario.truth.append(
            {
                "kind": "broker_kill",
                "ns": list(SERVERS),
                "subject": "scn-k",
                "start_ms": start,
                "end_ms": None,
                "broker_addr": brokers["scn-k"].addr,
            }
        )
        time.sleep(INTERVAL_MS / 1000 * 2)

        # read_only: scn-s registers ScnSolo with perm 4, a new data version, on every server
        start = _now_ms()
        solo_topic(4)
        wait_for(
            lambda: all(perm_of(route_seen(scenario.stream(ns), SOLO), "scn-s") == 4 for ns in SERVERS),
            SEEN_TIMEOUT_S,
            "ScnSolo read-only in every server's stream",
        )
        scenario.truth.append(
            {"kind": "read_only", "ns": list(SERVERS), "subject": SOLO, "start_ms": start, "end_ms": None}
        )
        time.sleep(INTERVAL_MS / 1000 * 2)

        # broker_shutdown: scn-s unregisters from every server as it stops; ScnSolo is on none
        start = _now_ms()
        brokers["scn-s"].process.stop()
        exited = _now_ms()  # it unregisters somewhere in its shutdown, which may take seconds
        wait_for(
            lambda: all("scn-s" not in brokers_seen(scenario.stream(ns)) for ns in SERVERS),
            SEEN_TIMEOUT_S,
            "scn-s gone from every server's stream",
        )
        assert any(
            e["type"] == "unregister" and e["broker_addr"] == brokers["scn-s"].addr for e in scenario.stream(SHADOW)
        ), "the shadow logged scn-s's UNREGISTER_BROKER"
        scenario.truth.append(
            {
                "kind": "broker_shutdown",
                "ns": list(SERVERS),
                "subject": "scn-s",
                "start_ms": start,
                "end_ms": None,
                "broker_addr": brokers["scn-s"].addr,
                "exited_ms": exited,
            }
        )
        time.sleep(INTERVAL_MS / 1000 * 2)

        stop_collector(collector, scenario.collector_err)
        assert shadow.stop() == 0  # ns_stop: its stream is closed before the audit reads it
        end = _now_ms()
        for fault in scenario.truth:
            if fault["start_ms"] is None:  # there from the start
                fault["start_ms"] = min(e["ts"] for e in scenario.stream("nsA"))
            if fault["end_ms"] is None:
                fault["end_ms"] = end
        truth_dir = scenario.events / "_truth"
        truth_dir.mkdir(parents=True, exist_ok=True)
        (truth_dir / "faults.jsonl").write_text("".join(json.dumps(f) + "\n" for f in scenario.truth))
        return scenario
    finally:
        if collector is not None and collector.poll() is None:
            collector.kill()
        if driver is not None:
            driver.stop()
        for process in reversed(processes):
            process.stop()
