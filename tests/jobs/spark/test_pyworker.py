"""jobs.spark.pyworker: zip importers keep their listings through importlib.invalidate_caches()."""

from __future__ import annotations

import importlib
import sys
import zipfile
import zipimport

import pytest

from jobs.spark.pyworker import keep_archive_listings


@pytest.fixture
def archive_on_path(tmp_path, monkeypatch):
    """A zip of two modules on sys.path, one of them imported, and a count of directory reads."""
    path = tmp_path / "code.zip"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("nsaudit_zipped_one.py", "VALUE = 1\n")
        z.writestr("nsaudit_zipped_two.py", "VALUE = 2\n")
    monkeypatch.syspath_prepend(str(path))
    monkeypatch.setattr(sys, "path_importer_cache", dict(sys.path_importer_cache))
    reads = []
    real_read = zipimport._read_directory
    monkeypatch.setattr(zipimport, "_read_directory", lambda archive: reads.append(archive) or real_read(archive))
    importlib.import_module("nsaudit_zipped_one")
    yield str(path), reads
    for name in ("nsaudit_zipped_one", "nsaudit_zipped_two"):
        sys.modules.pop(name, None)


def test_invalidate_caches_no_longer_rereads_the_archive(archive_on_path):
    path, reads = archive_on_path
    importlib.invalidate_caches()
    if sys.version_info < (3, 12):  # what Spark's per-task call costs without the fix
        assert reads.count(path) >= 1
    assert keep_archive_listings() >= 1
    before = reads.count(path)

    importlib.invalidate_caches()
    importlib.invalidate_caches()

    assert reads.count(path) == before
    # the kept listing still serves imports from the archive
    assert importlib.import_module("nsaudit_zipped_two").VALUE == 2


def test_a_second_call_changes_nothing(archive_on_path):
    assert keep_archive_listings() >= 1
    assert keep_archive_listings() == 0


def test_directories_on_the_path_keep_pythons_behaviour(tmp_path, monkeypatch):
    """Only zip importers are changed: a new module in a folder on the path is still found."""
    monkeypatch.syspath_prepend(str(tmp_path))
    keep_archive_listings()
    (tmp_path / "nsaudit_late_module.py").write_text("VALUE = 3\n")
    importlib.invalidate_caches()
    try:
        assert importlib.import_module("nsaudit_late_module").VALUE == 3
    finally:
        sys.modules.pop("nsaudit_late_module", None)
