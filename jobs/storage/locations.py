"""What ``--events`` and ``--lake`` may name: a local folder (a plain path or ``file://``) or a
prefix of an S3 bucket (``s3a://bucket/prefix``, ``s3://`` taken as the same).

Every path handed on is normalised here once: a local one absolute (executors resolve relative
paths against their own working directory), an object-store one as ``s3a://bucket/key`` without a
trailing slash, the spelling Spark's S3A filesystem, ``deltalake`` and
:mod:`jobs.storage.stores` all read.

Example:
    >>> normalize("s3://audit-lake/prod/")
    's3a://audit-lake/prod'
    >>> join("s3a://audit-lake/prod", "events")
    's3a://audit-lake/prod/events'
"""

from __future__ import annotations

import os
import posixpath
import re

from jobs.storage.stores import is_object_path

# S3's bucket naming rules (3-63 characters, lower case, digits, dots and hyphens, a letter or digit
# at both ends); a name outside them is a typo, better refused before any request.
_BUCKET = re.compile(r"[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]")
_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*)://")


def check(text: str) -> str:
    """``text`` normalised, or ValueError saying why it names no usable location.

    Raises:
        ValueError: an unsupported scheme (``hdfs://``, ``gs://``), or an ``s3a://`` URI without a
            valid bucket name.
    """
    scheme = _SCHEME.match(text)
    if scheme and scheme.group(1).lower() not in ("file", "s3", "s3a"):
        raise ValueError(
            f"{text}: unsupported scheme {scheme.group(1)}:// (a local path, file://, or s3a://bucket/prefix)"
        )
    if is_object_path(text):
        bucket, _ = bucket_and_key(text)
        if "@" in bucket:
            # s3a://KEY:SECRET@bucket: the URI is not echoed, it may hold a secret
            raise ValueError(
                "credentials in an s3a:// URI are not accepted; give them in [storage] of the "
                "config or the AWS environment variables"
            )
        if not _BUCKET.fullmatch(bucket):
            raise ValueError(f"{text}: {bucket!r} is not an S3 bucket name (s3a://bucket/prefix)")
    return normalize(text)


def normalize(path: str | os.PathLike[str]) -> str:
    """A local path made absolute (``file://`` dropped), or ``s3a://bucket/key`` without a trailing
    slash or doubled slashes."""
    text = os.fspath(path)
    if is_object_path(text):
        bucket, key = bucket_and_key(text)
        return f"s3a://{bucket}/{key}" if key else f"s3a://{bucket}"
    if text.startswith("file://"):
        text = text[len("file://") :]
    return os.path.abspath(text)


def is_remote(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is on an object store (its files are not on this host's disk)."""
    return is_object_path(os.fspath(path))


def bucket_and_key(uri: str) -> tuple[str, str]:
    """``("bucket", "prefix/key")`` of an object-store URI; the key without leading or trailing slashes."""
    rest = uri.split("://", 1)[1]
    bucket, _, key = rest.partition("/")
    key = "/".join(part for part in key.split("/") if part)
    return bucket, key


def join(base: str | os.PathLike[str], *parts: str) -> str:
    """``base`` with ``parts`` appended (``/``-separated on an object store)."""
    base = normalize(base)
    if is_object_path(base):
        return posixpath.join(base, *parts)
    return os.path.join(base, *parts)


def for_spark(path: str) -> str:
    """The URI Spark reads a (normalised) path by: ``file://`` for a local one."""
    return path if is_object_path(path) else f"file://{path}"
