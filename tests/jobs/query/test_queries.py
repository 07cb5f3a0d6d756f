"""``nsaudit route``/``cluster``/``diff`` as a user runs them: exact output lines and exit codes.

The lake is rebuilt once from a small hand-made log of two servers over two days (the route table
makes the events, so they are what a server logs), and both days are recorded audited. Copied into
a bucket of the session's S3 server, it answers ``diff`` and ``lake history|vacuum`` as ``s3a://``.
"""

from __future__ import annotations

import datetime as dt

import orjson
import pytest

from common.errors import UserError
from common.timeutil import DAY_MS, day_start_ms, iso
from jobs.lake import audit_runs
from jobs.query.lookup import RouteLake, route_answer
from nameserver.model import DataVersion, TopicConfig
from nameserver.routes.manager import RequestContext, RouteInfoManager, ns_start_event, ns_stop_event
from nsaudit.cli import main
from tests.jobs.eventgen import rebuild_from_lines, stamp

DAY1 = dt.date(2026, 11, 21)
DAY2 = DAY1 + dt.timedelta(days=1)
T0 = day_start_ms(DAY1)
T1 = day_start_ms(DAY2)
M, S, N = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"
A = TopicConfig("TopicA", 8, 8)
B = TopicConfig("TopicB", 4, 4)
dv1 = DataVersion(100, 1)


def _server_a() -> list[dict]:
    routes, out = RouteInfoManager(), []
    ctx = RequestContext("c1", "10.0.0.1:50000", 103)
    out.append(ns_start_event(T0 + 1000, 120_000, 10_000, "0.1.0"))
    out += routes.register_broker(
        "C1", M, "broker-a", 0, "10.0.0.1:10912", dv1, [A], ["10.0.1.1:40001"], T0 + 2000, ctx
    ).events
    out += routes.register_broker(
        "C1", S, "broker-a", 1, "10.0.0.2:10912", dv1, [A], [], T0 + 3000, RequestContext("c2", "10.0.0.2:50000", 103)
    ).events
    out += routes.wipe_write_perm_of_broker("broker-a", T0 + 5000, RequestContext("a", "x:1", 205))[1]
    out.append(ns_stop_event(T0 + 10_000, "SIGTERM"))
    routes.clear()
    out.append(ns_start_event(T0 + 20_000, 120_000, 10_000, "0.1.0"))
    out += routes.register_broker("C1", M, "broker-a", 0, "10.0.0.1:10912", dv1, [A], [], T0 + 30_000, ctx).events
    out += routes.register_broker("C1", M, "broker-a", 0, "10.0.0.1:10912", dv1, [A], [], T1 + 1000, ctx).events
    return out


def _server_b() -> list[dict]:
    routes = RouteInfoManager()
    out = [ns_start_event(T0 + 500, 120_000, 10_000, "0.1.0")]
    out += routes.register_broker(
        "C2", N, "broker-b", 0, None, dv1, [A, B], None, T0 + 4000, RequestContext("c7", "10.0.0.3:50000", 103)
    ).events
    return out  # nothing on day 2: its tables carry on


@pytest.fixture(scope="module")
def lake_dir(spark, tmp_path_factory):
    lake = tmp_path_factory.mktemp("queries") / "lake"
    rebuild_from_lines(spark, stamp({"ns-a": _server_a(), "ns-b": _server_b()}), lake, [DAY1, DAY2])
    for day in (DAY1, DAY2):
        audit_runs.record(spark, str(lake), day, "ok", [], {})
    return str(lake)


def run(capsys, *argv):
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_route_prints_one_line_in_the_standard_json_form(lake_dir, capsys):
    code, out, err = run(
        capsys, "route", "--lake", lake_dir, "--ns", "ns-a", "--topic", "TopicA", "--at", iso(T0 + 3000)
    )
    assert (code, err) == (0, "")
    assert out == (
        '{"ns":"ns-a","topic":"TopicA","at":' + str(T0 + 3000) + ',"route":{"brokerDatas":[{"brokerAddrs":'
        '{"0":"10.0.0.1:10911","1":"10.0.0.2:10911"},"brokerName":"broker-a","cluster":"C1"}],'
        '"filterServerTable":{"10.0.0.1:10911":["10.0.1.1:40001"]},"queueDatas":[{"brokerName":"broker-a",'
        '"perm":6,"readQueueNums":8,"topicSysFlag":0,"writeQueueNums":8}]},"up":true,"audited":true}\n'
    )


def test_state_at_t_includes_the_events_at_t_and_not_after(lake_dir, capsys):
    def perm(at):
        return orjson.loads(
            run(capsys, "route", "--lake", lake_dir, "--ns", "ns-a", "--topic", "TopicA", "--at", str(at))[1]
        )["route"]["queueDatas"][0]["perm"]

    assert (perm(T0 + 4999), perm(T0 + 5000)) == (6, 4)  # the wipe at T0 + 5000


def test_cluster_prints_the_cluster_info(lake_dir, capsys):
    code, out, _ = run(capsys, "cluster", "--lake", lake_dir, "--ns", "ns-b", "--at", iso(T0 + 4000))
    assert code == 0
    assert out == (
        '{"ns":"ns-b","at":' + str(T0 + 4000) + ',"cluster_info":{"brokerAddrTable":'
        '{"broker-b":{"brokerAddrs":{"0":"10.0.0.3:10911"},'
        '"brokerName":"broker-b","cluster":"C2"}},"clusterAddrTable":{"C2":["broker-b"]}},"up":true,"audited":true}\n'
    )


@pytest.mark.parametrize(
    "ns, topic, at, route, up",
    [
        ("ns-a", "TopicZ", T0 + 3000, None, True),  # unknown topic
        ("ns-a", "TopicA", T0 + 10_000, None, False),  # at the ns_stop
        ("ns-a", "TopicA", T0 + 19_999, None, False),  # still stopped
        ("ns-a", "TopicA", T0 + 20_000, None, True),  # restarted, empty until the next registration
    ],
)
def test_well_formed_questions_without_a_route_exit_zero(lake_dir, capsys, ns, topic, at, route, up):
    code, out, err = run(capsys, "route", "--lake", lake_dir, "--ns", ns, "--topic", topic, "--at", str(at))
    assert (code, err) == (0, "")
    assert orjson.loads(out) == {"ns": ns, "topic": topic, "at": at, "route": route, "up": up, "audited": True}


def test_a_stopped_server_has_empty_cluster_info(lake_dir, capsys):
    out = run(capsys, "cluster", "--lake", lake_dir, "--ns", "ns-a", "--at", str(T0 + 15_000))[1]
    assert orjson.loads(out)["cluster_info"] == {"brokerAddrTable": {}, "clusterAddrTable": {}}
    assert orjson.loads(out)["up"] is False


def test_a_server_without_events_today_keeps_yesterdays_tables(lake_dir):
    answer = route_answer(RouteLake(lake_dir), "ns-b", "TopicB", T1 + 5 * 3_600_000)
    assert answer["route"]["queueDatas"] == [
        {"brokerName": "broker-b", "perm": 6, "readQueueNums": 4, "topicSysFlag": 0, "writeQueueNums": 4}
    ]


@pytest.mark.parametrize(
    "at, day",
    [
        (T0 - 1, "2026-11-20"),  # before the first audited day
        (T1 + 40 * DAY_MS, "2027-01-01"),  # long after the last
    ],
)
def test_an_instant_no_audited_day_covers_is_not_answered_as_a_live_server(lake_dir, capsys, at, day):
    for command, extra, empty in (("route", ["--topic", "TopicA"], "route"), ("cluster", [], "cluster_info")):
        code, out, err = run(capsys, command, "--lake", lake_dir, "--ns", "ns-a", *extra, "--at", str(at))
        assert (code, err) == (0, "")
        answer = orjson.loads(out)
        assert (answer[empty], answer["up"], answer["audited"]) == (None, None, False)
        assert answer["reason"] == f"{day} has not been audited (audited days: 2026-11-21 to 2026-11-22)"


def test_a_diff_reaching_past_the_audited_days_has_no_tables(lake_dir, capsys):
    code, out, _ = run(
        capsys, "diff", "--lake", lake_dir, "--ns", "ns-a", "--from", str(T0 + 5000), "--to", "2030-01-01T00:00:00Z"
    )
    answer = orjson.loads(out)
    assert code == 0
    assert (answer["up"], answer["tables"], answer["audited"]) == ({"from": True, "to": None}, None, False)
    assert answer["reason"].startswith("2030-01-01 has not been audited")


@pytest.mark.parametrize(
    "command, extra",
    [
        ("route", ["--topic", "TopicA", "--at", str(T0 + 3000)]),
        ("cluster", ["--at", str(T0 + 3000)]),
        ("diff", ["--from", str(T0), "--to", str(T0 + 3000)]),
    ],
)
def test_a_server_the_lake_never_saw_is_a_bad_argument(lake_dir, capsys, command, extra):
    code, out, err = run(capsys, command, "--lake", lake_dir, "--ns", "ns-zz", *extra)
    assert (code, out) == (2, "")
    assert err == f"nsaudit {command}: error: --ns 'ns-zz': no such name server in {lake_dir}; known: ns-a, ns-b\n"


def test_diff_lists_what_changed_per_table(lake_dir, capsys):
    code, out, _ = run(
        capsys, "diff", "--lake", lake_dir, "--ns", "ns-a", "--from", str(T0 + 2500), "--to", str(T0 + 5000)
    )
    assert code == 0
    answer = orjson.loads(out)
    assert (answer["ns"], answer["from"], answer["to"], answer["up"], answer["audited"]) == (
        "ns-a",
        T0 + 2500,
        T0 + 5000,
        {"from": True, "to": True},
        True,
    )
    tables = answer["tables"]
    assert tables["topicQueueTable"] == {
        "added": [],
        "removed": [],
        "changed": [
            {
                "brokerName": "broker-a",
                "topic": "TopicA",
                "before": {"perm": 6, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 8},
                "after": {"perm": 4, "readQueueNums": 8, "topicSysFlag": 0, "writeQueueNums": 8},
            }
        ],
    }
    assert tables["brokerAddrTable"]["added"] == [
        {"brokerId": 1, "brokerName": "broker-a", "after": {"brokerAddr": S, "cluster": "C1"}}
    ]
    assert tables["clusterAddrTable"] == {"added": [], "changed": [], "removed": []}


def test_diff_across_a_restart_and_midnight(lake_dir, capsys):
    answer = orjson.loads(
        run(capsys, "diff", "--lake", lake_dir, "--ns", "ns-a", "--from", str(T0 + 5000), "--to", iso(T1 + 2000))[1]
    )
    assert answer["up"] == {"from": True, "to": True}
    assert [e["brokerId"] for e in answer["tables"]["brokerAddrTable"]["removed"]] == [1]  # S never came back
    assert answer["tables"]["filterServerTable"]["removed"] == [
        {"brokerAddr": M, "before": {"filterServers": ["10.0.1.1:40001"]}}
    ]


@pytest.mark.parametrize(
    "argv, message",
    [
        (["route", "--ns", "ns-a", "--topic", "TopicA", "--at", "yesterday"], "not a time"),
        (["route", "--ns", "ns-a", "--topic", "TopicA", "--at", "2026-11-21T03:00:00"], "no zone"),
        (["diff", "--ns", "ns-a", "--from", str(T0 + 2), "--to", str(T0 + 1)], "is after --to"),
    ],
)
def test_bad_arguments_exit_nonzero_with_one_line(lake_dir, capsys, argv, message):
    code, out, err = run(capsys, argv[0], "--lake", lake_dir, *argv[1:])
    assert code != 0 and out == ""
    assert message in err and err.count("\n") == 1


def test_a_missing_lake_is_a_user_error(tmp_path, capsys):
    code, out, err = run(capsys, "cluster", "--lake", str(tmp_path / "nowhere"), "--ns", "ns-a", "--at", "0")
    assert code != 0 and out == ""
    assert "no rebuilt route tables" in err and err.count("\n") == 1


def test_a_lake_written_before_the_observed_columns_reads_them_as_null(tmp_path):
    """``ns_state`` of a lake no audit of this version has touched lacks ``observed`` and
    ``resolution_ms``: a query reads them as null (an own server) instead of failing."""
    import pyarrow as pa
    from deltalake import write_deltalake

    from jobs.query.reads import read_day

    day = dt.date(2026, 11, 26)
    older = pa.table(
        {"date": pa.array([day, day]), "ns": ["ns-a", "ns-b"], "up": [True, False], "up_at_start": [True, True]}
    )
    write_deltalake(str(tmp_path / "ns_state"), older, partition_by=["date"])
    table = read_day(str(tmp_path / "ns_state"), ["up", "up_at_start", "observed", "resolution_ms"], day, "ns-b")
    assert table.to_pylist() == [{"up": False, "up_at_start": True, "observed": None, "resolution_ms": None}]
    with pytest.raises(UserError, match="cannot read"):  # a column no version ever had is still an error
        read_day(str(tmp_path / "ns_state"), ["up", "no_such_column"], day, "ns-b")


def test_diff_and_lake_history_and_vacuum_work_on_a_lake_in_a_bucket(lake_dir, spark, s3_server, tmp_path, capsys):
    """The same lake copied into a bucket (``s3a://``, ``[storage]`` from ``--config``): ``diff``
    answers as from the folder, ``lake history`` lists the same commits, and ``lake vacuum`` deletes
    the replaced files there and nothing the latest version reads."""
    from pathlib import Path

    from jobs.lake.tables import read_table_arrow
    from jobs.storage import files
    from tests.jobs.buckets import config_file, on_s3, upload

    def commits(out: str) -> list[tuple]:
        # the same commits (a CREATE TABLE's parameters name the table's location, which differs)
        return [(c["version"], c["operation"], c["timestamp"]) for c in map(orjson.loads, out.splitlines())]

    config = str(config_file(s3_server, tmp_path / "nsaudit.toml"))
    diff = ("diff", "--ns", "ns-a", "--from", str(T0 + 5000), "--to", iso(T1 + 2000))
    history = ("lake", "history", "audit_runs")
    local_diff, local_history = run(capsys, *diff, "--lake", lake_dir), run(capsys, *history, "--lake", lake_dir)
    assert local_diff[0] == 0 and orjson.loads(local_diff[1])["tables"]["brokerAddrTable"]["removed"]
    with on_s3(s3_server, spark):
        lake = upload(s3_server, Path(lake_dir), "queries/lake")
        assert run(capsys, *diff, "--lake", lake, "--config", config) == local_diff
        code, out, err = run(capsys, *history, "--lake", lake, "--config", config)
        assert (code, err) == (0, "") and commits(out) == commits(local_history[1])

        audit_runs.record(spark, lake, DAY1, "ok", [], {})  # the day's row replaced: one file no longer read
        code, out, err = run(capsys, *history, "--lake", lake, "--config", config)
        assert (code, err) == (0, "") and commits(out)[1:] == commits(local_history[1])
        assert commits(out)[0][:2] == (len(commits(out)) - 1, "WRITE")

        def parquet_objects() -> int:
            return sum(1 for name, _ in files.list_files(f"{lake}/audit_runs") if name.endswith(".parquet"))

        before = parquet_objects()
        vacuum = ("lake", "vacuum", "--lake", lake, "--config", config, "--retain-hours", "0", "--force")
        code, out, err = run(capsys, *vacuum)
        assert (code, err) == (0, ""), err
        line = next(line for line in out.splitlines() if line.startswith("audit_runs "))
        # the replaced data file is gone (the count also has the folder-marker objects the upload
        # made, which no version reads either)
        assert (before, parquet_objects()) == (3, 2) and ", deleted " in line, line
        assert sorted(read_table_arrow(f"{lake}/audit_runs")["date"].to_pylist()) == [DAY1, DAY2]
        assert run(capsys, *diff, "--lake", lake, "--config", config) == local_diff
