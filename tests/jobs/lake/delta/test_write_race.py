"""Two writers creating one table at the same moment (two audits of a day into a new lake,
docs/audit.md, "Concurrent audits"): the table holds one writer's rows, never both."""

from __future__ import annotations

import json
import threading
from pathlib import Path

import pyarrow as pa
from deltalake import DeltaTable

from jobs.lake.delta.write import WritePlan, commit_files, write_local_files

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


def _write_at_once(path: Path) -> list[BaseException]:
    """Two overwrites of day ``d1`` into the absent table ``path``, committed together; their errors."""
    plan = WritePlan(str(path), "overwrite", ("day",), {"day": "d1"}, SCHEMA_JSON)
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def write(writer: int) -> None:
        written = write_local_files(pa.table({"writer": [writer, writer], "day": ["d1", "d1"]}), plan)
        barrier.wait()
        try:
            commit_files(plan, written)
        except BaseException as exc:  # noqa: BLE001 - handed to the test's assertion
            errors.append(exc)

    threads = [threading.Thread(target=write, args=(writer,)) for writer in (1, 2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return errors


def test_two_writers_creating_a_table_at_once_leave_one_writers_rows(tmp_path):
    for n in range(TRIES):
        path = tmp_path / f"table{n}"
        assert _write_at_once(path) == [], n
        table = DeltaTable(str(path))
        assert sorted(table.to_pyarrow_table()["writer"].to_pylist()) in ([1, 1], [2, 2]), (n, table.history())
        # the loser's commit replaced the winner's files: one CREATE TABLE, then a WRITE
        assert [c["operation"] for c in table.history()].count("CREATE TABLE") == 1, (n, table.history())
