"""The object-store settings of a command: ``[storage]`` of the config, else the standard AWS
environment variables, resolved once when the command starts and then used by every read and
write of the process (``jobs.lake``, ``jobs.ingest``, Spark's S3A filesystem, ``deltalake``).

The process-wide settings are what Hadoop's configuration is to Spark: the lake's functions take
plain paths, and an ``s3a://`` path is reached with :func:`current`. A command calls :func:`use`
(or :func:`configure`) once in its ``main``; nothing is read from the environment at import.

Secrets stay out of sight: :class:`~jobs.storage.stores.ObjectStore` leaves them out of ``repr``,
they are never logged, and :func:`redact` blanks them out of any error text shown to a user.
"""

from __future__ import annotations

import configparser
import logging
import os
from collections.abc import Mapping
from dataclasses import dataclass

from common.config import Config, ConfigError, StorageConfig, read_config_text
from jobs.storage.stores import ObjectStore

DEFAULT_REGION = "us-east-1"


@dataclass(frozen=True)
class StorageSettings:
    """Resolved settings: the store, and where its credentials came from (for messages).

    Attributes:
        store: endpoint, region, addressing, credentials, timeouts.
        credentials_from: ``"[storage] credentials_file (profile P)"``, ``"AWS_ACCESS_KEY_ID"``
            or ``"the AWS SDK default chain"``: named in errors about access, never the keys.
    """

    store: ObjectStore
    credentials_from: str

    def delta_options(self) -> dict[str, str]:
        """``deltalake`` storage options (the object_store crate's keys).

        Commits are conditional puts (``If-None-Match: *`` on the commit file): two writers can
        never both create version N of a table; the loser sees the version taken and retries or
        fails (docs/audit.md, "Concurrent audits").
        """
        store = self.store
        options = {
            "AWS_REGION": store.region,
            "AWS_VIRTUAL_HOSTED_STYLE_REQUEST": "false" if store.path_style else "true",
            "aws_conditional_put": "etag",
            "timeout": f"{store.timeout_s:g}s",
            "connect_timeout": f"{store.timeout_s:g}s",
            "max_retries": str(store.retries),
            # retries back off for at most this long in all, then the error is raised
            "retry_timeout": f"{max(store.timeout_s, 1) * (store.retries + 1):g}s",
        }
        if store.endpoint:
            options["AWS_ENDPOINT_URL"] = store.endpoint
            options["AWS_ALLOW_HTTP"] = "false" if store.secure else "true"
        options.update(_keys(store, "AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN"))
        return options

    def hadoop_conf(self) -> dict[str, str]:
        """Hadoop's S3A settings (``fs.s3a.*``) for Spark's reads and delta-spark's writes."""
        store = self.store
        timeout = f"{int(store.timeout_s * 1000)}ms"
        conf = {
            "fs.s3a.endpoint.region": store.region,
            "fs.s3a.path.style.access": str(store.path_style).lower(),
            "fs.s3a.connection.ssl.enabled": str(store.secure).lower(),
            "fs.s3a.connection.timeout": timeout,
            "fs.s3a.connection.establish.timeout": timeout,
            "fs.s3a.attempts.maximum": str(store.retries),
            "fs.s3a.retry.limit": str(store.retries),
        }
        if store.endpoint:
            conf["fs.s3a.endpoint"] = store.endpoint
        if store.access_key:
            conf.update(_keys(store, "fs.s3a.access.key", "fs.s3a.secret.key", "fs.s3a.session.token"))
            conf["fs.s3a.aws.credentials.provider"] = (
                "org.apache.hadoop.fs.s3a.TemporaryAWSCredentialsProvider"
                if store.session_token
                else "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            )
        return conf

    def secrets(self) -> tuple[str, ...]:
        """The credential values, to blank out of text shown to users (:func:`redact`)."""
        return tuple(s for s in (self.store.access_key, self.store.secret_key, self.store.session_token) if s)


def _keys(store: ObjectStore, key_id: str, secret: str, token: str) -> dict[str, str]:
    if not store.access_key:
        return {}
    keys = {key_id: store.access_key, secret: store.secret_key}
    if store.session_token:
        keys[token] = store.session_token
    return keys


def resolve(config: StorageConfig, environ: Mapping[str, str]) -> StorageSettings:
    """``[storage]`` with its empty keys taken from the AWS environment variables.

    Raises:
        ConfigError: ``credentials_file`` cannot be read or lacks the profile or its keys (the
            message names the file and profile, never a value).
    """
    endpoint = config.endpoint or environ.get("AWS_ENDPOINT_URL_S3") or environ.get("AWS_ENDPOINT_URL") or ""
    if endpoint and not endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"AWS_ENDPOINT_URL must start with http:// or https://, not {endpoint!r}")
    region = config.region or environ.get("AWS_REGION") or environ.get("AWS_DEFAULT_REGION") or DEFAULT_REGION
    if config.credentials_file:
        key, secret, token = _credentials_file(config.credentials_file, config.profile)
        source = f"[storage] credentials_file {config.credentials_file} (profile {config.profile})"
    elif environ.get("AWS_ACCESS_KEY_ID"):
        key, secret, token = (
            environ.get("AWS_ACCESS_KEY_ID", ""),
            environ.get("AWS_SECRET_ACCESS_KEY", ""),
            environ.get("AWS_SESSION_TOKEN", ""),
        )
        if not secret:
            raise ConfigError("AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not")
        source = "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
    else:
        key = secret = token = ""
        source = "the AWS SDK default chain (no [storage] credentials_file, no AWS_ACCESS_KEY_ID)"
    store = ObjectStore(
        endpoint=endpoint.rstrip("/"),
        region=region,
        path_style=config.path_style,
        access_key=key,
        secret_key=secret,
        session_token=token,
        timeout_s=config.timeout_ms / 1000,
        retries=config.retries,
    )
    return StorageSettings(store, source)


def _credentials_file(path: str, profile: str) -> tuple[str, str, str]:
    parser = configparser.RawConfigParser()
    try:
        parser.read_string(read_config_text(path, f"storage.credentials_file {path}"), path)
    except OSError as exc:
        raise ConfigError(f"storage.credentials_file {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"storage.credentials_file {path}: not UTF-8 text (byte {exc.start})") from None
    except configparser.Error:
        raise ConfigError(
            f"storage.credentials_file {path}: not an AWS credentials file ([profile] sections of key = value lines)"
        ) from None
    if not parser.has_section(profile):
        raise ConfigError(f"storage.credentials_file {path}: no [{profile}] profile (storage.profile)")
    values = dict(parser.items(profile))
    if not values.get("aws_access_key_id") or not values.get("aws_secret_access_key"):
        raise ConfigError(
            f"storage.credentials_file {path}: [{profile}] needs aws_access_key_id and aws_secret_access_key"
        )
    return values["aws_access_key_id"], values["aws_secret_access_key"], values.get("aws_session_token", "")


_current: StorageSettings | None = None


def use(settings: StorageSettings) -> StorageSettings:
    """Make ``settings`` the process's object-store settings; returns them."""
    global _current
    _current = settings
    return settings


def configure(config: Config) -> StorageSettings:
    """Resolve ``config.storage`` against this process's environment and :func:`use` it."""
    return use(resolve(config.storage, os.environ))


def current() -> StorageSettings:
    """The process's settings; the defaults and the environment when no command set them."""
    if _current is None:
        return use(resolve(StorageConfig(), os.environ))
    return _current


def redact(text: str, settings: StorageSettings | None = None) -> str:
    """``text`` with every credential of ``settings`` (default: :func:`current`) replaced by ``***``."""
    for secret in (settings or current()).secrets():
        text = text.replace(secret, "***")
    return text


class RedactingFormatter(logging.Formatter):
    """A log formatter that blanks out the process's credentials (:func:`redact`), tracebacks
    included: a library's error may quote a request."""

    def format(self, record: logging.LogRecord) -> str:
        return redact(super().format(record))
