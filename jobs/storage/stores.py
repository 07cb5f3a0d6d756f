"""An S3-compatible object store as a pyarrow filesystem, and the filesystem of any path.

Task side: the modules whose functions run in Spark tasks (segment reads, data-file writes) take an
:class:`ObjectStore` in their plans and open files through :func:`filesystem_of`, so executors
reach the bucket with the driver's settings. Shipped to executors by value with those modules, it
imports only pyarrow.

A path is a local absolute path or an ``s3a://bucket/key`` URI (``jobs.storage.locations``
normalises what users type).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import pyarrow.fs as pafs

OBJECT_SCHEMES = ("s3a://", "s3://")


@dataclass(frozen=True)
class ObjectStore:
    """How to reach an S3-compatible store: plain data, safe to pickle into a task.

    The credentials are left out of ``repr`` so that no error message or log line built from a
    plan shows them.

    Attributes:
        endpoint: ``http(s)://host:port`` of an S3-compatible server; "" for AWS itself.
        region: the signing region.
        path_style: the bucket in the URL path (``host/bucket/key``), as most S3-compatible
            servers want, instead of the host name.
        access_key: the access key id; "" leaves credentials to the AWS SDK's default chain
            (an instance role, ``~/.aws``).
        secret_key: its secret.
        session_token: a temporary credential's token, or "".
        timeout_s: connect and request timeout of one attempt.
        retries: attempts after the first one fails.
    """

    endpoint: str = ""
    region: str = "us-east-1"
    path_style: bool = False
    access_key: str = field(default="", repr=False)
    secret_key: str = field(default="", repr=False)
    session_token: str = field(default="", repr=False)
    timeout_s: float = 30.0
    retries: int = 3

    @property
    def secure(self) -> bool:
        """Whether requests go over https (an ``http://`` endpoint turns TLS off)."""
        return not self.endpoint.startswith("http://")

    def filesystem(self) -> pafs.FileSystem:
        """pyarrow's own S3 filesystem (C++).

        A C++ filesystem keeps Arrow's I/O threads free of Python objects (see
        ``jobs.lake.delta.arrow.arrow_dataset`` for what a Python one does at exit). Made anew
        on each call (a few microseconds): a cache would be pickled into every task by value.
        """
        host = self.endpoint.split("://", 1)[-1].rstrip("/")
        if self.path_style and not host:
            # pyarrow addresses AWS by bucket host name unless given an endpoint
            host = f"s3.{self.region}.amazonaws.com"
        return pafs.S3FileSystem(
            access_key=self.access_key or None,
            secret_key=self.secret_key or None,
            session_token=self.session_token or None,
            region=self.region,
            endpoint_override=host or None,
            scheme="https" if self.secure else "http",
            force_virtual_addressing=not self.path_style,
            connect_timeout=self.timeout_s,
            request_timeout=self.timeout_s,
            retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=self.retries + 1),
            # the lake's layout never needs a directory object, and a bucket is never made here
            allow_bucket_creation=False,
            allow_bucket_deletion=False,
        )


def is_object_path(path: str) -> bool:
    """Whether ``path`` is an object-store URI (``s3a://`` or ``s3://``)."""
    return path.startswith(OBJECT_SCHEMES)


def filesystem_of(path: str, store: ObjectStore | None) -> tuple[pafs.FileSystem, str]:
    """The filesystem holding ``path`` and the path within it (``bucket/key`` on a store).

    Raises:
        ValueError: an object-store path without a store to reach it.
    """
    if is_object_path(path):
        if store is None:
            raise ValueError(f"{path}: no object-store settings to reach it")
        return store.filesystem(), path.split("://", 1)[1]
    return pafs.LocalFileSystem(), path


def make_dirs(fs: pafs.FileSystem, path: str) -> None:
    """Create a local folder and its parents; nothing on an object store, which has no folders
    (a directory marker object would only be listed among the data)."""
    if isinstance(fs, pafs.LocalFileSystem):
        fs.create_dir(path, recursive=True)


def read_bytes(path: str, store: ObjectStore | None) -> bytes:
    """The whole content of a file, as stored: a ``.gz`` file's compressed bytes (Arrow would
    otherwise inflate it by its name, and a corrupt stream could not be read as far as it goes)."""
    fs, inner = filesystem_of(path, store)
    with fs.open_input_stream(inner, compression=None) as stream:
        data: bytes = stream.read()
    return data
