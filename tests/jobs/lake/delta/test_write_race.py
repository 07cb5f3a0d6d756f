"""Writers creating one table at the same moment (two audits of a day into a new lake,
docs/audit.md, "Concurrent audits"): the table holds one writer's rows, never both, on a local disk
and in a bucket of a real S3 server (S3Proxy, the ``s3_server`` fixture)."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from jobs.lake.delta.arrow import read_table_arrow
from jobs.lake.delta.commit import commit_files
from jobs.lake.delta.health import storage_options
from jobs.lake.delta.write import WritePlan, write_local_files
from jobs.lake.tables import object_store
from tests.jobs.buckets import BUCKET, on_s3

SCHEMA_JSON = json.dumps(
    {
        "type": "struct",
        "fields": [
            {"name": "writer", "type": "long", "nullable": False, "metadata": {}},
            {"name": "day", "type": "string", "nullable": False, "metadata": {}},
        ],
    }
)
# The race is between deltalake's check that no table exists and its commit of version 0: two
# threads released together hit it in about half the tries, so a few dozen tries find a doubled day.
TRIES = 30
# In a bucket, a writer's read of the log while another's commit is in flight may list it short
# (jobs.lake.delta.commit says why): with six writers a round, about two rounds in three failed a
# writer before commits were settled by their version file, so eight rounds all but always do.
BUCKET_ROUNDS, BUCKET_WRITERS = 8, 6


def _write_at_once(path: Path | str, writers: int = 2) -> tuple[list[BaseException], dict[int, int]]:
    """Overwrites of day ``d1`` into the absent table ``path``, committed together; their errors,
    and the version each writer that succeeded committed (writer -> version)."""
    plan = WritePlan(str(path), "overwrite", ("day",), {"day": "d1"}, SCHEMA_JSON, store=object_store(str(path)))
    barrier = threading.Barrier(writers)
    errors: list[BaseException] = []
    versions: dict[int, int] = {}

    def write(writer: int) -> None:
        written = write_local_files(pa.table({"writer": [writer, writer], "day": ["d1", "d1"]}), plan)
        barrier.wait()
        try:
            versions[writer] = commit_files(plan, written)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's assertion
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(writer,)) for writer in range(1, writers + 1)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors, versions


def _assert_last_writers_rows(table: DeltaTable, rows: list[int], versions: dict[int, int], n: int) -> None:
    """Each writer committed a version of its own, the table holds the rows of the one that came
    last, and only the first writer created it (the others' commits replaced its files)."""
    history = table.history()
    assert sorted(versions.values()) == list(range(len(versions))), (n, versions, history)
    assert rows == [max(versions, key=versions.__getitem__)] * 2, (n, rows, versions, history)
    assert [c["operation"] for c in history].count("CREATE TABLE") == 1, (n, history)


def test_two_writers_creating_a_table_at_once_leave_one_writers_rows(tmp_path):
    for n in range(TRIES):
        path = tmp_path / f"table{n}"
        errors, versions = _write_at_once(path)
        assert errors == [], n
        table = DeltaTable(str(path))
        _assert_last_writers_rows(table, read_table_arrow(path)["writer"].to_pylist(), versions, n)


def test_writers_creating_a_bucket_table_at_once_all_commit_and_leave_one_writers_rows(s3_server):
    with on_s3(s3_server):
        for n in range(BUCKET_ROUNDS):
            path = f"s3a://{BUCKET}/write-race/table{n}"
            errors, versions = _write_at_once(path, BUCKET_WRITERS)
            # no writer failed: whoever lost version 0, or a later one, committed on the newest
            assert [f"{type(e).__name__}: {e}" for e in errors] == [], n
            table = DeltaTable(path, storage_options=storage_options(path))
            _assert_last_writers_rows(table, read_table_arrow(path)["writer"].to_pylist(), versions, n)
