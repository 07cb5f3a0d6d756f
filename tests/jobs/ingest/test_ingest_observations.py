"""Observation streams (``nsaudit collect``) in the nightly audit's first stages: ingest accepts every
line with its nested values intact (the optional ``live_incident`` events too), the rebuild makes
the observed server's tables from them and changes no other server's, and the liveness stage does
not count them as heartbeats."""

from __future__ import annotations

from pyspark.sql import functions as F

from common.config import Config
from jobs import lake
from jobs.analytics.liveness.stage import run_liveness
from jobs.ingest.stage import run_ingest
from jobs.lake.tables import read_table
from jobs.rebuild.stage import run_rebuild
from nameserver.collect.live.judge import LiveJudge
from nameserver.collect.record import ObservedServer
from nameserver.collect.view import ServerView, broker_entry, route_entry
from schemas.events import EVENTS_TABLE_SCHEMA
from schemas.liveness import BROKER_AVAILABILITY_SCHEMA
from schemas.routes import NS_RUNS_SCHEMA, NS_STATE_SCHEMA, TOPIC_ROUTE_HISTORY_SCHEMA
from tests.jobs.logdata import BROKER_A, DAY, T0, ns_start, ns_stop, register, write_log

OBSERVED = "obs-10.0.0.2-9876"


def observation_log() -> list[dict]:
    """A collector run over one server: start, snapshot, a perm without write, a broker gone, an
    outage, a recovered snapshot and a stop, with the live incidents it judged; every observation
    type and key."""
    server = ObservedServer("10.0.0.2:9876", 10_000)
    judge = LiveJudge(grace_ms=0)

    def live(events: list) -> list[dict]:
        return [event for _, event in events]

    a = {"cluster": "DefaultCluster", "broker_name": "broker-a", "broker_addrs": {0: BROKER_A.broker_addr}}
    b = {
        "cluster": "DefaultCluster",
        "broker_name": "broker-b",
        "broker_addrs": {0: "10.0.0.6:10911", 1: "10.0.0.7:10911"},
    }

    def route(perm: int) -> dict:
        return route_entry(
            {
                "broker_datas": [a],
                "filter_server_table": {BROKER_A.broker_addr: ["10.0.0.5:30000"]},
                "queue_datas": [
                    {
                        "broker_name": "broker-a",
                        "read_queue_nums": 8,
                        "write_queue_nums": 8,
                        "perm": perm,
                        "topic_sys_flag": 0,
                    }
                ],
            }
        )

    full = ServerView(
        {"broker-a": broker_entry(a), "broker-b": broker_entry(b)}, {"TopicTest": route(6), "Unrouted": None}
    )
    wiped = ServerView({"broker-a": broker_entry(a)}, {"TopicTest": route(4), "Unrouted": None})
    return (
        server.start(T0 + 1000)
        + server.observed(full, T0 + 1100, 1)
        + live(judge.observed(OBSERVED, T0 + 1100, full))
        + server.observed(wiped, T0 + 11_100, 2)
        + live(judge.observed(OBSERVED, T0 + 11_100, wiped))
        + server.failed(T0 + 21_100, 3, "timeout", "no answer to GET_BROKER_CLUSTER_INFO within 5 s")
        + live(judge.failed(OBSERVED, T0 + 21_100))
        + server.observed(wiped, T0 + 31_100, 4)
        + live(judge.observed(OBSERVED, T0 + 31_100, wiped))
        + server.stop(T0 + 40_000, "SIGTERM")
    )


def test_observation_streams_are_ingested_whole_rebuilt_as_observed_servers_and_left_out_of_liveness(spark, tmp_path):
    events, lake_dir = tmp_path / "events", tmp_path / "lake"
    write_log(events, "ns-a", [ns_start(T0), register(T0 + 500, BROKER_A), ns_stop(T0 + 50_000)])
    observations = observation_log()
    write_log(events, OBSERVED, observations)

    result = run_ingest(spark, events, lake_dir, DAY)
    assert (result.quarantined, result.accepted, result.events_written) == (
        0,
        3 + len(observations),
        3 + len(observations),
    )

    events_df = read_table(spark, lake.table_path(lake_dir, lake.EVENTS), EVENTS_TABLE_SCHEMA, where={"date": DAY})
    observed = {r["seq"]: r for r in events_df.where(F.col("ns") == OBSERVED).collect()}
    assert [observed[s]["type"] for s in sorted(observed)] == [e["type"] for e in observations]
    incidents = [r for r in observed.values() if r["type"] == "live_incident"]
    # (the perm without write on the only server observed is no wipe: no other server denies that
    # the broker registered it, and the outage came before its round was over)
    assert {(r["root_cause"], r["subject"], r["incident_state"]) for r in incidents} >= {
        ("master_lost", "broker-b", "open")
    }
    assert all(r["servers"] == [OBSERVED] for r in incidents)
    wipe = next(r for r in observed.values() if r["type"] == "observed_route" and r["round"] == 2)
    assert (wipe["topic"], wipe["queue_datas"][0]["perm"]) == ("TopicTest", 4)
    assert wipe["filter_server_table"][0]["filter_servers"] == ["10.0.0.5:30000"]
    gone = next(r for r in observed.values() if r["type"] == "observed_broker" and r["round"] == 2)
    assert (gone["broker_name"], gone["broker_addrs"], gone["cluster"]) == ("broker-b", None, None)
    snapshot = next(r for r in observed.values() if r["type"] == "observed_broker" and r["broker_name"] == "broker-b")
    assert [(x["broker_id"], x["broker_addr"]) for x in snapshot["broker_addrs"]] == [
        (0, "10.0.0.6:10911"),
        (1, "10.0.0.7:10911"),
    ]
    unrouted = next(r for r in observed.values() if r["type"] == "observed_route" and r["topic"] == "Unrouted")
    assert unrouted["queue_datas"] is None and unrouted["broker_datas"] is None

    run_rebuild(spark, str(lake_dir), DAY, Config())
    routes_df = read_table(
        spark, lake.table_path(lake_dir, lake.TOPIC_ROUTE_HISTORY), TOPIC_ROUTE_HISTORY_SCHEMA, where={"date": DAY}
    )
    rows = {(r["ns"], r["topic"], r["broker_name"], r["perm"]) for r in routes_df.collect()}
    # the observed server's tables are a step function of its observations (tests/jobs/rebuild/test_observed.py)
    assert rows == {
        ("ns-a", "TopicTest", "broker-a", 6),
        (OBSERVED, "TopicTest", "broker-a", 6),
        (OBSERVED, "TopicTest", "broker-a", 4),
    }
    for table, table_schema in ((lake.NS_RUNS, NS_RUNS_SCHEMA), (lake.NS_STATE, NS_STATE_SCHEMA)):
        servers = {
            r["ns"]
            for r in read_table(spark, lake.table_path(lake_dir, table), table_schema, where={"date": DAY})
            .select("ns")
            .collect()
        }
        assert servers == {"ns-a", OBSERVED}, table
    # nor of the liveness stage: broker-a's availability is over the one real server
    run_liveness(spark, str(lake_dir), DAY, Config())
    (row,) = read_table(
        spark, lake.table_path(lake_dir, lake.BROKER_AVAILABILITY), BROKER_AVAILABILITY_SCHEMA, where={"date": DAY}
    ).collect()
    assert (row["broker_addr"], row["servers"], sorted(row["live_ms_by_ns"])) == (BROKER_A.broker_addr, 1, ["ns-a"])
