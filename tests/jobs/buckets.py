"""Events and lakes in the test session's S3 server (the ``s3_server`` fixture of ``tests/conftest.py``).

:func:`on_s3` makes the process (and a Spark session) reach the server, :func:`upload` copies a
local folder into the bucket, :func:`config_file` writes the ``--config`` a subprocess gets.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow.fs as pafs

from jobs.storage import settings
from jobs.storage.s3proxy import S3ProxyServer

BUCKET = "nsaudit"


def server_settings(server: S3ProxyServer) -> settings.StorageSettings:
    """The server's settings, resolved without this machine's AWS environment."""
    return settings.resolve(server.storage_config(), {})


@contextmanager
def on_s3(server: S3ProxyServer, spark=None) -> Iterator[settings.StorageSettings]:
    """Inside, the process's object-store settings are the server's (and ``spark``'s S3A ones)."""
    from jobs.spark.s3a import use_s3a

    previous = settings._current
    current = settings.use(server_settings(server))
    if spark is not None:
        use_s3a(spark, current)
    try:
        yield current
    finally:
        settings._current = previous


def upload(server: S3ProxyServer, local: Path, key: str) -> str:
    """Copy the folder ``local`` to ``s3a://nsaudit/<key>``; returns that URI."""
    fs = server_settings(server).store.filesystem()
    pafs.copy_files(str(local), f"{BUCKET}/{key}", source_filesystem=pafs.LocalFileSystem(), destination_filesystem=fs)
    return f"s3a://{BUCKET}/{key}"


def config_file(server: S3ProxyServer, path: Path, extra: str = "", **storage: str) -> Path:
    """A ``--config`` for a subprocess: Spark small, ``[storage]`` the server's (keys overridden by
    ``storage``: ``credentials_file``, ``endpoint``), and ``extra`` TOML."""
    values = {"endpoint": server.endpoint, "credentials_file": str(server.credentials_file()), **storage}
    path.write_text(
        '[spark]\nmaster = "local[2]"\ndriver_memory = "1g"\nshuffle_partitions = 2\n'
        f"{extra}\n"
        "[storage]\npath_style = true\ntimeout_ms = 5000\nretries = 1\n"
        + "".join(f'{key} = "{value}"\n' for key, value in values.items())
    )
    return path


def subprocess_env() -> dict[str, str]:
    """The environment of a subprocess audit: no AWS variables of this machine, no Spark of the test session."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    for name in (
        "PYSPARK_PYTHON",
        "PYSPARK_DRIVER_PYTHON",
        "PYSPARK_GATEWAY_PORT",
        "PYSPARK_GATEWAY_SECRET",
        "SPARK_MASTER_URL",
    ):
        env.pop(name, None)
    return env
