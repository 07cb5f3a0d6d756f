"""A store's failures as one line a user can act on, and the check a command makes before it
reads or writes anything.

pyarrow, ``deltalake`` and Hadoop's S3A each word a refused key, a missing bucket or a dead
endpoint their own way, over many lines (``deltalake``'s with terminal colours); :func:`describe`
makes one line of any of them, names the location and where the credentials came from, and never
a credential (:func:`jobs.storage.settings.redact`); :func:`one_line` picks the telling line of any
error of a run.
"""

from __future__ import annotations

import re

import pyarrow.fs as pafs

from common.errors import UserError
from jobs.storage import locations, settings
from jobs.storage.stores import filesystem_of

# (what to say, patterns of the libraries' wordings), checked in order
_KINDS = (
    (
        "access denied",
        re.compile(
            r"ACCESS_DENIED|AccessDenied|Access Denied|InvalidAccessKeyId|INVALID_ACCESS_KEY|"
            r"SignatureDoesNotMatch|SIGNATURE_DOES_NOT_MATCH|\b403\b|Forbidden",
            re.I,
        ),
    ),
    ("no such bucket", re.compile(r"NoSuchBucket|NO_SUCH_BUCKET|bucket does not exist|Bucket .* does not exist", re.I)),
    (
        "cannot reach the store",
        re.compile(
            r"NETWORK_CONNECTION|Connection refused|Couldn't connect|client error "
            r"\(Connect\)|error sending request|UnknownHost|timed? ?out|"
            r"Unable to execute HTTP request|ConnectException",
            re.I,
        ),
    ),
)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


class StorageError(UserError):
    """An object store refused a request or could not be reached; the message is one line."""


def kind_of(text: str) -> str | None:
    """``"access denied"``, ``"no such bucket"``, ``"cannot reach the store"`` or None."""
    for kind, pattern in _KINDS:
        if pattern.search(text):
            return kind
    return None


def describe(exc: BaseException, location: str | None = None) -> str:
    """One line for a failed storage request: the location, what went wrong, and a hint.

    Example:
        >>> describe(OSError("AWS Error ACCESS_DENIED during HeadBucket operation"), "s3a://lake/prod")
        's3a://lake/prod: access denied (credentials from AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY)'
    """
    current = settings.current()
    text = settings.redact(_ANSI.sub("", str(exc)), current)
    kind = kind_of(text)
    where = f"{location}: " if location else ""
    endpoint = current.store.endpoint or "AWS S3"
    if kind == "access denied":
        return f"{where}access denied (credentials from {current.credentials_from})"
    if kind == "no such bucket":
        bucket = locations.bucket_and_key(location)[0] if location and locations.is_remote(location) else "the bucket"
        return f"{where}bucket {bucket} does not exist at {endpoint}"
    if kind == "cannot reach the store":
        return f"{where}cannot reach the object store at {endpoint} ([storage] endpoint, AWS_ENDPOINT_URL)"
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return f"{where}{type(exc).__name__}: {lines[0] if lines else ''}"[:400]


def check_reachable(location: str) -> None:
    """Before a command's first request proper: the bucket of an ``s3a://`` location exists and
    these credentials may list it. Nothing is written. A local location passes.

    Raises:
        StorageError: access denied, no such bucket, or the store cannot be reached.
    """
    if not locations.is_remote(location):
        return
    bucket, key = locations.bucket_and_key(location)
    fs, _ = filesystem_of(location, settings.current().store)
    try:
        info = fs.get_file_info(bucket)
        if info.type == pafs.FileType.NotFound:
            raise StorageError(describe(OSError("NoSuchBucket"), location))
        # HEAD of a bucket may pass where listing it is refused; the commands list
        fs.get_file_info(pafs.FileSelector(f"{bucket}/{key}".rstrip("/"), allow_not_found=True, recursive=False))
    except StorageError:
        raise
    except OSError as exc:
        raise StorageError(describe(exc, location)) from None


def one_line(exc: BaseException, remote: bool = False) -> str:
    """The most telling line of an error: Spark wraps Python errors in long traces; an object
    store's refusal or absence is said as such when ``remote`` (events or lake in a bucket: a
    local audit's "Connection refused" is its own JVM's, not a store's); never a credential."""
    if remote and kind_of(str(exc)):
        return describe(exc)
    lines = [line.strip() for line in settings.redact(str(exc)).splitlines() if line.strip()]
    errors = [line for line in lines if "Error:" in line or "Exception:" in line or "Invalid:" in line]
    text = errors[-1] if errors else (lines[0] if lines else "")
    return f"{type(exc).__name__}: {text}"[:400]
