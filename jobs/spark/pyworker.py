"""Set-up for Spark's Python workers, called at the start of every task body this project runs.

:func:`keep_archive_listings` spares each task a re-read of Spark's zip archives. Executors may
not have this project installed; the modules that call this ship it by value.
"""

from __future__ import annotations

import sys
import zipimport


def _keep_listing() -> None:
    """A zipimporter's ``invalidate_caches`` that keeps the listing it read."""


def keep_archive_listings() -> int:
    """Make the zip importers on ``sys.path`` keep their listings across Spark tasks (idempotent).

    PySpark's worker calls ``importlib.invalidate_caches()`` before each task
    (``pyspark.worker_util.setup_spark_files``). On Python 3.11 that makes every ``zipimporter`` on
    ``sys.path`` read its archive's whole central directory again, in Python. Spark puts three
    archives there (``pyspark.zip``, py4j's zip and the spark-core jar, thousands of entries in all):
    a cost per task that can exceed what many of this project's write tasks take to do their work.
    Those archives belong to the Spark installation and do not change while a worker lives, so the
    importers already on the path keep the listing they have. An archive that appears on the path
    later (``addPyFile``) keeps Python's behaviour.

    Returns:
        How many importers were changed by this call (0 once the worker has been set up).
    """
    changed = 0
    for finder in list(sys.path_importer_cache.values()):
        if isinstance(finder, zipimport.zipimporter) and finder.__dict__.get("invalidate_caches") is not _keep_listing:
            finder.invalidate_caches = _keep_listing  # type: ignore[method-assign]  # this importer's own, shadowing the class's
            changed += 1
    return changed
