"""The rebuild's pieces: the marking transform (chispa), the per-server walk, and a day's job.

Marking rows are written by hand in the order the server would log them; the walk tests use the
route table itself to make events, so they mean what a server would have logged.
"""

from __future__ import annotations

import datetime as dt

import pytest
from chispa import assert_df_equality
from pyspark.sql import types as T

from common.timeutil import DAY_MS, day_start_ms
from jobs.rebuild import state as rebuild_state
from jobs.rebuild.marking import with_interesting, with_run, with_topics
from jobs.rebuild.walk import ADDR, CLUSTER, QUEUE, walk_day
from nameserver.model import DataVersion, TopicConfig, topics_digest
from nameserver.routes.manager import RequestContext, RouteInfoManager, ns_start_event, ns_stop_event

DAY = dt.date(2026, 11, 21)
T0 = day_start_ms(DAY)
M, S, N = "10.0.0.1:10911", "10.0.0.2:10911", "10.0.0.3:10911"

MARK_SCHEMA = T.StructType(
    [
        T.StructField("ns", T.StringType()),
        T.StructField("seq", T.LongType()),
        T.StructField("ts", T.LongType()),
        T.StructField("type", T.StringType()),
        T.StructField("request_code", T.IntegerType()),
        T.StructField("cluster", T.StringType()),
        T.StructField("broker_name", T.StringType()),
        T.StructField("broker_id", T.LongType()),
        T.StructField("broker_addr", T.StringType()),
        T.StructField("ha_addr", T.StringType()),
        T.StructField("channel", T.StringType()),
        T.StructField(
            "data_version",
            T.StructType([T.StructField("timestamp", T.LongType()), T.StructField("counter", T.LongType())]),
        ),
        T.StructField("topics_digest", T.StringType()),
        T.StructField("filter_servers", T.ArrayType(T.StringType(), False)),
    ]
)
DV1, DV2 = (100, 1), (100, 2)


def ev(
    seq,
    kind,
    code=None,
    addr=None,
    name="broker-a",
    broker_id=0,
    dv=DV1,
    channel="c1",
    digest="d1",
    filters=(),
    cluster="C1",
    ns="ns-a",
):
    """One marking input row; ``filters=None`` is the pre-3.0.11 body (no filter list)."""
    request = kind in ("register", "heartbeat")
    return (
        ns,
        seq,
        T0 + 1000 * seq,
        kind,
        code,
        cluster if request else None,
        name if request else None,
        broker_id if request else None,
        addr,
        addr.replace("10911", "10912") if request and addr else None,
        channel if request else None,
        dv if request else None,
        digest if request else None,
        (list(filters) if filters is not None else None) if request else None,
    )


def marked(spark, rows):
    df = spark.createDataFrame(rows, MARK_SCHEMA)
    return with_interesting(df).select("ns", "seq", "interesting").orderBy("ns", "seq")


def expected(spark, pairs, ns="ns-a"):
    schema = T.StructType(
        [
            T.StructField("ns", T.StringType()),
            T.StructField("seq", T.LongType()),
            T.StructField("interesting", T.BooleanType()),
        ]
    )
    return spark.createDataFrame([(ns, s, i) for s, i in pairs], schema)


# ---------------------------------------------------------------------------- marking


def test_unchanged_heartbeats_between_first_and_last_are_skipped(spark):
    rows = [
        ev(1, "ns_start"),
        ev(2, "register", 103, M),
        ev(3, "heartbeat", 103, M),
        ev(4, "heartbeat", 103, M),
        ev(5, "heartbeat", 103, M),  # last of its kind: fixes last_update in the end-of-day state
    ]
    assert_df_equality(
        marked(spark, rows),
        expected(spark, [(1, True), (2, True), (3, False), (4, False), (5, True)]),
        ignore_nullable=True,
    )


def test_w8_old_master_heartbeat_after_another_address_took_its_slot_is_interesting(spark):
    rows = [
        ev(1, "register", 103, M, broker_id=0),
        ev(2, "register", 103, S, broker_id=1, channel="c2"),
        ev(3, "heartbeat", 103, M, broker_id=0),  # unchanged: skipped
        ev(4, "heartbeat", 103, S, broker_id=0, channel="c2"),  # S promoted into M's slot
        ev(5, "heartbeat", 103, M, broker_id=0),  # M unchanged, but puts itself back into slot 0
        ev(6, "heartbeat", 103, M, broker_id=0),  # slot's previous 103 is M again: skipped
        ev(7, "heartbeat", 103, S, broker_id=0, channel="c2"),  # S unchanged, but M took slot 0
        ev(8, "heartbeat", 103, M, broker_id=0),
        ev(9, "heartbeat", 103, S, broker_id=0, channel="c2"),
    ]
    assert_df_equality(
        marked(spark, rows),
        expected(
            spark, [(1, True), (2, True), (3, False), (4, True), (5, True), (6, False), (7, True), (8, True), (9, True)]
        ),
        ignore_nullable=True,
    )


def test_any_changed_field_makes_a_heartbeat_interesting(spark):
    rows = [
        ev(1, "register", 103, M),
        ev(2, "heartbeat", 103, M, dv=DV2),  # new data version: topics re-applied
        ev(3, "heartbeat", 103, M, dv=DV2, digest="d2"),  # same version, other topics (W20)
        ev(4, "heartbeat", 103, M, dv=DV2, digest="d2", channel="c9"),  # reconnect
        ev(5, "heartbeat", 103, M, dv=DV2, digest="d2", channel="c9", cluster="C2"),  # W21
        ev(6, "heartbeat", 103, M, dv=DV2, digest="d2", channel="c9", cluster="C2", filters=["f:1"]),
        ev(7, "heartbeat", 103, M, dv=DV2, digest="d2", channel="c9", cluster="C2", filters=["f:1"]),
        ev(8, "heartbeat", 103, M, dv=DV2, digest="d2", channel="c9", cluster="C2", broker_id=1),
        ev(9, "heartbeat", 103, M, dv=DV2, digest="d2", channel="c9", cluster="C2", broker_id=1, name="broker-x"),
        ev(10, "heartbeat", 103, M, dv=DV2, digest="d2", channel="c9", cluster="C2", broker_id=1, name="broker-x"),
    ]
    assert_df_equality(
        marked(spark, rows),
        expected(
            spark,
            [
                (1, True),
                (2, True),
                (3, True),
                (4, True),
                (5, True),
                (6, True),
                (7, False),
                (8, True),
                (9, True),
                (10, True),
            ],
        ),
        ignore_nullable=True,
    )


def test_null_filter_list_changes_nothing_but_a_list_after_null_is_interesting(spark):
    rows = [
        ev(1, "register", 103, M, filters=[]),
        ev(2, "heartbeat", 103, M, filters=None),  # pre-3.0.11 body: filter table untouched
        ev(3, "heartbeat", 103, M, filters=[]),  # the table's value is not known from seq 2
        ev(4, "heartbeat", 103, M, filters=[]),
        ev(5, "heartbeat", 103, M, filters=[]),
    ]
    assert_df_equality(
        marked(spark, rows),
        expected(spark, [(1, True), (2, False), (3, True), (4, False), (5, True)]),
        ignore_nullable=True,
    )


def test_null_and_edge_rows(spark):
    rows = [
        ev(1, "heartbeat", 904, None),  # null address: nothing to reason about, walked
        ev(2, "heartbeat", None, M),  # null request code
        ev(3, "rejected"),  # changes nothing (docs/nameserver-semantics.md §6)
        ev(4, "register", 103, M),
        ev(5, "heartbeat", 904, M),
        ev(6, "heartbeat", 904, M),  # last 904 of M
        ev(7, "heartbeat", 322, M),
        ev(8, "heartbeat", 322, M, dv=DV2),  # last 322 with DV2
        ev(9, "heartbeat", 322, M),  # last 322 with DV1
        ev(10, "expire", None, M),
        ev(11, "heartbeat", 103, M),  # after a removal (a lost register): walked
        ev(12, "ns_stop"),
        ev(13, "ns_start"),
        ev(14, "heartbeat", 103, M),  # first of a new run
        ev(15, "heartbeat", 103, M),
    ]
    assert_df_equality(
        marked(spark, rows),
        expected(
            spark,
            [
                (1, True),
                (2, True),
                (3, False),
                (4, True),
                (5, False),
                (6, True),
                (7, False),
                (8, True),
                (9, True),
                (10, True),
                (11, True),
                (12, True),
                (13, True),
                (14, True),
                (15, True),
            ],
        ),
        ignore_nullable=True,
    )


def test_servers_are_marked_independently(spark):
    rows = [
        ev(1, "register", 103, M, ns="ns-b"),
        ev(1, "register", 103, M),
        ev(2, "heartbeat", 103, M),
        ev(3, "heartbeat", 103, M),
    ]
    want = expected(spark, [(1, True), (2, False), (3, True)]).unionByName(expected(spark, [(1, True)], ns="ns-b"))
    assert_df_equality(marked(spark, rows), want.orderBy("ns", "seq"), ignore_nullable=True)


def test_with_run_counts_starts_and_stops(spark):
    rows = [
        ev(1, "register", 103, M),
        ev(2, "ns_stop"),
        ev(3, "ns_start"),
        ev(4, "register", 103, M),
        ev(5, "ns_start"),
        ev(1, "register", 103, M, ns="ns-b"),
    ]
    got = with_run(spark.createDataFrame(rows, MARK_SCHEMA)).select("ns", "seq", "run").orderBy("ns", "seq")
    want_schema = T.StructType(
        [T.StructField("ns", T.StringType()), T.StructField("seq", T.LongType()), T.StructField("run", T.IntegerType())]
    )
    want = spark.createDataFrame(
        [("ns-a", 1, 0), ("ns-a", 2, 1), ("ns-a", 3, 2), ("ns-a", 4, 2), ("ns-a", 5, 3), ("ns-b", 1, 0)], want_schema
    )
    assert_df_equality(got, want, ignore_nullable=True)


# the event keys with_topics reads, and a topic list of two fields
TOPIC_EVENTS_SCHEMA = T.StructType(
    [
        T.StructField("ns", T.StringType()),
        T.StructField("seq", T.LongType()),
        T.StructField("type", T.StringType()),
        T.StructField("request_code", T.IntegerType()),
        T.StructField("topics_digest", T.StringType()),
        T.StructField(
            "topics",
            T.ArrayType(T.StructType([T.StructField("topic", T.StringType()), T.StructField("perm", T.IntegerType())])),
        ),
    ]
)


def test_topics_are_resolved_by_digest_from_any_event_of_the_day(spark):
    schema = TOPIC_EVENTS_SCHEMA
    events = spark.createDataFrame(
        [
            ("ns-b", 7, "register", 103, "d1", [("TopicA", 6)]),  # another server logged the list
            ("ns-a", 9, "heartbeat", 103, "d1", None),
            ("ns-a", 10, "heartbeat", 103, "d9", None),  # never logged: stays null
            ("ns-a", 11, "heartbeat", 103, None, None),  # null digest
            ("ns-a", 12, "heartbeat", 904, "d1", None),  # not a registration
        ],
        schema,
    )
    interesting = events.where("ns = 'ns-a'").drop("topics")
    got = with_topics(interesting, events).select("seq", "topics").orderBy("seq")
    want = spark.createDataFrame(
        [(9, [("TopicA", 6)]), (10, None), (11, None), (12, None)], T.StructType([schema["seq"], schema["topics"]])
    )
    assert_df_equality(got, want, ignore_nullable=True)


def test_with_topics_first_only_gives_each_servers_first_103_of_a_digest_the_list(spark):
    schema = TOPIC_EVENTS_SCHEMA
    events = spark.createDataFrame(
        [
            ("ns-a", 3, "heartbeat", 904, "d1", None),  # not a registration: not the first 103
            ("ns-a", 5, "register", 103, "d1", [("TopicA", 6)]),
            ("ns-a", 9, "heartbeat", 103, "d1", None),  # the walk knows d1 by now
            ("ns-a", 10, "heartbeat", 103, "d2", None),
            ("ns-a", 11, "heartbeat", 103, "d2", None),
            ("ns-b", 4, "heartbeat", 103, "d1", None),  # another server: its own first
            ("ns-b", 6, "heartbeat", 103, "d1", None),
        ],
        schema,
    ).unionByName(spark.createDataFrame([("ns-c", 1, "register", 103, "d2", [("TopicB", 2)])], schema))
    interesting = events.where("ns != 'ns-c'").drop("topics")
    got = with_topics(interesting, events, first_only=True).select("ns", "seq", "topics").orderBy("ns", "seq")
    a, b = [("TopicA", 6)], [("TopicB", 2)]
    want = spark.createDataFrame(
        [
            ("ns-a", 3, None),
            ("ns-a", 5, a),
            ("ns-a", 9, None),
            ("ns-a", 10, b),
            ("ns-a", 11, None),
            ("ns-b", 4, a),
            ("ns-b", 6, None),
        ],
        T.StructType([schema["ns"], schema["seq"], schema["topics"]]),
    )
    assert_df_equality(got, want, ignore_nullable=True)


# ---------------------------------------------------------------------------- the walk

A = TopicConfig("TopicA", 8, 8)
CTX = RequestContext("c1", "10.0.0.1:50000", 103)


class Log:
    """Events of one server made by the route table itself, stamped with seq."""

    def __init__(self):
        self.routes = RouteInfoManager()
        self.events: list[dict] = []

    def add(self, events):
        for e in events:
            e = dict(e)
            e["seq"] = len(self.events) + 1
            if "data_version" in e and isinstance(e["data_version"], DataVersion):
                e["data_version"] = e["data_version"].to_json_obj()
            if e.get("topics") is not None:
                e["topics"] = [t.to_json_obj() for t in e["topics"]]
            self.events.append(e)

    def start(self, t):
        self.routes.clear()
        self.add([ns_start_event(t, 120_000, 10_000, "0.1.0")])

    def stop(self, t):
        self.routes.clear()
        self.add([ns_stop_event(t, "SIGTERM")])

    def reg(self, t, addr=M, name="broker-a", broker_id=0, dv=DataVersion(100, 1), topics=(A,)):
        self.add(self.routes.register_broker("C1", addr, name, broker_id, None, dv, topics, [], t, CTX).events)

    def unreg(self, t, addr=M, name="broker-a"):
        self.add(self.routes.unregister_broker("C1", addr, name, 0, t, CTX))


def cells(result, kind):
    return [(key[1:], value, f, to, fs, ts) for key, value, f, to, fs, ts in result.intervals if key[0] == kind]


def test_a_value_set_and_removed_within_one_millisecond_is_never_written():
    log = Log()
    log.start(T0 + 1000)
    log.reg(T0 + 2000)
    log.unreg(T0 + 2000)
    result = walk_day("ns-a", DAY, None, log.events)
    assert result.intervals == []
    assert result.state["queues"] == [] and result.state["live"] == []


def test_a_cell_removed_and_restored_within_one_millisecond_keeps_one_interval():
    log = Log()
    log.start(T0 + 1000)
    log.reg(T0 + 2000)
    log.unreg(T0 + 3000)
    log.reg(T0 + 3000)  # same instant: no instant ever saw the route missing
    result = walk_day("ns-a", DAY, None, log.events)
    assert cells(result, QUEUE) == [(("TopicA", "broker-a"), (8, 8, 6, 0), T0 + 2000, None, 2, None)]


def test_intervals_close_at_the_changing_event_and_carry_into_the_next_day_from_midnight():
    log = Log()
    log.start(T0 + 1000)
    log.reg(T0 + 2000)
    log.reg(T0 + 5000, dv=DataVersion(100, 2), topics=(TopicConfig("TopicA", 4, 4),))
    day1 = walk_day("ns-a", DAY, None, log.events)
    assert cells(day1, QUEUE) == [
        (("TopicA", "broker-a"), (8, 8, 6, 0), T0 + 2000, T0 + 5000, 2, 3),
        (("TopicA", "broker-a"), (4, 4, 6, 0), T0 + 5000, None, 3, None),
    ]
    assert cells(day1, ADDR) == [(("broker-a", 0), ("C1", M), T0 + 2000, None, 2, None)]
    assert cells(day1, CLUSTER) == [(("C1", "broker-a"), True, T0 + 2000, None, 2, None)]

    state = rebuild_state.loads(rebuild_state.dumps(day1.state))
    log.reg(T0 + DAY_MS + 3000, dv=DataVersion(100, 2), topics=(TopicConfig("TopicA", 4, 4),))  # heartbeat
    day2 = walk_day("ns-a", DAY + dt.timedelta(days=1), state, log.events[-1:])
    assert cells(day2, QUEUE) == [(("TopicA", "broker-a"), (4, 4, 6, 0), T0 + DAY_MS, None, 3, None)]
    assert day2.runs == [(T0 + DAY_MS, None, 1, None, "open")]
    assert day2.state["live"][0]["last_update"] == T0 + DAY_MS + 3000
    assert not day2.started_without_state


def test_runs_end_with_ns_stop_or_a_crash_restart_and_clear_the_tables():
    log = Log()
    log.start(T0 + 1000)
    log.reg(T0 + 2000)
    log.stop(T0 + 3000)
    log.start(T0 + 4000)
    log.reg(T0 + 5000)
    log.start(T0 + 6000)  # crash: no ns_stop before it
    result = walk_day("ns-a", DAY, None, log.events)
    assert result.runs == [
        (T0 + 1000, T0 + 3000, 1, 3, "ns_stop"),
        (T0 + 4000, T0 + 6000, 4, 6, "restart"),
        (T0 + 6000, None, 6, None, "open"),
    ]
    assert [c[2:4] for c in cells(result, QUEUE)] == [(T0 + 2000, T0 + 3000), (T0 + 5000, T0 + 6000)]
    assert result.state["up"] and result.up_at_start and not result.started_without_state


def test_a_day_without_state_that_does_not_begin_with_ns_start_is_reported():
    log = Log()
    log.reg(T0 + 2000)
    result = walk_day("ns-a", DAY, None, log.events)
    assert result.started_without_state
    assert result.runs == [(T0, None, None, None, "open")]  # up since before the lake


def test_a_registration_whose_topics_were_never_logged_is_applied_without_topics_and_counted():
    log = Log()
    log.start(T0 + 1000)
    log.reg(T0 + 2000)
    event = {k: v for k, v in log.events[-1].items() if k != "topics"}
    result = walk_day("ns-a", DAY, None, [log.events[0], event])
    assert result.unresolved_topics == 1
    assert cells(result, QUEUE) == [] and len(cells(result, ADDR)) == 1


def test_state_keeps_topic_lists_of_live_addresses_for_the_next_day():
    log = Log()
    log.start(T0 + 1000)
    log.reg(T0 + 2000)
    day1 = walk_day("ns-a", DAY, None, log.events)
    digest = topics_digest((A,))
    assert day1.state["topics_by_digest"] == {digest: [A.to_json_obj()]}
    assert day1.state["live"][0]["topics_digest"] == digest
    # next day a registration with only the digest (its list was logged yesterday) still applies it
    log.routes.clear()
    log.reg(T0 + DAY_MS + 1000, dv=DataVersion(100, 7))
    event = {k: v for k, v in log.events[-1].items() if k != "topics"}
    day2 = walk_day("ns-a", DAY + dt.timedelta(days=1), day1.state, [event])
    assert day2.unresolved_topics == 0
    assert cells(day2, QUEUE)[0][1] == (8, 8, 6, 0)


@pytest.mark.parametrize("ts", [T0 - 5000, T0 + DAY_MS + 5000])
def test_event_times_outside_the_day_are_clamped_into_it(ts):
    log = Log()
    log.start(T0 + 1000)
    log.reg(ts)
    result = walk_day("ns-a", DAY, None, log.events)
    start = cells(result, QUEUE)[0][2]
    assert T0 + 1000 <= start <= T0 + DAY_MS - 1


def test_the_previous_state_of_a_lake_written_before_the_observed_columns_reads_them_as_null(spark, tmp_path):
    """A lake from before ``ns_state`` gained ``observed`` and ``resolution_ms``: the next day's rebuild
    adds the columns (null in the older rows) and reads the state instead of refusing the table."""
    from jobs import lake
    from jobs.lake.tables import table_schema, write_table
    from jobs.rebuild.stage import read_previous_state
    from jobs.spark.frames import local_frame
    from schemas.routes import NS_STATE_SCHEMA

    older = T.StructType([f for f in NS_STATE_SCHEMA.fields if f.name not in ("observed", "resolution_ms")])
    day = dt.date(2026, 11, 21)
    row = {
        "date": day - dt.timedelta(days=1),
        "ns": "ns-a",
        "up": True,
        "up_at_start": True,
        "last_seq": 7,
        "last_ts": None,
        "events": 7,
        "interesting_events": 2,
        "started_without_state": False,
        "unresolved_topics": 0,
        "state_json": "{}",
    }
    path = lake.table_path(str(tmp_path), lake.NS_STATE)
    write_table(
        local_frame(spark, [tuple(row[f.name] for f in older.fields)], older),
        path,
        mode="overwrite",
        partition_by=("date",),
        schema=older,
    )
    assert "resolution_ms" not in table_schema(path)[0].names

    rows = [r.asDict() for r in read_previous_state(spark, str(tmp_path), day).collect()]
    assert [(r["ns"], r["last_seq"], r["observed"], r["resolution_ms"]) for r in rows] == [("ns-a", 7, None, None)]
    assert "resolution_ms" in table_schema(path)[0].names
