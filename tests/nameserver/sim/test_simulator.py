"""``nsaudit simulate``: small fleets over a few simulated hours, checked against the logs.

The faulty run is shared by the module (one simulation, many checks). Every check reads what a
user reads: the segments on disk and ``_truth/faults.jsonl``.
"""

from __future__ import annotations

import collections
import datetime as dt
import itertools
import os
import subprocess
import sys
from pathlib import Path

import pytest

from common.timeutil import day_start_ms, parse_time, utc_date
from nameserver.eventlog.writer import list_segments, read_events
from nameserver.layout import LAYOUT_FAULTS, build_layout, layout_anomalies
from nameserver.sim.options import FAULTS, SimOptions, ns_id
from nameserver.sim.run import options_from_args, simulate
from nameserver.sim.truth import read_truth
from nsaudit.cli import build_parser, main
from tests.nameserver.scenario import replay

REPO = Path(__file__).resolve().parents[3]
START = parse_time("2026-11-21T00:00:00Z")
EXPIRY_MS, SCAN_MS = 120_000, 10_000


def _options(events_dir: Path, **overrides) -> SimOptions:
    values = dict(
        events_dir=events_dir,
        ns=3,
        brokers=20,
        slaves=1,
        topics=100,
        start_ms=START,
        hours=6.0,
        seed=1,
        faults=FAULTS,
        fault_rate=10.0,
        quiet=True,
    )
    values.update(overrides)
    return SimOptions(**values)


def _logs(events_dir: Path, ns_ids) -> dict[str, list[dict]]:
    return {ns: list(read_events(events_dir, ns)) for ns in ns_ids}


def _tree_bytes(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _of(events, kind, **keys):
    return [e for e in events if e["type"] == kind and all(e.get(k) == v for k, v in keys.items())]


@pytest.fixture(scope="module")
def faulty(tmp_path_factory):
    """Every fault, at ten times the default rate, on 10 groups for 6 hours."""
    events_dir = tmp_path_factory.mktemp("faulty") / "events"
    result = simulate(_options(events_dir))
    logs = _logs(events_dir, result.events_by_ns)
    return events_dir, result, logs, read_truth(events_dir)


# ----------------------------------------------------------------------------------- layout


def test_layout_is_deterministic_and_shaped_as_documented():
    layout = build_layout(brokers=1000, slaves=1, topics=2000, seed=1)
    assert layout == build_layout(brokers=1000, slaves=1, topics=2000, seed=1)
    assert layout != build_layout(brokers=1000, slaves=1, topics=2000, seed=2)
    assert len(layout.groups) == 500 and layout.broker_count == 1000 and len(layout.clusters) == 4
    members = list(layout.members())
    assert len({m.addr for m in members}) == 1000
    assert [m.broker_id for m in layout.groups[7].members] == [0, 1]
    kinds = collections.Counter(t.kind for t in layout.topics)
    assert set(kinds) == {"regular", "hot", "read_lt_write", "single"} and kinds["regular"] > 1500
    assert all(t.read_queue_nums < t.write_queue_nums for t in layout.topics if t.kind == "read_lt_write")
    assert all(len(t.broker_names) == 1 for t in layout.topics if t.kind == "single")
    assert all(len(t.clusters) == 1 for t in layout.topics if t.kind == "regular")
    assert max(len(t.broker_names) for t in layout.topics if t.kind == "hot") >= 100
    per_group = [sum(t.write_queue_nums for t in g.topics) for g in layout.groups]
    assert max(per_group) > 3 * (sum(per_group) / len(per_group))  # skewed on purpose


def test_layout_last_group_is_short_when_brokers_do_not_divide():
    layout = build_layout(brokers=5, slaves=1, topics=10, seed=3)
    assert [len(g.members) for g in layout.groups] == [2, 2, 1]
    assert build_layout(brokers=0, slaves=1, topics=10, seed=1).topics == ()


def test_ns_ids_continue_past_z():
    assert [ns_id(i) for i in (0, 1, 25, 26, 27)] == ["ns-a", "ns-b", "ns-z", "ns-aa", "ns-ab"]


# ------------------------------------------------------------------------------ determinism


def test_same_arguments_write_the_same_bytes(tmp_path):
    first, second, other = tmp_path / "a", tmp_path / "b", tmp_path / "c"
    simulate(_options(first, hours=3.0))
    simulate(_options(second, hours=3.0))
    simulate(_options(other, hours=3.0, seed=2))
    assert _tree_bytes(first) == _tree_bytes(second)
    assert _tree_bytes(first) != _tree_bytes(other)


def test_same_bytes_in_another_process_with_another_hash_seed(tmp_path):
    args = [
        "simulate",
        "--ns",
        "2",
        "--brokers",
        "8",
        "--topics",
        "30",
        "--hours",
        "2",
        "--seed",
        "5",
        "--start",
        "2026-11-21T00:00:00Z",
        "--fault-rate",
        "20",
        "--quiet",
    ]
    assert main(["simulate", "--events", str(tmp_path / "here"), *args[1:]]) == 0
    env = dict(os.environ, PYTHONHASHSEED="12345")
    subprocess.run(
        [sys.executable, "-m", "nsaudit.cli", "simulate", "--events", str(tmp_path / "there"), *args[1:]],
        cwd=REPO,
        env=env,
        check=True,
        capture_output=True,
    )
    assert _tree_bytes(tmp_path / "here") == _tree_bytes(tmp_path / "there")


# ----------------------------------------------------------------------- logs and replay


def test_logs_replay_to_the_simulators_tables(faulty):
    events_dir, result, logs, _ = faulty
    for server in result.servers:
        events = logs[server.ns_id]
        assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
        assert all(a["ts"] <= b["ts"] for a, b in itertools.pairwise(events))
        replayed = replay(events).routes
        live = server.routes
        assert replayed.topic_queue_table == live.topic_queue_table
        assert replayed.broker_addr_table == live.broker_addr_table
        assert replayed.cluster_addr_table == live.cluster_addr_table
        assert replayed.broker_live_table == live.broker_live_table
        assert replayed.filter_server_table == live.filter_server_table
        assert len(events) == result.events_by_ns[server.ns_id]


def test_every_fault_kind_is_in_the_truth_file(faulty):
    _, result, _, truth = faulty
    kinds = collections.Counter(r["kind"] for r in truth)
    assert set(kinds) == set(FAULTS), kinds
    assert dict(kinds) == {k: n for k, n in result.faults_by_kind.items() if n}
    for record in truth:
        assert list(record)[:5] == ["kind", "ns", "subject", "start_ms", "end_ms"]
        assert record["ns"] == sorted(record["expected"]) and record["ns"], record
        assert record["end_ms"] is None or record["end_ms"] >= record["start_ms"]


def test_every_expected_effect_is_in_that_servers_log(faulty):
    _, _, logs, truth = faulty
    for record in truth:
        for ns, effects in record["expected"].items():
            for effect in effects:
                if effect["event"] == "expire":
                    found = _of(
                        logs[ns],
                        "expire",
                        broker_addr=effect["broker_addr"],
                        ts=effect["scan_ts"],
                        last_update_ts=effect["last_update_ts"],
                    )
                else:
                    keys = {
                        k: effect[k]
                        for k in ("ts", "broker_addr", "broker_id", "topic_count", "cluster")
                        if k in effect
                    }
                    found = _of(logs[ns], effect["event"], **keys)
                assert len(found) == 1, (record["kind"], ns, effect)


def test_silent_death_expires_on_every_server_within_the_window(faulty):
    _, _, logs, truth = faulty
    records = [r for r in truth if r["kind"] == "expire"]
    assert any(len(r["ns"]) == 3 for r in records)  # live on every server when it died
    for record in records:
        for ns in record["ns"]:
            (expire,) = [
                e
                for e in _of(logs[ns], "expire", broker_addr=record["subject"])
                if e["ts"] >= record["start_ms"] and (record["end_ms"] is None or e["ts"] < record["end_ms"])
            ]
            last = expire["last_update_ts"]
            assert last < record["start_ms"] and last + EXPIRY_MS < expire["ts"] <= last + EXPIRY_MS + SCAN_MS
            # the server closes the expired broker's connection: no live entry is left on it
            assert _of(logs[ns], "channel_close", ts=expire["ts"], broker_addr=None)


def test_every_expire_is_explained_by_a_fault(faulty):
    _, _, logs, truth = faulty
    explained = {
        (ns, e["broker_addr"], e["scan_ts"])
        for r in truth
        for ns, effects in r["expected"].items()
        for e in effects
        if e["event"] == "expire"
    }
    for ns, events in logs.items():
        for event in _of(events, "expire"):
            assert (ns, event["broker_addr"], event["ts"]) in explained, event


def _within(event: dict, start_ms: int, end_ms: int | None) -> bool:
    """``start_ms <= ts < end_ms`` (``None``: no end)."""
    return event["ts"] >= start_ms and (end_ms is None or event["ts"] < end_ms)


def test_lost_unregister_leaves_one_server_with_an_expire_instead(faulty):
    _, _, logs, truth = faulty
    records = [r for r in truth if r["kind"] == "lost_unregister"]
    assert records
    for record in records:
        addr, start, end = record["subject"], record["start_ms"], record["end_ms"]
        for ns, events in logs.items():
            unregisters = [e for e in _of(events, "unregister", broker_addr=addr) if _within(e, start, end)]
            expires = [e for e in _of(events, "expire", broker_addr=addr) if _within(e, start, end)]
            if ns == record["lost_on"]:
                assert not unregisters and len(expires) == 1
            elif ns in record["ns"]:
                assert len(unregisters) == 1 and not expires


def test_partition_expires_on_the_cut_server_only_and_reregisters_after(faulty):
    _, _, logs, truth = faulty
    records = [r for r in truth if r["kind"] == "partition"]
    assert records
    for record in records:
        addr, cut = record["subject"], record["cut_from"]
        start, heal = record["start_ms"], record["heal_ms"]
        for ns, events in logs.items():
            expired = [e for e in _of(events, "expire", broker_addr=addr) if _within(e, start, heal + 1)]
            assert len(expired) == (1 if ns == cut and ns in record["ns"] else 0), (ns, record)
        if record["end_ms"] is not None and record["ns"]:
            after = [e for e in _of(logs[cut], "register", broker_addr=addr) if e["ts"] >= record["end_ms"]]
            assert after and after[0]["ts"] < record["end_ms"] + 31_000


def test_promotion_closes_the_old_master_and_the_slave_takes_id_0(faulty):
    _, _, logs, truth = faulty
    records = [r for r in truth if r["kind"] == "promotion"]
    assert records
    assert any(r["promote_ms"] is not None for r in records)
    for record in records:
        if record["promote_ms"] is None:
            continue  # the run ended first
        for ns in record["ns"]:
            (close,) = [
                e
                for e in _of(logs[ns], "channel_close", broker_addr=record["old_master"])
                if e["ts"] >= record["start_ms"] and e["ts"] < record["promote_ms"]
            ]
            (promoted,) = [
                e
                for e in logs[ns]
                if e.get("request_code") == 103
                and e["ts"] >= record["promote_ms"]
                and e["broker_addr"] == record["new_master"]
            ][:1]
            assert promoted["broker_id"] == 0 and promoted["broker_name"] == record["subject"]
            assert close["broker_id"] == 0


def test_topic_change_sends_an_incremental_registration_with_a_new_data_version(faulty):
    _, _, logs, truth = faulty
    records = [r for r in truth if r["kind"] == "topic_change"]
    assert {r["action"] for r in records} == {"create", "queues"}
    for record in records:
        for ns, effects in record["expected"].items():
            for effect in effects:
                (event,) = _of(logs[ns], effect["event"], ts=effect["ts"], broker_addr=effect["broker_addr"])
                assert event["data_version"] == effect["data_version"]
                assert [t["topic"] for t in event["topics"]] == [record["subject"]]
                assert event["topics"][0]["write_queue_nums"] == record["write_queue_nums"]


def test_wipe_and_delete_topic_are_admin_requests(faulty):
    _, _, logs, truth = faulty
    wipes = [r for r in truth if r["kind"] == "wipe"]
    deletes = [r for r in truth if r["kind"] == "delete_topic"]
    assert wipes and deletes
    for record in wipes:
        assert len(record["ns"]) == 1  # one server's copy only
        (ns,) = record["ns"]
        (wipe,) = _of(logs[ns], "wipe_write_perm", broker_name=record["subject"], ts=record["start_ms"])
        assert wipe["request_code"] == 205
        if record["add_ms"] is not None and record["end_ms"] is not None:
            assert _of(logs[ns], "add_write_perm", broker_name=record["subject"], ts=record["end_ms"])
    for record in deletes:
        for ns in record["ns"]:
            (event,) = [
                e for e in _of(logs[ns], "delete_topic", topic=record["subject"]) if e["ts"] > record["start_ms"]
            ]
            assert event["request_code"] == 216 and event["cluster"] == record["cluster"]


def test_ns_restart_stops_starts_and_continues_seq(faulty):
    events_dir, _, logs, truth = faulty
    records = [r for r in truth if r["kind"] == "ns_restart"]
    assert records
    for record in records:
        (ns,) = record["ns"]
        (stop,) = _of(logs[ns], "ns_stop", ts=record["start_ms"])
        if record["end_ms"] is None:
            continue
        (start,) = _of(logs[ns], "ns_start", ts=record["end_ms"])
        assert start["seq"] == stop["seq"] + 1
        # the restart closed the segment and opened a new one named after the ns_start
        names = {seg.path.name for seg in list_segments(events_dir, ns)}
        assert f"events-{start['seq']:020d}.jsonl" in names
        # empty tables: the next registrations are first registrations
        following = [e for e in logs[ns] if e["seq"] > start["seq"] and e.get("request_code") == 103][:5]
        assert following and all(e["type"] == "register" for e in following)


def test_layout_faults_are_in_the_truth_with_their_subjects(faulty):
    _, result, logs, truth = faulty
    records = [r for r in truth if r["kind"] in LAYOUT_FAULTS]
    assert records == truth[: len(records)]  # there from the start: listed first
    expected = [(a.kind, a.subject) for a in layout_anomalies(result.layout)]
    assert [(r["kind"], r["subject"]) for r in records] == expected
    assert {kind for kind, _ in expected} == set(LAYOUT_FAULTS)
    assert {r["subject"] for r in records if r["kind"] == "queue_skew"} == set(result.layout.clusters)
    masters = {g.broker_name: g.master.addr for g in result.layout.groups}
    for record in records:
        assert record["start_ms"] == START and record["ns"] == ["ns-a", "ns-b", "ns-c"], record
        by_group = record["queue_nums"] if record["kind"] == "read_lt_write" else record["write_queues"]
        for ns, effects in record["expected"].items():
            # the first registration of every group concerned shows the misconfiguration
            assert sorted(e["broker_addr"] for e in effects) == sorted(masters[name] for name in by_group)
            for effect in effects:
                (event,) = _of(logs[ns], "register", ts=effect["ts"], broker_addr=effect["broker_addr"])
                topics = {t["topic"]: t for t in event["topics"]}
                if record["kind"] == "read_lt_write":
                    topic = topics[record["subject"]]
                    assert topic["read_queue_nums"] < topic["write_queue_nums"]
                    assert [topic["read_queue_nums"], topic["write_queue_nums"]] == by_group[event["broker_name"]]
                else:
                    assert sum(t["write_queue_nums"] for t in topics.values()) == by_group[event["broker_name"]]
        if record["kind"] == "queue_skew":
            assert record["end_ms"] is None
            assert record["cv"] > record["cv_threshold"] or record["max_over_mean"] > record["max_over_mean_threshold"]


def test_a_read_lt_write_topic_deleted_everywhere_ends_its_fault(tmp_path):
    events_dir = tmp_path / "events"
    result = simulate(
        _options(
            events_dir,
            ns=2,
            brokers=8,
            topics=20,
            hours=2.0,
            seed=3,
            faults=("read_lt_write", "delete_topic"),
            fault_rate=100.0,
        )
    )
    truth = read_truth(events_dir)
    (record,) = [r for r in truth if r["kind"] == "read_lt_write"]
    deletes = [r for r in truth if r["kind"] == "delete_topic" and r["subject"] == record["subject"]]
    assert deletes, "the run deleted no read_lt_write topic: pick another seed"
    # ended by the deletion that took it off the last of its groups, not by an earlier partial one
    last = max(deletes, key=lambda r: r["start_ms"])
    assert record["end_ms"] == last["start_ms"]
    assert set(record["queue_nums"]) <= {name for r in deletes for name in r["broker_names"]}
    assert result.faults_by_kind["read_lt_write"] == 1


# ---------------------------------------------------------------------------- other runs


def test_no_faults_means_no_removals(tmp_path):
    events_dir = tmp_path / "events"
    result = simulate(_options(events_dir, faults=(), hours=3.0))
    assert read_truth(events_dir) == []
    assert result.faults_by_kind == {}
    assert result.layout.faults == () and layout_anomalies(result.layout) == ()
    for events in _logs(events_dir, result.events_by_ns).values():
        kinds = collections.Counter(e["type"] for e in events)
        assert set(kinds) == {"ns_start", "register", "heartbeat"}, kinds
        assert kinds["register"] == 20 and kinds["ns_start"] == 1
        # every broker re-registers every 30 s: 3 h is about 360 registrations each
        assert 20 * 355 < kinds["heartbeat"] < 20 * 361


def test_segments_rotate_at_midnight(tmp_path):
    events_dir = tmp_path / "events"
    simulate(_options(events_dir, start_ms=parse_time("2026-11-21T22:00:00Z"), hours=4.0))
    for ns in ("ns-a", "ns-b", "ns-c"):
        segments = list_segments(events_dir, ns)
        assert {s.date for s in segments} == {"2026-11-21", "2026-11-22"}
        assert all(s.state == "closed" for s in segments)
        for event in read_events(events_dir, ns):
            seg = max((s for s in segments if s.first_seq <= event["seq"]), key=lambda s: s.first_seq)
            assert seg.date == utc_date(event["ts"]).isoformat()


# ------------------------------------------------------------------------------------- CLI


def test_cli_end_to_end(tmp_path, capsys):
    events_dir = tmp_path / "events"
    code = main(
        [
            "simulate",
            "--events",
            str(events_dir),
            "--ns",
            "2",
            "--brokers",
            "6",
            "--slaves",
            "2",
            "--topics",
            "20",
            "--start",
            "2026-11-21T00:00:00Z",
            "--hours",
            "3.5",
            "--faults",
            "expire,wipe",
            "--fault-rate",
            "20",
        ]
    )
    out, err = capsys.readouterr()
    assert code == 0
    assert out.count("\n") == 1 and "ns-a" in out and "ns-b" in out and "expire" in out and "events/s" in out
    assert "simulated hours" in err  # a progress line at 3 h
    assert {r["kind"] for r in read_truth(events_dir)} <= {"expire", "wipe"}
    assert sorted(p.name for p in events_dir.iterdir()) == ["_truth", "ns-a", "ns-b"]


def test_cli_quiet_prints_no_progress(tmp_path, capsys):
    assert (
        main(["simulate", "--events", str(tmp_path), "--brokers", "2", "--topics", "3", "--hours", "4", "--quiet"]) == 0
    )
    assert capsys.readouterr().err == ""


@pytest.mark.parametrize(
    "args, message",
    [
        (["--brokers", "-1"], "--brokers: must be in 0..10000, not -1"),
        (["--ns", "0"], "--ns: must be in 1..100, not 0"),
        (["--topics", "9" * 20], "--topics: must be in 0..100000"),
        (["--hours", "0"], "--hours must be a positive number"),
        (["--faults", "expire,meteor"], "unknown fault 'meteor'"),
        (["--start", "yesterday"], "--start: not a time"),
        (["--fault-rate", "-2"], "--fault-rate must be >= 0"),
    ],
)
def test_cli_rejects_bad_arguments_with_one_line(tmp_path, capsys, args, message):
    assert main(["simulate", "--events", str(tmp_path / "e"), "--quiet", *args]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("nsaudit simulate: error: ") and message in err
    assert not (tmp_path / "e").exists()


def test_cli_refuses_a_directory_with_logs_of_these_servers(tmp_path, capsys):
    args = [
        "simulate",
        "--events",
        str(tmp_path),
        "--ns",
        "1",
        "--brokers",
        "2",
        "--topics",
        "3",
        "--hours",
        "0.1",
        "--quiet",
    ]
    assert main(args) == 0
    capsys.readouterr()
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "already has logs for ns-a" in err
    # an empty folder of the same name holds no logs
    (tmp_path / "other" / "ns-a").mkdir(parents=True)
    assert main(["simulate", "--events", str(tmp_path / "other"), *args[3:]]) == 0


def test_start_defaults_to_the_current_utc_day():
    args = build_parser().parse_args(["simulate", "--events", "x"])
    assert options_from_args(args).start_ms == day_start_ms(dt.datetime.now(dt.UTC).date())
