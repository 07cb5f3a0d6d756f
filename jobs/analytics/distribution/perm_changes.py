"""Who set a QueueData's permission: the broker's own registration, or an admin request.

A QueueData's ``perm`` changes two ways (docs/nameserver-semantics.md §2.1, §2.8):

- a master registers (REGISTER_BROKER, 103) a new topic config with a new data version, on every
  server at once (``mqadmin updateTopic -p 4``, or the broker's ``brokerPermission``): a
  *registered* permission, the broker's configuration;
- an admin sends WIPE_WRITE_PERM_OF_BROKER (205) or ADD_WRITE_PERM_OF_BROKER (327) to one server:
  the data version is the same, so the broker's next registrations leave it.

Only the second is a ``write_perm_wiped``. For nsaudit's own servers the event that set a value
says which (``topic_route_history.from_seq`` is a ``wipe_write_perm`` / ``add_write_perm`` event,
or not). An observed server (``nsaudit collect``) logs no request: its change is registered when
every other server holding the same (topic, group) made the same change within one poll round of
it (:data:`ROUND_SLACK_MS` beyond twice the poll interval), none of them by an admin request; a
change on some servers only is an admin's. A permission with no change before it today (carried
over midnight, an observed server's first snapshot) is the broker's when every server holding the
cell agrees on it (:func:`with_perm_sources`).

Outputs: :func:`agg_registered_read_only` (the intervals a broker registered without write perm,
which the distribution stage exempts from ``write_perm_wiped`` and ``no_writable_queue``) and
:func:`select_topic_perm_changes` (``topic_perm_changed`` findings).
"""

from __future__ import annotations

import datetime as dt

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from common.timeutil import DAY_MS, day_start_ms
from jobs.analytics.distribution.kinds import SEVERITY
from jobs.lake.findings import finding_columns
from jobs.snapshots import with_segments
from jobs.spark.profile import broadcast
from nameserver.collect.live.rules import DEFAULT_POLL_MS, ROUND_SLACK_MS
from nameserver.model import PERM_WRITE

# WIPE_WRITE_PERM_OF_BROKER (205) and ADD_WRITE_PERM_OF_BROKER (327), as the server logs them
ADMIN_PERM_EVENTS = ("wipe_write_perm", "add_write_perm")
REGISTERED, ADMIN, UNKNOWN = "registered", "admin", "unknown"
KEYS = ("ns", "topic", "broker_name")


def agg_perm_runs(topic_route_df: DataFrame) -> DataFrame:
    """A QueueData's intervals of one permission, merged: one row per run of touching intervals of
    a (ns, topic, broker name) with the same ``perm``.

    Columns: ``ns``, ``topic``, ``broker_name``, ``perm``, ``from_ms``, ``to_ms`` (null: still
    valid at the end of the day), ``first_seq`` (``from_seq`` of its first interval: the event that
    set the permission), ``write_queue_nums`` (of its first interval), ``prev_perm`` (the perm of
    the run it follows without a gap; null when it follows none: the first of the day, or after
    the QueueData was gone).

    Example:
        perm 6 00:00-10:00, perm 6 10:00-11:00 (new queue numbers), perm 4 from 11:00: runs 6
        00:00-11:00 and 4 from 11:00 with ``prev_perm`` 6.
    """
    cell = Window.partitionBy(*KEYS).orderBy("_from")
    rows_df = topic_route_df.select(
        *KEYS,
        "perm",
        "write_queue_nums",
        "from_seq",
        F.unix_millis("valid_from_ts").alias("_from"),
        F.unix_millis("valid_to_ts").alias("_to"),
    )
    touches = F.lag("_to").over(cell) == F.col("_from")
    new_run = ~F.coalesce(touches & (F.lag("perm").over(cell) == F.col("perm")), F.lit(False))
    runs_df = (
        rows_df.withColumn("_follows", F.coalesce(touches, F.lit(False)))
        .withColumn("_run", F.sum(new_run.cast("int")).over(cell.rowsBetween(Window.unboundedPreceding, 0)))
        .groupBy(*KEYS, "_run")
        .agg(
            F.first("perm").alias("perm"),
            F.min("_from").alias("from_ms"),
            F.max_by("_to", "_from").alias("to_ms"),
            F.min_by("from_seq", "_from").alias("first_seq"),
            F.min_by("write_queue_nums", "_from").alias("write_queue_nums"),
            F.min_by("_follows", "_from").alias("_follows"),
        )
    )
    runs = Window.partitionBy(*KEYS).orderBy("from_ms")
    return runs_df.select(
        *KEYS,
        "perm",
        "from_ms",
        "to_ms",
        "first_seq",
        "write_queue_nums",
        F.when(F.col("_follows"), F.lag("perm").over(runs)).alias("prev_perm"),
    )


def with_perm_sources(runs_df: DataFrame, events_df: DataFrame, observed_df: DataFrame) -> DataFrame:
    """Add ``source`` (``registered``, ``admin`` or ``unknown``) to :func:`agg_perm_runs` rows, and
    ``prev_source``, that of the run it follows.

    - An own server's run whose first event is a 205 or 327 is ``admin``; one that follows
      another run with another event (a registration) is ``registered``.
    - An observed server's run that follows another is ``registered`` when every other server
      holding the cell then made the same change (``prev_perm`` to ``perm``) within twice the
      poll interval plus :data:`ROUND_SLACK_MS`, none of them by an admin request; else ``admin``.
    - A run that follows none (carried from the day before, the first after the cell was gone, an
      observed server's first snapshot) is ``registered`` when every other server holding the
      cell then has the same perm (a broker registers the same topic config everywhere), else
      ``unknown``.

    Args:
        runs_df: :func:`agg_perm_runs` of the day's ``topic_route_history``.
        events_df: the day's events (``ns``, ``seq``, ``type``).
        observed_df: ``ns``, ``resolution_ms`` of the day's observed servers (``ns_state``).

    Example:
        broker-a's ``T`` from 6 to 4 on ns-a and ns-b at 10:00 by a registration: both
        ``registered``; wiped on ns-a alone at 12:00 (205): ``admin``.
    """
    admin_df = broadcast(
        events_df.where(F.col("type").isin(*ADMIN_PERM_EVENTS)).select(
            "ns", F.col("seq").alias("first_seq"), F.lit(True).alias("_admin")
        )
    )
    poll_df = broadcast(
        observed_df.groupBy("ns").agg(F.coalesce(F.max("resolution_ms"), F.lit(DEFAULT_POLL_MS)).alias("_poll_ms"))
    )
    follows = F.col("prev_perm").isNotNull()
    sourced_df = (
        runs_df.join(admin_df, ["ns", "first_seq"], "left")
        .join(poll_df, "ns", "left")
        .withColumn("_observed", F.col("_poll_ms").isNotNull())
        # only the event can say so; the other servers are asked below
        .withColumn(
            "_own_source",
            F.when(F.coalesce(F.col("_admin"), F.lit(False)), F.lit(ADMIN)).when(
                ~F.col("_observed") & follows, F.lit(REGISTERED)
            ),
        )
    )
    source = F.coalesce(F.col("_own_source"), F.col("_judged"), F.lit(UNKNOWN))
    runs = Window.partitionBy(*KEYS).orderBy("from_ms")
    return (
        sourced_df.join(_judge_by_other_servers(sourced_df), [*KEYS, "from_ms"], "left")
        .withColumn("source", source)
        .withColumn("prev_source", F.when(follows, F.lag("source").over(runs)))
        .drop("_admin", "_poll_ms", "_observed", "_own_source", "_judged")
    )


def _judge_by_other_servers(sourced_df: DataFrame) -> DataFrame:
    """``_judged`` (``KEYS``, ``from_ms``) of the runs the event alone cannot place: an observed
    server's change, and any run that follows none (see :func:`with_perm_sources`)."""
    pending_df = sourced_df.where(F.col("_own_source").isNull()).select(
        *KEYS, "from_ms", "prev_perm", "perm", F.coalesce(F.col("_poll_ms"), F.lit(0)).alias("_poll_ms")
    )
    cells_df = broadcast(pending_df.select("topic", "broker_name").distinct())
    others_df = sourced_df.join(cells_df, ["topic", "broker_name"], "left_semi").select(
        F.col("ns").alias("o_ns"),
        "topic",
        "broker_name",
        F.col("from_ms").alias("o_from"),
        F.col("to_ms").alias("o_to"),
        F.col("prev_perm").alias("o_prev"),
        F.col("perm").alias("o_perm"),
        F.coalesce(F.col("_own_source"), F.lit(UNKNOWN)).alias("o_source"),
    )
    change = F.col("prev_perm").isNotNull()
    # a change is seen up to a round after it happened on each observed server; a run that
    # follows none is compared where it begins (and up to a round after, on an observed server)
    tolerance = F.when(change, 2 * F.col("_poll_ms") + ROUND_SLACK_MS).otherwise(F.col("_poll_ms"))
    near = (F.col("o_from") <= F.col("from_ms") + tolerance) & (
        F.col("o_to").isNull()
        | (F.col("o_to") > F.when(change, F.col("from_ms") - tolerance).otherwise(F.col("from_ms")))
    )
    other = (F.col("o_ns") != F.col("ns")) & near
    same_change = (
        (F.col("o_prev") == F.col("prev_perm"))
        & (F.col("o_perm") == F.col("perm"))
        & (F.abs(F.col("o_from") - F.col("from_ms")) <= tolerance)
        & (F.col("o_source") != ADMIN)
    )
    agrees = F.when(change, same_change).otherwise(F.col("o_perm") == F.col("perm"))
    disagrees = F.when(change, F.lit(False)).otherwise(F.col("o_perm") != F.col("perm"))
    # A change on the only server holding the cell has no one to confirm it: unknown, judged as
    # a wipe would be (one observed server cannot tell `updateTopic -p 4` from WIPE_WRITE_PERM).
    # A run that follows none there is the broker's unless another server disagrees.
    judged = (
        F.when(
            change,
            F.when(F.col("_holders") == 0, F.lit(UNKNOWN))
            .when(F.col("_same") == F.col("_holders"), F.lit(REGISTERED))
            .otherwise(F.lit(ADMIN)),
        )
        .when(F.col("_disagreeing") == 0, F.lit(REGISTERED))
        .otherwise(F.lit(UNKNOWN))
    )
    # left: a run on the only server holding the cell has no one to confirm or deny it (0 of 0)
    return (
        pending_df.join(others_df, ["topic", "broker_name"], "left")
        .groupBy(*KEYS, "from_ms", "prev_perm")
        .agg(
            F.count_distinct(F.when(other, F.col("o_ns"))).alias("_holders"),
            F.count_distinct(F.when(other & agrees, F.col("o_ns"))).alias("_same"),
            F.count(F.when(other & disagrees, 1)).alias("_disagreeing"),
        )
        .select(*KEYS, "from_ms", judged.alias("_judged"))
    )


def _writable(perm: Column) -> Column:
    return perm.bitwiseAND(PERM_WRITE) == PERM_WRITE


def agg_registered_read_only(sourced_runs_df: DataFrame, day: dt.date) -> DataFrame:
    """The runs a broker registered without write perm, at the distribution's millisecond
    positions (0 = 00:00): ``ns``, ``topic``, ``broker_name``, ``ro_first``, ``ro_last``."""
    start = day_start_ms(day)
    return sourced_runs_df.where((F.col("source") == REGISTERED) & ~_writable(F.col("perm"))).select(
        *KEYS,
        (F.col("from_ms") - start).alias("ro_first"),
        (F.coalesce(F.col("to_ms"), F.lit(start + DAY_MS)) - 1 - start).alias("ro_last"),
    )


def with_registered_read_only(flagged_df: DataFrame, read_only_df: DataFrame) -> DataFrame:
    """Add ``registered_read_only`` to millisecond pieces
    (:func:`jobs.analytics.distribution.queue_data.with_queue_flags`): the piece lies in a run
    its broker registered without write perm (:func:`agg_registered_read_only`)."""
    r = broadcast(
        read_only_df.withColumnRenamed("ns", "_ns")
        .withColumnRenamed("topic", "_topic")
        .withColumnRenamed("broker_name", "_broker_name")
    )
    inside = (
        (F.col("ns") == F.col("_ns"))
        & (F.col("topic") == F.col("_topic"))
        & (F.col("broker_name") == F.col("_broker_name"))
        & F.col("first_pos").between(F.col("ro_first"), F.col("ro_last"))
    )
    return (
        flagged_df.join(r, inside, "left")
        .withColumn("registered_read_only", F.col("ro_first").isNotNull())
        .drop("_ns", "_topic", "_broker_name", "ro_first", "ro_last")
    )


def select_topic_perm_changes(sourced_runs_df: DataFrame, topic_route_df: DataFrame) -> DataFrame:
    """``topic_perm_changed`` findings: a registered run that changed the perm of a registered run
    before it (a registration that restores a wiped perm is no change of the broker's), one per
    (server, topic, group), at the instant that server took it.

    Info; warning when the topic is left without any writable QueueData on that server
    (``topic_writable`` false): its producers get no queue, by the broker's configuration.

    Args:
        sourced_runs_df: :func:`with_perm_sources` rows.
        topic_route_df: the day's ``topic_route_history`` (the topic's other QueueData then).

    Example:
        ``mqadmin updateTopic -b broker-a -t T -p 4`` at 10:00 for a topic on broker-a only: a
        warning per server, ``perm_before`` 6, ``perm`` 4, ``topic_writable`` false.
    """
    counted_df = _agg_perm_change_counts(sourced_runs_df, topic_route_df)
    own = F.when(_writable(F.col("perm")), F.greatest(F.col("_own_queues"), F.lit(0))).otherwise(F.lit(0))
    writable_queues = (own + F.col("_other_queues")).cast("long")
    at = F.timestamp_millis("from_ms")
    return counted_df.select(
        *finding_columns(
            kind="topic_perm_changed",
            severity=F.when(writable_queues == 0, F.lit("warning")).otherwise(F.lit(SEVERITY["topic_perm_changed"])),
            subject=F.col("topic"),
            ns=F.col("ns"),
            start_ts=at,
            end_ts=at,
            detail={
                "broker_name": F.col("broker_name"),
                "perm_before": F.col("perm_before"),
                "perm": F.col("perm"),
                "other_groups": F.col("other_groups"),
                "topic_writable": writable_queues > 0,
                "write_queues": F.when(writable_queues == 0, F.col("_own_queues").cast("long")).otherwise(
                    F.lit(0).cast("long")
                ),
            },
        )
    )


def _agg_perm_change_counts(sourced_runs_df: DataFrame, topic_route_df: DataFrame) -> DataFrame:
    """The registered perm changes, one per (server, topic, group, instant), with the topic's other
    QueueData on that server then (``_other_queues`` writable, ``other_groups``)."""
    changes_df = sourced_runs_df.where(
        F.col("prev_perm").isNotNull() & (F.col("source") == REGISTERED) & (F.col("prev_source") == REGISTERED)
    )
    c = changes_df.alias("c")
    q = topic_route_df.select(
        "ns",
        "topic",
        "broker_name",
        "perm",
        "write_queue_nums",
        F.unix_millis("valid_from_ts").alias("_from"),
        F.unix_millis("valid_to_ts").alias("_to"),
    ).alias("q")
    # the topic's other QueueData on that server when the change came
    then = (
        (F.col("c.ns") == F.col("q.ns"))
        & (F.col("c.topic") == F.col("q.topic"))
        & (F.col("c.broker_name") != F.col("q.broker_name"))
        & (F.col("q._from") <= F.col("c.from_ms"))
        & (F.col("q._to").isNull() | (F.col("q._to") > F.col("c.from_ms")))
    )
    other_writable = F.when(_writable(F.col("q.perm")), F.greatest(F.col("q.write_queue_nums"), F.lit(0)))
    return (
        c.join(q, then, "left")
        .groupBy("c.ns", "c.topic", "c.broker_name", "c.from_ms")
        .agg(
            F.first("c.perm").alias("perm"),
            F.first("c.prev_perm").alias("perm_before"),
            F.first("c.write_queue_nums").alias("_own_queues"),
            F.coalesce(F.sum(other_writable), F.lit(0)).cast("long").alias("_other_queues"),
            F.count(F.col("q.broker_name")).alias("other_groups"),
        )
    )


def filter_registered_read_only_topics(no_writable_df: DataFrame, flagged_df: DataFrame) -> DataFrame:
    """Drop the ``no_writable_queue`` segments of a topic whose every QueueData its brokers
    registered without write perm: read-only by configuration, which ``topic_perm_changed`` reports
    when it happens, not a producer's fault every day after.

    Args:
        no_writable_df: the condition's segments (``ns``, ``subject``, ``first_pos``, ...), cut by
            :func:`jobs.snapshots.with_segments` over every piece of the (ns, topic).
        flagged_df: those pieces, with ``registered_read_only`` (:func:`with_registered_read_only`).
    """
    keys = ["ns", "topic"]
    # only topics with such a piece (few): their segments are cut at the same bounds as the condition's
    suspects_df = broadcast(flagged_df.where("registered_read_only").select(*keys).distinct())
    configured_df = (
        with_segments(flagged_df.join(suspects_df, keys, "left_semi"), keys)
        .groupBy(*keys, "seg_first")
        .agg(F.min(F.col("registered_read_only").cast("int")).alias("_all"))
        .where(F.col("_all") == 1)
        .select("ns", F.col("topic").alias("subject"), F.col("seg_first").alias("first_pos"))
    )
    return no_writable_df.join(configured_df, ["ns", "subject", "first_pos"], "left_anti")
