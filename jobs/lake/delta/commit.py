"""The driver's side of a write: the data files its tasks wrote become ONE Delta version.

:func:`commit_files` commits with ``deltalake`` (delta-rs) in the driver's process, creating the
table when there is none, and committing again on the newest version when a concurrent writer took
the one it tried (docs/audit.md, "Concurrent audits").

Whether a commit landed is settled by reading the log file of the version it tried to create (one
GET, no listing), not by ``deltalake``'s answer. Around its put, ``deltalake`` lists ``_delta_log``
again: a creator that lost version 0 loads the winner's table, and every commit loads the version it
wrote. A listing made while another writer's commit is in flight can come back short: S3Proxy 4.0's
filesystem store stops listing a folder at an entry that vanished while it was listed, and the
temporary file of a concurrent put is such an entry. ``deltalake`` then raises "No files in log
segment" or "Invalid table version" for a commit that was written, or lost, cleanly. A version file
that holds this commit's id is a success; one that holds another writer's is a lost race; none at
all is a failure. The same read settles a put whose answer was lost on the network.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from typing import Any, cast

from deltalake import DeltaTable, Schema
from deltalake.exceptions import CommitFailedError
from deltalake.transaction import AddAction, CommitProperties, RemoveAction, create_table_with_add_actions
from pyspark.sql.types import StructType

from common.errors import LakeDamaged
from jobs.lake.delta.arrow import is_table, open_table
from jobs.lake.delta.health import problem_line, storage_options
from jobs.lake.delta.write import WritePlan
from jobs.storage.stores import filesystem_of

WRITER = "nsaudit_delta"  # named in every commit's userMetadata

# commits of one write against the latest version before a concurrent writer's win is an error
COMMIT_ATTEMPTS = 10
# opening a table that exists: tries while its log lists short (another writer's commit in flight)
OPEN_ATTEMPTS = 5
OPEN_PAUSE_S = 0.05  # doubled after each try

log = logging.getLogger(__name__)


def commit_files(plan: WritePlan, written: list[dict[str, Any]]) -> int:
    """Commit ``written`` and the plan's extra files as ONE Delta transaction (on the driver).

    The extra files are any written beforehand by other tasks (ingest's fast path). An overwrite with
    ``replace_where`` removes those partitions' files in the same commit. If the commit fails, every
    file is deleted and the table stays at its previous version.

    The commit runs with ``deltalake`` (delta-rs) in the driver's process. Spark 4's Python data
    source API does the same with a writer class, but runs the commit in a separate Python worker
    that must import ``deltalake`` every time: about half a second more per write, and a nightly
    audit makes dozens of writes.

    Returns:
        The version this commit created.
    """
    try:
        return _commit(plan, written + list(plan.extra_files))
    except BaseException:
        try:
            delete_files(plan, written + list(plan.extra_files))
        except OSError as exc:  # as in delete_failed_write: orphans, which vacuum removes
            log.warning("could not delete the files of a failed commit to %s: %s", plan.path, type(exc).__name__)
        raise


def _commit(plan: WritePlan, files: list[dict[str, Any]]) -> int:
    adds = [
        AddAction(
            path=f["path"],
            size=f["size"],
            partition_values=f["partition_values"],
            modification_time=f["modification_time"],
            data_change=True,
            stats=f["stats"],
        )
        for f in files
    ]
    schema = Schema.from_json(plan.schema_json)
    commit_id = uuid.uuid4().hex
    if not is_table(plan.path) and _create_with(plan, schema, adds, commit_id):
        return 0
    return _commit_on_latest(plan, schema, adds, commit_id)


def _create_with(plan: WritePlan, schema: Schema, adds: list[AddAction], commit_id: str) -> bool:
    """Create the table with ``adds`` as its first version; False when another writer created it
    meanwhile (then the adds are committed to its table as to any existing one)."""
    # No retry: deltalake would retry a create that lost version 0 as version 1, a second CREATE
    # TABLE whose adds sit beside the first writer's (a day's rows twice). Losing it fails here,
    # and the adds go through _commit_on_latest, which replaces that writer's files.
    props = CommitProperties(custom_metadata={"userMetadata": _commit_note(plan, commit_id)}, max_commit_retries=0)
    try:
        create_table_with_add_actions(
            plan.path,
            schema,
            adds,
            mode="error",
            partition_by=list(plan.partition_by),
            commit_properties=props,
            storage_options=storage_options(plan.path),
        )
        return True
    except Exception as exc:  # deltalake's own error types
        # Another writer (a second audit of the day) created the table between the check and
        # this commit: deltalake's check saw it ("already exists"), or its version 0 came first
        # (CommitFailedError, or whatever deltalake's read of that writer's table raised).
        landed = _landed(plan, 0, commit_id)
        if landed:
            log.info("%s: created; deltalake's read after the commit failed (%s)", plan.path, problem_line(exc))
            return True
        if landed is None and not (isinstance(exc, CommitFailedError) or "already exists" in str(exc)):
            raise
        log.info("%s was created by another writer meanwhile; committing to it", plan.path)
        return False


def _commit_on_latest(plan: WritePlan, schema: Schema, adds: list[AddAction], commit_id: str) -> int:
    """Commit ``adds`` to the existing table, on its latest version (up to ``COMMIT_ATTEMPTS``
    times); returns the version committed."""
    # replace_where is an overwrite whose partition filters select the files to remove, in the
    # same transaction as the adds; delta-rs matches a null partition with ''.
    filters = [(k, "=", "" if v is None else v) for k, v in plan.replace_where.items()] or None
    mode = "overwrite" if plan.mode == "overwrite" else "append"
    # delta-rs would retry a commit that lost its version on the next one with the removes it
    # computed before, so an overwrite racing another writer's adds to the same partition would
    # keep both (a day's rows twice). So each attempt is made once (no retry of its own) against
    # the latest version, whose files in the partition it then removes: the last writer's rows win.
    once = CommitProperties(custom_metadata={"userMetadata": _commit_note(plan, commit_id)}, max_commit_retries=0)
    for attempt in range(1, COMMIT_ATTEMPTS + 1):
        table = _open_existing(plan.path)
        version = table.version() + 1
        table_schema = StructType.fromJson(json.loads(table.schema().to_json()))
        # write_table checked this before the job ran; checked again here because another writer
        # may have replaced the table meanwhile, and delta-rs commits files of any schema without
        # comparing it with the table's.
        if table_schema != StructType.fromJson(json.loads(plan.schema_json)):
            raise ValueError(f"{plan.path}: table schema changed during the write; nothing committed")
        try:
            table.create_write_transaction(
                cast("list[AddAction | RemoveAction]", adds),
                mode,
                schema,
                list(plan.partition_by),
                partition_filters=filters,
                commit_properties=once,
            )
            return version
        except Exception as exc:  # deltalake's own error types
            landed = _landed(plan, version, commit_id)
            if landed:
                log.info(
                    "%s: version %d committed; deltalake's read after it failed (%s)",
                    plan.path,
                    version,
                    problem_line(exc),
                )
                return version
            if (landed is None and not isinstance(exc, CommitFailedError)) or attempt == COMMIT_ATTEMPTS:
                raise
            log.info(
                "%s: version %d was taken by a concurrent writer; committing again on the latest (attempt %d)",
                plan.path,
                version,
                attempt + 1,
            )
    raise AssertionError("unreachable: the last attempt returns or raises")


def _open_existing(root: str) -> DeltaTable:
    """The latest version of a table known to exist, opened again a few times while its log reads
    as missing or unreadable (a short listing: see the module's docstring)."""
    pause = OPEN_PAUSE_S
    for _ in range(OPEN_ATTEMPTS - 1):
        try:
            return open_table(root)
        except (FileNotFoundError, LakeDamaged):
            time.sleep(pause)
            pause *= 2
    return open_table(root)


def _landed(plan: WritePlan, version: int, commit_id: str) -> bool | None:
    """Whether the log file of ``version`` is this commit's (True) or another writer's (False);
    None when there is none, or it cannot be read. One GET of that file, no listing."""
    fs, root = filesystem_of(plan.path, plan.store)
    try:
        with fs.open_input_stream(f"{root}/_delta_log/{version:020d}.json", compression=None) as stream:
            text = stream.read().decode("utf-8", "replace")
    except OSError:  # FileNotFoundError among them
        return None
    return commit_id in text


def delete_files(plan: WritePlan, files: list[dict[str, Any]]) -> None:
    """Delete data files that were written for the table but not committed."""
    fs, root = filesystem_of(plan.path, plan.store)
    for f in files:
        try:
            fs.delete_file(f"{root}/{f['path']}")
        except FileNotFoundError:
            pass


def _commit_note(plan: WritePlan, commit_id: str) -> str:
    # the id lets _landed tell this commit's version file from another writer's
    return json.dumps({"writer": WRITER, "mode": plan.mode, "replace_where": plan.replace_where, "commit": commit_id})
