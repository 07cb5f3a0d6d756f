"""The key store: access key -> secret key, loaded once at start from the file or environment
variable ``[security]`` names. Nothing here shows a secret, in a repr, an error or a pickle."""

from __future__ import annotations

import hmac
import os
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import NoReturn

from common.config import ConfigError, SecurityConfig, read_config_text
from nameserver.acl.signature import Credentials, SecretsError


class SecretStore:
    """Access key -> secret key. Its repr and errors name access keys only.

    Args:
        secrets: the pairs; keys and secrets must be non-empty.
    """

    __slots__ = ("_secrets",)

    def __init__(self, secrets: Mapping[str, str] | None = None) -> None:
        for access_key, secret in (secrets or {}).items():
            Credentials(access_key, secret)  # the same non-empty rule, the same secret-free error
        self._secrets = dict(secrets or {})

    def __repr__(self) -> str:
        return f"SecretStore(access_keys={sorted(self._secrets)!r})"

    __str__ = __repr__

    def __len__(self) -> int:
        return len(self._secrets)

    def __contains__(self, access_key: object) -> bool:
        return access_key in self._secrets

    def __reduce__(self) -> NoReturn:  # a pickled store would carry the secrets into files and other processes
        raise TypeError("a SecretStore cannot be pickled")

    @property
    def access_keys(self) -> tuple[str, ...]:
        """The known key ids, sorted."""
        return tuple(sorted(self._secrets))

    def secret_for(self, access_key: str) -> str | None:
        """The secret of ``access_key``, or None when the key is unknown."""
        return self._secrets.get(access_key)

    def credentials(self, access_key: str) -> Credentials:
        """Credentials to sign with.

        Raises:
            SecretsError: the key is not in the store.
        """
        secret = self._secrets.get(access_key)
        if secret is None:
            raise SecretsError(f"access key {access_key!r} has no secret in the configured secrets")
        return Credentials(access_key, secret)

    def is_secret(self, text: str) -> bool:
        """Whether ``text`` equals one of the secrets (to keep a misplaced secret out of logs)."""
        candidate = text.encode("utf-8", "replace")
        return any(hmac.compare_digest(candidate, s.encode("utf-8")) for s in self._secrets.values())

    def merged(self, other: SecretStore, source: str) -> SecretStore:
        """Both stores' pairs.

        Raises:
            SecretsError: an access key appears in both with different secrets.
        """
        for access_key, secret in other._secrets.items():
            mine = self._secrets.get(access_key)
            if mine is not None and not hmac.compare_digest(mine.encode(), secret.encode()):
                raise SecretsError(f"{source}: access key {access_key!r} is given two different secrets")
        return SecretStore({**self._secrets, **other._secrets})


def parse_secret_entries(entries: Iterable[tuple[int, str]], source: str) -> SecretStore:
    """``accessKey=secretKey`` entries (numbered for errors) into a store.

    Blank entries and ``#`` comments are skipped; the secret is everything after the first ``=``
    (Base64 secrets end in ``=``), both sides stripped.

    Raises:
        SecretsError: an entry without ``=`` or with an empty side, or a repeated access key. The
            message gives the source and entry number, never the entry's text.
    """
    secrets: dict[str, str] = {}
    for number, raw in entries:
        text = raw.strip()
        if not text or text.startswith("#"):
            continue
        access_key, sep, secret = (part.strip() for part in text.partition("="))
        if not sep or not access_key or not secret:
            raise SecretsError(f"{source}, entry {number}: expected accessKey=secretKey")
        if access_key in secrets:
            raise SecretsError(f"{source}, entry {number}: access key {access_key!r} is given twice")
        secrets[access_key] = secret
    return SecretStore(secrets)


def parse_secrets_file_text(text: str, source: str) -> SecretStore:
    """A secrets file: one ``accessKey=secretKey`` per line."""
    return parse_secret_entries(enumerate(text.splitlines(), 1), source)


def parse_secrets_env_text(text: str, source: str) -> SecretStore:
    """An environment value: ``accessKey=secretKey[,accessKey=secretKey...]``."""
    return parse_secret_entries(enumerate(text.split(","), 1), source)


def load_secret_store(security: SecurityConfig, environ: Mapping[str, str] | None = None) -> SecretStore:
    """Read the secrets ``[security]`` points at: ``secrets_file`` and/or the variable named by
    ``secrets_env`` (the command line's only way in; never flags).

    Args:
        security: the loaded section.
        environ: the environment (``os.environ`` when None).

    Raises:
        SecretsError: a source that is missing, unreadable or malformed, or no secret at all.
    """
    environ = os.environ if environ is None else environ
    store = SecretStore()
    if security.secrets_file:
        path = Path(security.secrets_file)
        try:
            text = read_config_text(path, f"security.secrets_file {str(path)!r}")
        except ConfigError as exc:  # a device, FIFO or socket, or over 1 MiB
            raise SecretsError(str(exc)) from None
        except (OSError, UnicodeDecodeError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else type(exc).__name__
            raise SecretsError(f"security.secrets_file {str(path)!r} cannot be read: {reason}") from None
        store = store.merged(parse_secrets_file_text(text, f"secrets file {str(path)!r}"), "secrets")
    if security.secrets_env:
        value = environ.get(security.secrets_env)
        if value is None:
            raise SecretsError(f"security.secrets_env names {security.secrets_env!r}, which is not set")
        store = store.merged(parse_secrets_env_text(value, f"environment variable {security.secrets_env}"), "secrets")
    if not len(store):
        raise SecretsError("no secrets: security.secrets_file / security.secrets_env hold no accessKey=secretKey")
    return store


def client_credentials(security: SecurityConfig, environ: Mapping[str, str] | None = None) -> Credentials | None:
    """What our own clients (``nsaudit fleet``) sign with: ``security.access_key`` and its secret
    from the configured secrets, or None when ``access_key`` is not set.

    Raises:
        SecretsError: the secrets cannot be loaded or lack that key.
    """
    if not security.access_key:
        return None
    return load_secret_store(security, environ).credentials(security.access_key)
