"""Delta I/O: round trips, idempotent reruns, time travel, atomicity, schema enforcement, clean exits."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest
from chispa import assert_df_equality
from deltalake import DeltaTable
from pyspark.sql import functions as F
from pyspark.sql.types import (
    ArrayType,
    BooleanType,
    DateType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from jobs.lake.delta.files import ColumnStats, check_not_null, encode_partition_value, split_by_partition
from jobs.lake.delta.write import job_ids, wait_for_tasks
from jobs.lake.tables import (
    RowExpansion,
    SchemaMismatchError,
    read_table,
    read_table_arrow,
    table_exists,
    table_version,
    write_table,
)

D1, D2 = dt.date(2026, 11, 21), dt.date(2026, 11, 22)

ALL_KINDS = StructType(
    [
        StructField("id", LongType(), False),
        StructField("n", IntegerType(), True),
        StructField("name", StringType(), True),
        StructField("score", DoubleType(), True),
        StructField("ok", BooleanType(), True),
        StructField("at_ts", TimestampType(), True),
        StructField("labels", MapType(StringType(), StringType(), True), True),
        StructField("broker_addrs", MapType(LongType(), StringType(), True), True),
        StructField(
            "queue_datas",
            ArrayType(StructType([StructField("broker_name", StringType()), StructField("perm", IntegerType())]), True),
            True,
        ),
        StructField("date", DateType(), False),
        StructField("ns", StringType(), False),
    ]
)

ALL_KINDS_ROWS = [
    (
        1,
        7,
        "topic-a",
        1.5,
        True,
        dt.datetime(2026, 11, 21, 3, 0, 0, 123456),
        {"k": "v", "e": None},
        {0: "10.0.0.5:10911", 1: "10.0.0.6:10911"},
        [("broker-a", 6), (None, None)],
        D1,
        "ns-a",
    ),
    # every nullable column null
    (2, None, None, None, None, None, None, None, None, D1, "ns-b"),
    # edge row: empty map and array, extreme values, a partition value Spark must escape in a path
    (3, -(2**31), "ü" * 40, -0.0, False, dt.datetime(1970, 1, 1, 0, 0, 0, 1), {}, {-(2**63): ""}, [], D2, "ns:c/d"),
]

NARROW = StructType(
    [
        StructField("date", DateType(), False),
        StructField("ns", StringType(), False),
        StructField("seq", LongType(), False),
        StructField("value", StringType(), True),
    ]
)


def narrow_df(spark, rows):
    return spark.createDataFrame(rows, NARROW)


def sorted_rows(df, *cols):
    return [r.asDict(recursive=True) for r in df.orderBy(*cols).collect()]


# --- Spark round trips -------------------------------------------------------------------------


@pytest.mark.spark
def test_round_trip_keeps_every_column_kind_and_null_in_spark_and_deltalake(spark, tmp_path):
    path = str(tmp_path / "all")
    df = spark.createDataFrame(ALL_KINDS_ROWS, ALL_KINDS)

    version = write_table(df, path, mode="append", partition_by=["date", "ns"], schema=ALL_KINDS)

    assert version == 0
    out_df = read_table(spark, path, ALL_KINDS)
    # Spark's Parquet reader reports every column nullable; types and values must be exact.
    assert_df_equality(out_df.orderBy("id"), df.orderBy("id"), ignore_nullable=True)
    assert out_df.schema.names == ALL_KINDS.names

    # A plain Delta table: what an outside reader does gives the same rows. (Safe in this process,
    # which does not exit right after; jobs/lake/delta/arrow.py says why our own reads pass a filesystem.)
    arrow_rows = DeltaTable(path).to_pyarrow_table().sort_by("id").to_pylist()
    ours = read_table_arrow(path).sort_by("id").to_pylist()

    def from_spark(row):
        # collect() gives naive local times; Arrow gives UTC-aware ones.
        row["at_ts"] = row["at_ts"] and row["at_ts"].astimezone(dt.UTC)
        return row

    def from_arrow(row):
        for key in ("labels", "broker_addrs"):
            row[key] = None if row[key] is None else dict(row[key])
        return row

    expected = [from_spark(r) for r in sorted_rows(df, "id")]
    assert [from_arrow(r) for r in arrow_rows] == expected
    assert [from_arrow(r) for r in ours] == expected
    assert DeltaTable(path).metadata().partition_columns == ["date", "ns"]


@pytest.mark.spark
def test_replace_where_rerun_gives_same_rows_and_new_version(spark, tmp_path):
    path = str(tmp_path / "t")
    day1 = [(D1, "ns-a", i, f"a{i}") for i in range(3)] + [(D1, "ns-b", 9, None)]
    day2 = [(D2, "ns-a", 100, "keep")]
    write_table(narrow_df(spark, day1 + day2), path, mode="append", partition_by=["date", "ns"], schema=NARROW)
    before = sorted_rows(read_table(spark, path, NARROW), "date", "ns", "seq")
    files_before = set(DeltaTable(path).file_uris())

    version = write_table(
        narrow_df(spark, day1),
        path,
        mode="overwrite",
        partition_by=["date", "ns"],
        replace_where={"date": D1},
        schema=NARROW,
    )

    assert version == 1
    assert sorted_rows(read_table(spark, path, NARROW), "date", "ns", "seq") == before
    # The day's old files left the table in that commit (nothing doubled); the other day's stayed.
    files_after = set(DeltaTable(path).file_uris())
    assert {f for f in files_before & files_after} == {f for f in files_before if "date=2026-11-22" in f}


@pytest.mark.spark
def test_few_rows_writes_one_file_per_partition_value_from_many_input_partitions(spark, tmp_path):
    rows = [(D1, "ns-a", i, f"v{i}") for i in range(30)] + [(D1, "ns-b", 99, None)]
    # a union of small queries, as the findings are: one input partition per row here
    df = narrow_df(spark, rows).repartition(12)
    for few_rows, path in ((False, str(tmp_path / "many")), (True, str(tmp_path / "few"))):
        write_table(
            df,
            path,
            mode="overwrite",
            partition_by=["date", "ns"],
            replace_where={"date": D1},
            schema=NARROW,
            few_rows=few_rows,
        )
        assert sorted_rows(read_table(spark, path, NARROW), "ns", "seq") == sorted_rows(
            narrow_df(spark, rows), "ns", "seq"
        )
    assert len(DeltaTable(str(tmp_path / "many")).file_uris()) > 2
    assert len(DeltaTable(str(tmp_path / "few")).file_uris()) == 2  # one task: a file per (date, ns)


@pytest.mark.spark
def test_empty_rerun_of_a_partition_removes_its_rows_only(spark, tmp_path):
    path = str(tmp_path / "t")
    rows = [(D1, "ns-a", 1, "x"), (D1, "ns-b", 2, "y"), (D2, "ns-a", 3, "z")]
    write_table(narrow_df(spark, rows), path, mode="append", partition_by=["date", "ns"], schema=NARROW)

    version = write_table(
        narrow_df(spark, []),
        path,
        mode="overwrite",
        partition_by=["date", "ns"],
        replace_where={"date": D1, "ns": "ns-a"},
        schema=NARROW,
    )

    assert version == 1
    assert [r["seq"] for r in sorted_rows(read_table(spark, path, NARROW), "seq")] == [2, 3]
    assert read_table(spark, path, NARROW, where={"date": D1, "ns": "ns-a"}).count() == 0


@pytest.mark.spark
def test_rows_outside_replace_where_fail_the_write(spark, tmp_path):
    path = str(tmp_path / "t")
    write_table(
        narrow_df(spark, [(D1, "ns-a", 1, "x")]), path, mode="append", partition_by=["date", "ns"], schema=NARROW
    )

    with pytest.raises(Exception, match="outside replace_where"):
        write_table(
            narrow_df(spark, [(D2, "ns-a", 2, "y")]),
            path,
            mode="overwrite",
            partition_by=["date", "ns"],
            replace_where={"date": D1},
            schema=NARROW,
        )

    assert table_version(path) == 0


@pytest.mark.spark
def test_overwrite_replaces_an_unpartitioned_table(spark, tmp_path):
    path = str(tmp_path / "t")
    write_table(narrow_df(spark, [(D1, "ns-a", 1, "x"), (D2, "ns-b", 2, "y")]), path, mode="append", schema=NARROW)

    version = write_table(narrow_df(spark, [(D2, "ns-c", 3, "z")]), path, mode="overwrite", schema=NARROW)

    assert version == 1
    assert [r["seq"] for r in read_table(spark, path, NARROW).collect()] == [3]
    assert sorted(read_table_arrow(path, version=0)["seq"].to_pylist()) == [1, 2]
    assert DeltaTable(path).metadata().partition_columns == []


def _committed_ms(path: str, version: int) -> int:
    """When ``version`` of the table was committed, in epoch ms: its commit's own timestamp, or its
    log file's modification time if that is later (time travel may go by either)."""
    log_file = Path(path) / "_delta_log" / f"{version:020d}.json"
    committed = [c["timestamp"] for c in DeltaTable(path).history() if c.get("version", version) == version]
    return max([log_file.stat().st_mtime_ns // 1_000_000, *committed])


def _clock_past(ms: int, timeout: float = 10) -> dt.datetime:
    """The wall clock's time once it is in a later millisecond than ``ms`` (epoch ms)."""
    deadline = time.monotonic() + timeout
    while (now := dt.datetime.now(dt.UTC)) < dt.datetime.fromtimestamp((ms + 1) / 1000, dt.UTC):
        assert time.monotonic() < deadline, f"waited {timeout} s for the clock to pass {ms} ms"
        time.sleep(0.001)
    return now


@pytest.mark.spark
def test_time_travel_by_version_and_timestamp(spark, tmp_path):
    path = str(tmp_path / "t")
    write_table(narrow_df(spark, [(D1, "ns-a", 1, "v0")]), path, mode="append", partition_by=["date"], schema=NARROW)
    # commit timestamps are milliseconds: an instant in a later millisecond than version 0's
    # commit, and version 1 committed in a later one still
    between = _clock_past(_committed_ms(path, 0))
    _clock_past(int(between.timestamp() * 1000))
    write_table(narrow_df(spark, [(D1, "ns-a", 2, "v1")]), path, mode="append", partition_by=["date"], schema=NARROW)

    def seqs(**kwargs):
        return [r["seq"] for r in sorted_rows(read_table(spark, path, NARROW, **kwargs), "seq")]

    assert seqs() == [1, 2]
    assert seqs(version=0) == [1]
    assert seqs(timestamp=between) == [1]
    assert seqs(timestamp=between.replace(tzinfo=None)) == [1]  # naive means UTC
    assert seqs(timestamp=dt.datetime.now(dt.UTC)) == [1, 2]
    assert read_table_arrow(path, version=0)["seq"].to_pylist() == [1]
    with pytest.raises(ValueError, match="not both"):
        read_table(spark, path, NARROW, version=0, timestamp=between)
    with pytest.raises(ValueError, match="no version committed at or before 2020-01-01"):
        read_table(spark, path, NARROW, timestamp="2020-01-01T00:00:00Z")


@pytest.mark.spark
def test_failing_task_leaves_previous_version_and_no_files(spark, tmp_path):
    path = str(tmp_path / "t")
    write_table(
        narrow_df(spark, [(D1, "ns-a", 0, "old")]), path, mode="append", partition_by=["date", "ns"], schema=NARROW
    )
    files_before = sorted(p for p in Path(path).rglob("*.parquet"))

    @F.udf(StringType())
    def explode_on_13(seq):
        if seq == 13:
            raise RuntimeError("boom on row 13")
        return str(seq)

    # Four tasks: the others succeed and write their files before the job fails, so abort()
    # has files to delete.
    rows = [(D1, ns, i, None) for i in range(40) for ns in ("ns-a", "ns-b")]
    bad_df = narrow_df(spark, rows).repartition(4).withColumn("value", explode_on_13("seq"))
    with pytest.raises(Exception, match="boom on row 13"):
        write_table(
            bad_df, path, mode="overwrite", partition_by=["date", "ns"], replace_where={"date": D1}, schema=NARROW
        )

    assert table_version(path) == 0
    assert [r["value"] for r in read_table(spark, path, NARROW).collect()] == ["old"]
    assert sorted(Path(path).rglob("*.parquet")) == files_before


def _fail_with_a_task_left(spark, done_file):
    """Run a job whose first task fails while its second is busy; the second leaves ``done_file``
    when it ends, after the job has failed. Returns the job's ids."""

    def task(index, _rows):
        time.sleep(0.3)
        if index == 0:
            raise RuntimeError("boom in task 0")
        time.sleep(2)
        Path(done_file).write_text("done")
        return [index]

    before = job_ids(spark)
    with pytest.raises(Exception, match="boom in task 0"):
        spark.sparkContext.parallelize([0, 1], 2).mapPartitionsWithIndex(task).collect()
    return job_ids(spark) - before


@pytest.mark.spark
def test_a_failed_write_cleans_up_after_the_tasks_still_running(spark, tmp_path):
    """A failed job's task that had all its rows runs on and writes its files: the write's
    clean-up waits for every task of its job to end."""
    done = tmp_path / "done"
    jobs = _fail_with_a_task_left(spark, done)
    assert len(jobs) == 1
    assert not done.exists()  # the job failed while its second task was busy
    assert wait_for_tasks(spark, jobs) is True
    assert done.exists()


@pytest.mark.spark
def test_waiting_for_tasks_gives_up_after_its_timeout(spark, tmp_path):
    jobs = _fail_with_a_task_left(spark, tmp_path / "done")
    assert wait_for_tasks(spark, jobs, timeout_s=0.2) is False
    assert wait_for_tasks(spark, jobs) is True  # leave no task behind for the next test


@pytest.mark.spark
def test_null_in_not_null_column_fails_the_write(spark, tmp_path):
    path = str(tmp_path / "t")
    write_table(narrow_df(spark, [(D1, "ns-a", 0, "old")]), path, mode="append", partition_by=["date"], schema=NARROW)
    loose = StructType([StructField(f.name, f.dataType, True) for f in NARROW.fields])
    bad_df = spark.createDataFrame([(D1, "ns-a", None, "x")], loose)

    with pytest.raises(Exception, match="column seq is declared NOT NULL but has 1 null"):
        write_table(bad_df, path, mode="append", partition_by=["date"], schema=NARROW)

    assert table_version(path) == 0


# An expansion for the tests: a row (date, ns, first, count, value) stands for ``count`` NARROW rows
# with seq first .. first + count - 1. A value "null-seq" makes the expanded rows' seq null.
FEW = StructType(
    [
        StructField("date", DateType(), False),
        StructField("ns", StringType(), False),
        StructField("first", LongType(), False),
        StructField("count", LongType(), False),
        StructField("value", StringType(), True),
    ]
)


def _expand_spark(df):
    seq = F.explode(F.sequence("first", F.col("first") + F.col("count") - 1))
    return df.select("date", "ns", seq.alias("seq"), "value").select(
        "date", "ns", F.when(~F.col("value").eqNullSafe("null-seq"), F.col("seq")).alias("seq"), "value"
    )


def _expand_arrow(batch):
    import numpy as np
    import pyarrow.compute as pc

    counts = batch.column("count").to_numpy()
    index = pa.array(np.repeat(np.arange(batch.num_rows), counts))
    seq = np.repeat(batch.column("first").to_numpy(), counts) + (
        np.arange(int(counts.sum())) - np.repeat(np.cumsum(counts) - counts, counts)
    )
    value = batch.column("value").take(index)
    nulls = pc.equal(value, "null-seq").fill_null(False)
    yield pa.RecordBatch.from_arrays(
        [
            batch.column("date").take(index),
            batch.column("ns").take(index),
            pc.if_else(nulls, pa.scalar(None, pa.int64()), pa.array(seq)),
            value,
        ],
        names=["date", "ns", "seq", "value"],
    )


def _expansion():
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # tests are not a package workers import
    return RowExpansion(spark=_expand_spark, arrow=_expand_arrow)


@pytest.mark.spark
def test_an_expansion_writes_the_rows_it_stands_for(spark, tmp_path):
    path = str(tmp_path / "t")
    few_df = spark.createDataFrame(
        [(D1, "ns-a", 1, 3, "x"), (D1, "ns-b", 10, 2, None), (D2, "ns-a", 5, 1, "y")], FEW
    ).repartition(2)

    write_table(few_df, path, mode="append", partition_by=["date", "ns"], schema=NARROW, expansion=_expansion())

    want = _expand_spark(few_df)
    assert_df_equality(
        read_table(spark, path, NARROW), want.select(*NARROW.names), ignore_row_order=True, ignore_nullable=True
    )
    assert read_table(spark, path, NARROW).count() == 6
    # a rerun of one day replaces it with that day's expanded rows only
    write_table(
        few_df.where(F.col("date") == D1).where(F.col("ns") == "ns-a"),
        path,
        mode="overwrite",
        partition_by=["date", "ns"],
        replace_where={"date": D1},
        schema=NARROW,
        expansion=_expansion(),
    )
    assert sorted((r["date"], r["seq"]) for r in read_table(spark, path, NARROW).collect()) == [
        (D1, 1),
        (D1, 2),
        (D1, 3),
        (D2, 5),
    ]


@pytest.mark.spark
def test_an_expansion_is_checked_like_any_write(spark, tmp_path):
    path = str(tmp_path / "t")
    write_table(narrow_df(spark, [(D1, "ns-a", 0, "old")]), path, mode="append", partition_by=["date"], schema=NARROW)
    few_df = spark.createDataFrame([(D1, "ns-a", 1, 2, "x"), (D1, "ns-a", 7, 2, "null-seq")], FEW)

    # a null the expanded rows hold in a NOT NULL column fails the write in its task
    with pytest.raises(Exception, match="column seq is declared NOT NULL but has 2 null"):
        write_table(few_df, path, mode="append", partition_by=["date"], schema=NARROW, expansion=_expansion())
    # the expansion's columns are checked before any task runs
    wrong = RowExpansion(spark=lambda df: _expand_spark(df).withColumnRenamed("seq", "sequence"), arrow=_expand_arrow)
    with pytest.raises(SchemaMismatchError, match="missing columns \\['seq'\\]"):
        write_table(few_df, path, mode="append", partition_by=["date"], schema=NARROW, expansion=wrong)

    assert table_version(path) == 0
    assert [r["value"] for r in read_table(spark, path, NARROW).collect()] == ["old"]
    assert len(list(Path(path).rglob("*.parquet"))) == 1


@pytest.mark.spark
def test_schema_mismatch_is_a_clear_error(spark, tmp_path):
    path = str(tmp_path / "t")
    good_df = narrow_df(spark, [(D1, "ns-a", 1, "x")])
    with pytest.raises(SchemaMismatchError, match=r"missing columns \['value'\]"):
        write_table(good_df.drop("value"), path, mode="append", schema=NARROW)
    with pytest.raises(SchemaMismatchError, match=r"unexpected columns \['extra'\]"):
        write_table(good_df.withColumn("extra", F.lit(1)), path, mode="append", schema=NARROW)
    with pytest.raises(SchemaMismatchError, match="column seq is string, declared bigint"):
        write_table(good_df.withColumn("seq", F.col("seq").cast("string")), path, mode="append", schema=NARROW)
    with pytest.raises(SchemaMismatchError, match="partition column nope is not in the schema"):
        write_table(good_df, path, mode="append", partition_by=["nope"], schema=NARROW)
    assert not table_exists(path)

    # Lossless widening is applied: an int seq is written as the declared bigint.
    write_table(
        good_df.withColumn("seq", F.col("seq").cast("int")), path, mode="append", partition_by=["date"], schema=NARROW
    )

    changed = StructType([*NARROW.fields[:3], StructField("value", LongType(), True)])
    with pytest.raises(SchemaMismatchError, match="column value is string in the table, declared bigint"):
        write_table(
            good_df.withColumn("value", F.lit(1).cast("bigint")),
            path,
            mode="append",
            partition_by=["date"],
            schema=changed,
        )
    with pytest.raises(SchemaMismatchError, match="column value is string in the table, declared bigint"):
        read_table(spark, path, changed)
    with pytest.raises(SchemaMismatchError, match=r"partitioned by \['date'\]"):
        write_table(good_df, path, mode="append", partition_by=["date", "ns"], schema=NARROW)
    assert table_version(path) == 0


@pytest.mark.spark
def test_empty_write_creates_table_and_empty_reads_keep_schema(spark, tmp_path):
    path = str(tmp_path / "t")
    assert not table_exists(path)
    with pytest.raises(FileNotFoundError):
        read_table(spark, path, NARROW)

    write_table(
        narrow_df(spark, []), path, mode="overwrite", partition_by=["date"], replace_where={"date": D1}, schema=NARROW
    )

    assert table_exists(path) and table_version(path) == 0
    assert_df_equality(read_table(spark, path, NARROW), spark.createDataFrame([], NARROW))
    write_table(narrow_df(spark, [(D1, "ns-a", 1, None)]), path, mode="append", partition_by=["date"], schema=NARROW)
    assert read_table(spark, path, NARROW, where={"date": D2}).count() == 0
    assert read_table(spark, path, NARROW, where={"date": [D1, D2], "value": None}).count() == 1
    assert read_table_arrow(path, columns=["seq"], filters=[("date", "=", D1)]).to_pylist() == [{"seq": 1}]


# --- Task-side helpers (no Spark) --------------------------------------------------------------


def test_split_by_partition_groups_rows_and_nulls():
    batch = pa.record_batch({"ns": ["a", "b", "a", None], "v": [1, 2, 3, 4]})

    groups = {key: part["v"].to_pylist() for key, part in split_by_partition(batch, ("ns",))}

    assert groups == {("a",): [1, 3], ("b",): [2], (None,): [4]}


def test_check_not_null_names_nested_paths():
    schema = StructType([StructField("q", ArrayType(StructType([StructField("b", StringType(), False)]), True), True)])
    ok = pa.record_batch({"q": pa.array([None, [None, {"b": "x"}]], pa.list_(pa.struct([("b", pa.string())])))})
    bad = pa.record_batch({"q": pa.array([[{"b": None}]], pa.list_(pa.struct([("b", pa.string())])))})

    check_not_null(ok, schema)  # a null list and a null struct element are allowed
    with pytest.raises(ValueError, match=r"column q\[\]\.b is declared NOT NULL"):
        check_not_null(bad, schema)

    maps = StructType([StructField("m", MapType(LongType(), StringType(), False), True)])
    map_type = pa.map_(pa.int64(), pa.string())
    check_not_null(pa.record_batch({"m": pa.array([None, [(1, "a")], []], map_type)}), maps)
    with pytest.raises(ValueError, match=r"column m\{value\} is declared NOT NULL"):
        check_not_null(pa.record_batch({"m": pa.array([[(1, "a"), (2, None)]], map_type)}), maps)


def test_stats_bounds_cover_microseconds_and_skip_unsafe_values():
    ts = ColumnStats(pa.timestamp("us", tz="UTC"))
    ts.update(pa.array([1_500, None, 2_000_001], pa.timestamp("us", tz="UTC")))
    text = ColumnStats(pa.string())
    text.update(pa.array(["b", "a" * 40]))
    floats = ColumnStats(pa.float64())
    floats.update(pa.array([1.0, float("nan")]))

    assert (ts.min, ts.max, ts.null_count) == ("1970-01-01T00:00:00.001Z", "1970-01-01T00:00:02.001Z", 1)
    assert (text.min, text.max) == ("a" * 32, "b")
    assert (floats.min, floats.max) == (None, None)


def test_empty_string_partition_value_is_refused():
    assert encode_partition_value(D1) == "2026-11-21"
    assert encode_partition_value(None) is None
    with pytest.raises(ValueError, match="empty string"):
        encode_partition_value("")


# --- Exit codes of processes that used deltalake ------------------------------------------------

_EXIT_SCRIPT = textwrap.dedent(
    """
    import sys
    import pyarrow as pa
    from deltalake import write_deltalake
    from jobs.lake.tables import read_table_arrow
    path = sys.argv[1]
    write_deltalake(path, pa.table({"x": list(range(1000)), "p": ["a", "b"] * 500}), partition_by=["p"])
    assert read_table_arrow(path, filters=[("p", "=", "a")]).num_rows == 500
    sys.exit(int(sys.argv[2]))
    """
)


def _run_exit_script(tmp_path: Path, runs: int, code: int) -> list[int]:
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[4])}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _EXIT_SCRIPT, str(tmp_path / f"t{i}"), str(code)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        for i in range(runs)
    ]
    results = []
    for proc in procs:
        _, err = proc.communicate(timeout=120)
        results.append((proc.returncode, err.decode(errors="replace")[-500:]))
    assert all(rc == code for rc, _ in results), results
    return [rc for rc, _ in results]


def test_process_reading_delta_exits_zero(tmp_path):
    # Reading through deltalake's Python filesystem aborted about every other run with 134 at exit
    # (jobs/lake/delta/arrow.py), so 6 runs catch that regression ~98% of the time.
    assert _run_exit_script(tmp_path, runs=6, code=0) == [0] * 6


def test_process_keeps_its_own_nonzero_exit_code(tmp_path):
    assert _run_exit_script(tmp_path, runs=2, code=3) == [3, 3]


def test_a_null_struct_with_not_null_children_is_written():
    """An event without data_version: Spark's null struct carries null children under it."""
    from jobs.lake.delta.write import conform_batch

    dv = pa.struct([pa.field("timestamp", pa.int64(), False), pa.field("counter", pa.int64(), False)])
    src = pa.StructArray.from_arrays(
        [pa.array([1, None, 3]), pa.array([2, None, 4])],
        names=["timestamp", "counter"],
        mask=pa.array([False, True, False]),
    )
    batch = pa.RecordBatch.from_arrays([src, pa.array([1, 2, 3], pa.int32())], names=["data_version", "x"])
    schema = pa.schema([pa.field("data_version", dv, True), pa.field("x", pa.int64(), False)])
    out = conform_batch(batch, schema)
    assert out.schema == schema
    assert out.column(0).to_pylist() == [{"timestamp": 1, "counter": 2}, None, {"timestamp": 3, "counter": 4}]


def test_a_new_nullable_column_is_added_to_an_existing_table(spark, tmp_path):
    # a newer event format adds an optional key: last night's table gains the column, its rows read null
    path = str(tmp_path / "t")
    write_table(
        narrow_df(spark, [(D1, "ns-a", 1, "old")]), path, mode="append", partition_by=["date", "ns"], schema=NARROW
    )
    wider = StructType(NARROW.fields[:3] + [StructField("extra_ms", LongType(), True)] + NARROW.fields[3:])
    write_table(
        spark.createDataFrame([(D2, "ns-a", 2, 5, "new")], wider),
        path,
        mode="overwrite",
        partition_by=["date", "ns"],
        replace_where={"date": D2},
        schema=wider,
    )

    rows = sorted_rows(read_table(spark, path, wider), "seq")
    assert [(r["seq"], r["extra_ms"], r["value"]) for r in rows] == [(1, None, "old"), (2, 5, "new")]
    # a new NOT NULL column is still refused
    strict = StructType(wider.fields + [StructField("must", LongType(), False)])
    with pytest.raises(SchemaMismatchError, match="must"):
        write_table(
            spark.createDataFrame([(D2, "ns-a", 3, 5, "x", 1)], strict),
            path,
            mode="append",
            partition_by=["date", "ns"],
            schema=strict,
        )
