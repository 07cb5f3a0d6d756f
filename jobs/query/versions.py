"""The lake as it stood at an older version: ``nsaudit route|cluster|diff --version V``.

A version of the lake is a version of ``audit_runs``: each audit commits it once when it starts
(``running``) and once when it ends (``ok`` or ``failed``), so after an ``ok`` commit every table
holds exactly what that run left. Every other table is read at its last version committed at or
before that commit (Delta time travel by commit time), through ``deltalake`` whichever writer
wrote it. Versions whose files ``nsaudit lake vacuum`` has deleted can no longer be read, and
:class:`jobs.query.lookup.RouteLake` says so.
"""

from __future__ import annotations

import datetime as dt

from common.errors import UserError
from jobs import lake
from jobs.lake.tables import damaged, has_log, open_delta


class LakeVersion:
    """Which version of each table belongs to version ``version`` of ``audit_runs``.

    Raises (from the constructor):
        UserError: the lake has no such version of ``audit_runs``.
    """

    def __init__(self, lake_dir: str, version: int) -> None:
        self._commits: dict[str, dict[int, int]] = {}
        path = lake.table_path(lake_dir, lake.AUDIT_RUNS)
        commits = self._table_commits(path)
        if not commits:
            raise UserError(f"--version {version}: {lake_dir} has no {lake.AUDIT_RUNS} table; run nsaudit audit first")
        if version not in commits:
            raise UserError(
                f"--version {version}: {lake.AUDIT_RUNS} has versions {min(commits)} to {max(commits)} "
                f"(nsaudit lake history {lake.AUDIT_RUNS} --lake {lake_dir})"
            )
        self.version = version
        self.committed_ms = commits[version]

    def table_version(self, path: str) -> int | None:
        """The version of the table at ``path`` the lake had then; None when it did not exist yet."""
        at_or_before = [v for v, ms in self._table_commits(path).items() if ms <= self.committed_ms]
        return max(at_or_before) if at_or_before else None

    def _table_commits(self, path: str) -> dict[int, int]:
        if path not in self._commits:
            self._commits[path] = _commits(path)
        return self._commits[path]

    def describe(self) -> str:
        """``audit_runs`` version and its commit time, for answers and errors."""
        when = dt.datetime.fromtimestamp(self.committed_ms / 1000, dt.UTC)
        return f"{lake.AUDIT_RUNS} version {self.version} ({when.isoformat(timespec='seconds')})"


def _commits(path: str) -> dict[int, int]:
    """Version -> commit time (epoch ms) of a table; {} when there is no table.

    Raises:
        LakeDamaged: its log cannot be read.
    """
    if not has_log(path):
        return {}
    table = open_delta(path)
    try:
        return {c["version"]: c["timestamp"] for c in table.history()}
    except Exception as exc:  # noqa: BLE001 - deltalake's own error types
        raise damaged(path, exc) from None
