"""Ground truth of injected faults: ``<events>/_truth/faults.jsonl``, one JSON object per fault."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

TRUTH_DIR = "_truth"
TRUTH_FILE = "faults.jsonl"

Record = dict[str, Any]
_HEAD = ("kind", "ns", "subject", "start_ms", "end_ms")


def new_record(kind: str, subject: str, start_ms: int, **detail: Any) -> Record:
    """A fault record with no effects yet; ``end_ms`` stays null until the fault ends."""
    return {"kind": kind, "ns": [], "subject": subject, "start_ms": start_ms, "end_ms": None, **detail, "expected": {}}


def note_effect(record: Record, ns_id: str, effect: dict[str, Any]) -> None:
    """Add what one server's log must show because of the fault."""
    record["expected"].setdefault(ns_id, []).append(effect)
    if ns_id not in record["ns"]:
        record["ns"].append(ns_id)


def write_truth(events_dir: Path, records: list[Record], ns_order: tuple[str, ...]) -> Path:
    """Write ``<events_dir>/_truth/faults.jsonl`` (replacing an earlier one) and return its path.

    Every record has::

        kind       one of nameserver.layout.FAULTS
        ns         ids of the name servers whose log shows an effect of the fault (server order)
        subject    broker_addr (expire, shutdown, lost_unregister, partition), broker_name
                   (promotion, wipe), topic (read_lt_write, topic_change, delete_topic), cluster
                   (queue_skew) or ns id (ns_restart)
        start_ms   when the fault began (broker died, link cut, request sent, server stopped; the
                   simulation's start for the layout faults read_lt_write and queue_skew)
        end_ms     when it ended (broker restarted, link healed, slave promoted, write perm added
                   back, server started again, read_lt_write topic changed or deleted everywhere;
                   the instant itself for one-shot changes), or null while still open at the end
                   of the simulation (queue_skew always: it describes the cluster as laid out)

    then kind-specific details, and last ``expected``: for each affected server, the list of effects
    its log must show, each ``{"event": <event type>, ...}``:

    * ``expire``: ``broker_addr``, ``last_update_ts`` (the server's last refresh of the address),
      ``window`` = ``[last_update_ts + expiry, last_update_ts + expiry + scan_interval]`` (the
      removal happens strictly after the first bound and at latest on the second) and ``scan_ts``,
      the exact scan tick that must remove it. If the server stopped first, the effect becomes
      ``{"event": "ns_stop", "last_update_ts", "ts"}``: the restart emptied the tables instead.
    * ``unregister`` / ``channel_close`` / ``register`` / ``heartbeat`` / ``wipe_write_perm`` /
      ``add_write_perm`` / ``delete_topic`` / ``ns_stop`` / ``ns_start``: the ``ts`` at which the
      server applied it, plus the keys that identify it (``broker_addr``, ``broker_id``,
      ``data_version``, ``topic_count``, ``cluster``).
    * layout faults: the first ``register`` of the master of every group concerned (the topic's
      groups; every group of the cluster). Their details are
      :func:`nameserver.layout.layout_anomalies`': ``queue_nums`` (``[read, write]`` per group) for
      ``read_lt_write``; ``write_queues`` per group, ``cv``, ``max_over_mean``, the audit's default
      thresholds and the ``scaled_up`` group for ``queue_skew``.

    Nothing under ``<events>/_truth`` is an event log: log readers skip names starting with ``_``.

    Keys come out head first (``kind, ns, subject, start_ms, end_ms``), details, ``expected``
    last; ``ns`` and ``expected`` follow the servers' order.

    Example:
        {"kind":"expire","ns":["ns-a","ns-b"],"subject":"10.0.3.1:10911","start_ms":1795221000000,
         "end_ms":null,"cluster":"cluster-0","broker_name":"broker-003","broker_id":0,
         "expected":{"ns-a":[{"event":"expire","broker_addr":"10.0.3.1:10911",
         "last_update_ts":1795220990004,"window":[1795221110004,1795221120004],"scan_ts":1795221115000}],
         "ns-b":[...]}}
    """
    rank = {ns: i for i, ns in enumerate(ns_order)}
    path = events_dir / TRUTH_DIR / TRUTH_FILE
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "wb") as f:
        for record in records:
            out = {key: record[key] for key in _HEAD}
            out["ns"] = sorted(record["ns"], key=rank.__getitem__)
            out.update((k, v) for k, v in record.items() if k not in _HEAD and k != "expected")
            out["expected"] = {ns: record["expected"][ns] for ns in out["ns"] if ns in record["expected"]}
            f.write(orjson.dumps(out, option=orjson.OPT_APPEND_NEWLINE))
    return path


def read_truth(events_dir: Path) -> list[Record]:
    """The records of ``<events_dir>/_truth/faults.jsonl`` (empty when there is none)."""
    path = Path(events_dir) / TRUTH_DIR / TRUTH_FILE
    if not path.exists():
        return []
    return [orjson.loads(line) for line in path.read_bytes().splitlines() if line]
