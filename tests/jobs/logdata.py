"""Event logs for ingest tests and the ingest benchmark: real writer output, plus damage.

Good logs come from ``nameserver.eventlog.writer.EventLogWriter`` so the tests read what a name server
writes; bad lines are appended as raw bytes afterwards, the way a crash or a foreign writer
would leave them.

Example:
    >>> paths = write_log(tmp_path, "ns-a", [ns_start(T0), register(T0 + 1000, BROKER_A)])
    >>> append_lines(paths[-1], b"not json")            # line 3 is garbage
    >>> append_lines(paths[-1], b'{"v":1', newline=False)  # line 4 is cut short
"""

from __future__ import annotations

import datetime as dt
import gzip
import os
import shutil
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from common.config import EventLogConfig
from common.timeutil import day_start_ms
from nameserver.codec import RequestCode
from nameserver.eventlog.writer import EventLogWriter
from nameserver.layout import BrokerGroup, BrokerMember, build_layout
from nameserver.model import PERM_READ, DataVersion, TopicConfig, topics_digest

DAY = dt.date(2026, 11, 21)
T0 = day_start_ms(DAY)  # 1795219200000, the example day of docs/interfaces.md

REGISTER_BROKER = int(RequestCode.REGISTER_BROKER)
QUERY_DATA_VERSION = int(RequestCode.QUERY_DATA_VERSION)
BROKER_HEARTBEAT = int(RequestCode.BROKER_HEARTBEAT)


@dataclass(frozen=True)
class Broker:
    """What a test needs of one broker process to write its events."""

    cluster: str
    broker_name: str
    broker_id: int
    broker_addr: str
    ha_addr: str
    topics: tuple[TopicConfig, ...]
    data_version: DataVersion = DataVersion(1795219100000, 3)

    @property
    def digest(self) -> str:
        """``topics_digest`` of its topic list."""
        return topics_digest(self.topics)


BROKER_A = Broker(
    "DefaultCluster", "broker-a", 0, "10.0.0.5:10911", "10.0.0.5:10912", (TopicConfig("TopicTest", 8, 8),)
)
BROKER_B = Broker(
    "DefaultCluster",
    "broker-b",
    0,
    "10.0.0.6:10911",
    "10.0.0.6:10912",
    (TopicConfig("TopicOther", 2, 2, perm=PERM_READ), TopicConfig("TopicTest", 4, 8)),  # sorted, as brokers send them
)


# ------------------------------------------------------------------------------------ events


def ns_start(ts: int, expiry_ms: int = 120_000, scan_ms: int = 10_000) -> dict[str, Any]:
    """An ``ns_start`` event (writer stamps ``v``, ``ns``, ``seq``)."""
    return {
        "ts": ts,
        "type": "ns_start",
        "broker_expiry_ms": expiry_ms,
        "scan_interval_ms": scan_ms,
        "semantics": "rocketmq-4.9",
        "version": "0.1.0",
    }


def ns_stop(ts: int, reason: str = "SIGTERM") -> dict[str, Any]:
    """An ``ns_stop`` event."""
    return {"ts": ts, "type": "ns_stop", "reason": reason}


def register(ts: int, broker: Broker, kind: str = "register", channel: str = "c1") -> dict[str, Any]:
    """A REGISTER_BROKER (103) event; ``kind="heartbeat"`` for a re-registration of a live address.

    ``topics`` is always passed; the writer drops it where the segment already has that digest.
    """
    return {
        "ts": ts,
        "type": kind,
        "request_code": REGISTER_BROKER,
        "channel": channel,
        "remote": broker.broker_addr.replace(":10911", ":50112"),
        "cluster": broker.cluster,
        "broker_name": broker.broker_name,
        "broker_id": broker.broker_id,
        "broker_addr": broker.broker_addr,
        "ha_addr": broker.ha_addr,
        "data_version": broker.data_version,
        "topics_digest": broker.digest,
        "topics": broker.topics,
        "filter_servers": [],
        "request_version": 401,
    }


def heartbeat_904(ts: int, broker: Broker, channel: str = "c1") -> dict[str, Any]:
    """A BROKER_HEARTBEAT (904) event: broker keys only, ``broker_id`` and ``ha_addr`` null."""
    return {
        "ts": ts,
        "type": "heartbeat",
        "request_code": BROKER_HEARTBEAT,
        "channel": channel,
        "remote": broker.broker_addr.replace(":10911", ":50112"),
        "cluster": broker.cluster,
        "broker_name": broker.broker_name,
        "broker_id": None,
        "broker_addr": broker.broker_addr,
        "ha_addr": None,
    }


def expire(ts: int, broker: Broker, last_update_ts: int) -> dict[str, Any]:
    """An ``expire`` event from the expiry scan."""
    return {
        "ts": ts,
        "type": "expire",
        "broker_addr": broker.broker_addr,
        "last_update_ts": last_update_ts,
        "cluster": broker.cluster,
        "broker_name": broker.broker_name,
        "broker_id": broker.broker_id,
    }


# ------------------------------------------------------------------------------------- files


def write_log(
    events_dir: str | os.PathLike,
    ns: str,
    events: Iterable[dict[str, Any]],
    *,
    segment_max_bytes: int = 64 * 1024 * 1024,
    close: bool = True,
) -> list[Path]:
    """Write events with the real writer and return the segment files it left, in seq order.

    Args:
        close: False leaves the last segment ``.open``, as a running or crashed server does.
    """
    writer = EventLogWriter(events_dir, ns, EventLogConfig(durability="none", segment_max_bytes=segment_max_bytes))
    writer.open()
    for event in events:
        writer.append(event)
    if close:
        writer.close("test")
    else:
        writer.sync()  # hand the buffered lines to the OS, keep the segment open
    return sorted((Path(events_dir) / ns).glob("*/events-*"))


def append_lines(path: str | os.PathLike, *raws: bytes, newline: bool = True) -> None:
    """Append raw lines to a plain segment; ``newline=False`` leaves the last one cut short."""
    with open(path, "ab") as f:
        f.write(b"\n".join(raws) + (b"\n" if newline else b""))


def drop_lines(path: str | os.PathLike, *numbers: int) -> None:
    """Remove lines (1-based) from a plain segment, as lost telemetry would leave a seq gap."""
    path = Path(path)
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(line for n, line in enumerate(lines, 1) if n not in numbers))


def line_of(path: str | os.PathLike, number: int) -> bytes:
    """One line (1-based) of a plain segment, without its newline."""
    return Path(path).read_bytes().splitlines()[number - 1]


def gzip_copy(path: str | os.PathLike, name: str | None = None) -> Path:
    """Write a gzip copy of a plain segment beside it (``<name>.gz`` by default)."""
    path = Path(path)
    target = path.with_name(name or path.name + ".gz")
    with open(path, "rb") as src, gzip.open(target, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return target


def copy_as(path: str | os.PathLike, name: str) -> Path:
    """Copy a segment under another name in the same folder."""
    path = Path(path)
    target = path.with_name(name)
    shutil.copyfile(path, target)
    return target


def relative(events_dir: str | os.PathLike, path: str | os.PathLike) -> str:
    """A segment path as the lake names it: ``<ns>/<date>/<name>`` relative to the events dir."""
    return Path(path).relative_to(events_dir).as_posix()


# --------------------------------------------------------------------------- benchmark fleet


def fleet_events(
    start_ms: int, lines: int, brokers: int = 1000, topics: int = 2000, period_ms: int = 30_000, seed: int = 1
) -> Iterator[dict[str, Any]]:
    """A heartbeat-heavy stream: ``ns_start``, one register per broker, then 103 heartbeats.

    Every broker re-registers once per ``period_ms`` (RocketMQ's default 30 s), spread evenly
    over the period, which is what dominates a production name server's log.

    Args:
        lines: events to yield in total.
    """
    layout = build_layout(brokers=brokers, slaves=1, topics=topics, seed=seed)
    fleet = [_broker(group, member) for group in layout.groups for member in group.members]
    yield ns_start(start_ms)
    step = max(1, period_ms // max(1, len(fleet)))
    ts = start_ms
    for n in range(lines - 1):
        ts += step
        broker = fleet[n % len(fleet)]
        yield register(ts, broker, "register" if n < len(fleet) else "heartbeat", channel=f"c{n % len(fleet)}")


def _broker(group: BrokerGroup, member: BrokerMember) -> Broker:
    return Broker(member.cluster, member.broker_name, member.broker_id, member.addr, member.ha_addr, group.topics)


def write_fleet_log(
    events_dir: str | os.PathLike, ns_ids: Sequence[str], lines_per_ns: int, start_ms: int = T0, **fleet: Any
) -> list[Path]:
    """Write the :func:`fleet_events` log of each name server; returns every segment file."""
    paths: list[Path] = []
    for ns in ns_ids:
        paths += write_log(events_dir, ns, fleet_events(start_ms, lines_per_ns, **fleet))
    return paths
