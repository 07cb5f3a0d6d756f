"""One real RocketMQ cluster per release, shared by the interop tests of that release.

Each cluster is Apache RocketMQ's own name server and ``nsaudit nameserver`` side by side, two
master brokers (one cluster, ``namesrvAddr`` naming both servers) and one client JVM. The tests of
``test_rocketmq.py`` walk it through a scenario in file order, so they share these processes
instead of starting JVMs per test. When a test fails, the tail of every process's log is attached
to its report and the logs stay under pytest's temporary directory.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.interop.rocketmq import (
    RELEASES,
    Broker,
    Driver,
    JavaProcess,
    Release,
    run_async,
    start_broker,
    start_java_namesrv,
    start_nsaudit_nameserver,
    wait_for,
)

# Short enough for a test to wait for: a broker registers every 10 s at the shortest (RocketMQ
# clamps registerNameServerPeriod to 10-60 s), so an expiry of 15 s never drops a live one.
EXPIRY_MS = 15_000
CLUSTER = "interop"


def ns_id(release: Release) -> str:
    """The id of the release's ``nsaudit nameserver`` in the shared event log."""
    return "ns-nsaudit-" + release.name.replace(".", "")


@dataclass
class Cluster:
    """The processes of one release's cluster, and what the scenario noted on the way."""

    release: Release
    run_dir: Path
    ns_id: str
    java_ns: JavaProcess
    java_addr: str
    ns: JavaProcess
    ns_addr: str
    events: Path
    brokers: dict[str, Broker]
    driver: Driver
    notes: dict = field(default_factory=dict)

    @property
    def both(self) -> str:
        """Both name servers, as ``namesrvAddr`` and ``mqadmin -n`` take them."""
        return f"{self.java_addr};{self.ns_addr}"

    def processes(self) -> list[JavaProcess]:
        return [self.java_ns, self.ns, *(b.process for b in self.brokers.values())]


_clusters: list[Cluster] = []


def _registered(addr: str, names: set[str]) -> bool:
    from nameserver.client import RemotingClient

    async def ask() -> set[str]:
        host, port = addr.rsplit(":", 1)
        client = await RemotingClient.connect(host, int(port))
        try:
            return set((await client.cluster_info())["broker_addr_table"])
        finally:
            await client.close()

    return names <= run_async(ask())


def _start(release: Release, run_dir: Path, events: Path) -> Cluster:
    release.check()
    java_ns, java_addr = start_java_namesrv(release, run_dir)
    # answering as the release's own name server does (docs/interop.md, "Release profiles")
    ns, ns_addr = start_nsaudit_nameserver(
        run_dir, ns_id(release), events, expiry_ms=EXPIRY_MS, rocketmq_version=release.name
    )
    java_ns.wait_ready()
    both = f"{java_addr};{ns_addr}"
    b1, b2 = {}, {}
    if release.name == "5":
        # 5.x's acting-master mode adds a heartbeat every second: QUERY_DATA_VERSION (322) by
        # default, BROKER_HEARTBEAT (904) when told the name servers are new (b2); and
        # GET_BROKER_MEMBER_GROUP (901), which nsaudit refuses (docs/nameserver-semantics.md D6)
        b1 = {"enableSlaveActingMaster": "true"}
        b2 = {"enableSlaveActingMaster": "true", "compatibleWithOldNameSrv": "false"}
    brokers = {
        "b1": start_broker(release, run_dir, "b1", CLUSTER, both, **b1),
        "b2": start_broker(release, run_dir, "b2", CLUSTER, both, **b2),
    }
    driver = Driver(release, run_dir).start()
    for broker in brokers.values():
        broker.process.wait_ready()
    for addr in (java_addr, ns_addr):
        wait_for(lambda addr=addr: _registered(addr, set(brokers)), 30, f"both brokers registered with {addr}")
    return Cluster(release, run_dir, ns_id(release), java_ns, java_addr, ns, ns_addr, events, brokers, driver)


@pytest.fixture(scope="session")
def interop_events(tmp_path_factory) -> Path:
    """The event-log directory every release's ``nsaudit nameserver`` writes to (one id each), so
    one audit covers them all."""
    return tmp_path_factory.mktemp("interop-events")


# What each release's scenario noted for the audit at the end: {ns id: notes}.
NOTES: dict[str, dict] = {}


@pytest.fixture(scope="module", params=sorted(RELEASES))
def cluster(request, tmp_path_factory, interop_events):
    """A running cluster of ``request.param``'s release; stopped after that release's tests."""
    run_dir = tmp_path_factory.mktemp(f"rocketmq-{request.param}")
    running = _start(RELEASES[request.param], run_dir, interop_events)
    running.notes = NOTES.setdefault(running.ns_id, {})
    _clusters.append(running)
    try:
        yield running
    finally:
        _clusters.remove(running)
        running.driver.stop()
        for process in running.processes():
            process.stop()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failure, attach the tail of every running RocketMQ process's log to the report."""
    outcome = yield
    report = outcome.get_result()
    if report.failed and _clusters:
        for running in _clusters:
            for process in running.processes():
                report.sections.append((f"{process.name} log ({process.log})", process.tail(25)))
            report.sections.append(("client JVM log", str(running.driver.log)))
