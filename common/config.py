"""Configuration: TOML files from ``conf/`` loaded once into frozen dataclasses.

Unknown sections or keys are errors that name the key and the file, so a typo never silently
falls back to a default. Nothing here reads the environment.

Example:
    >>> cfg = load_config("conf/nsaudit.toml")
    >>> cfg.nameserver.broker_expiry_ms
    120000
"""

from __future__ import annotations

import dataclasses
import errno
import ipaddress
import math
import os
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from common.errors import UserError
from common.timeutil import FIRST_DAY, LAST_DAY

DEFAULT_CONFIG_PATH = Path(__file__).resolve().parent.parent / "conf" / "nsaudit.toml"
MAX_CONFIG_BYTES = 1 << 20  # a config file is a few KiB; more is not one


class ConfigError(UserError, ValueError):
    """A configuration file that cannot be used; the message names the file and key."""


# The largest value of an integer key, by the unit its name ends in (one rule for every key,
# checked by _check_integers as each section is made, from a file or dataclasses.replace). Within
# them every value fits where it goes: events are JSON of signed 64-bit integers, Spark's and
# Hadoop's settings are Java ints, and timers and date arithmetic take them without overflow.
MAX_DURATION_MS = 10 * 365 * 86_400_000  # keys ending in _ms: ten years
MAX_BYTES = 1 << 40  # keys ending in _bytes: 1 TiB
MAX_DAYS = (LAST_DAY - FIRST_DAY).days + 1  # keys ending in _days: every day nsaudit handles
MAX_COUNT = 2**31 - 1  # every other integer key (a count): a Java int
_MAX_BY_UNIT = (
    ("_ms", MAX_DURATION_MS, "ten years"),
    ("_bytes", MAX_BYTES, "1 TiB"),
    ("_days", MAX_DAYS, "the days from 0001-01-02 to 9999-12-30"),
)


def max_of(key: str) -> tuple[int, str]:
    """The largest value integer key ``key`` may take, and what that bound is, in words."""
    for suffix, high, what in _MAX_BY_UNIT:
        if key.endswith(suffix):
            return high, what
    return MAX_COUNT, "2^31 - 1"


def _check_integers(section: DataclassInstance, name: str) -> None:
    """Raise a ConfigError naming the first integer key of ``section`` over its :func:`max_of`."""
    for f in dataclasses.fields(section):
        value = getattr(section, f.name)
        if isinstance(value, int) and not isinstance(value, bool) and "int" in str(f.type):
            high, what = max_of(f.name)
            if value > high:
                raise ConfigError(f"{name}.{f.name} must be <= {high} ({what}), not {_shown(value)}")


def _shown(value: int) -> str:
    """``value`` as it is, or its number of digits when that would make a long line."""
    text = str(value)
    return text if len(text) <= 40 else f"an integer of {len(text.lstrip('-'))} digits"


def _check_at_least(section: Any, name: str, low: int, *keys: str) -> None:
    """Raise a ConfigError naming the first of ``keys`` of ``section`` below ``low``."""
    for key in keys:
        value = getattr(section, key)
        if value < low:
            raise ConfigError(f"{name}.{key} must be >= {low}, not {value}")


@dataclass(frozen=True)
class NameServerConfig:
    """Name-server timers, limits and defences (docs/nameserver-semantics.md D7, A4; docs/remoting-protocol.md §2)."""

    listen: str = "127.0.0.1:9876"
    broker_expiry_ms: int = 120_000
    scan_interval_ms: int = 10_000
    first_scan_delay_ms: int = 5_000
    channel_idle_ms: int = 0  # A4: RocketMQ's idle close, off by default
    frame_timeout_ms: int = 30_000  # a connection stuck mid-frame this long is closed
    max_connections: int = 10_000
    max_connections_per_host: int = 1_000  # connections from one peer host beyond this are refused
    max_frame_bytes: int = 16_777_216
    max_buffered_bytes: int = 134_217_728  # unfinished frames across all connections (128 MiB)
    # A registration's size (docs/nameserver-semantics.md §2.1, "Caps"): more topics or a larger
    # body (inflated) is refused before it is parsed, applied or logged. The defaults pass every
    # table a broker can send uncompressed under RocketMQ's 16 MiB frame limit (at least ~132 bytes
    # of JSON per topic, so at most ~127,000 topics; a compressed form is always smaller).
    max_register_topics: int = 200_000
    max_register_body_bytes: int = 16_777_216
    # the Apache RocketMQ release whose answers (header type, version, remarks, extra codes) the
    # server gives: "4.9" or "5" (nameserver.server.profile, docs/interop.md)
    rocketmq_version: str = "4.9"

    def __post_init__(self) -> None:
        _check_integers(self, "nameserver")
        if self.rocketmq_version not in ("4.9", "5"):
            raise ConfigError(f'nameserver.rocketmq_version must be "4.9" or "5", not {self.rocketmq_version!r}')


@dataclass(frozen=True)
class EventLogConfig:
    """Event-log segments and durability (docs/event-log.md)."""

    segment_max_bytes: int = 64 * 1024 * 1024
    durability: str = "group"  # "fsync" per write, "group" commit, or "none"
    group_commit_ms: int = 5
    gzip_closed: bool = False

    def __post_init__(self) -> None:
        _check_integers(self, "eventlog")
        if self.durability not in ("fsync", "group", "none"):
            raise ConfigError(f"eventlog.durability must be fsync, group or none, not {self.durability!r}")
        _check_at_least(self, "eventlog", 1, "segment_max_bytes")
        _check_at_least(self, "eventlog", 0, "group_commit_ms")


@dataclass(frozen=True)
class AuditConfig:
    """Audit thresholds (docs/interfaces.md, Configuration)."""

    divergence_grace_ms: int | None = None  # None: derived from heartbeat period + scan interval
    snapshot_interval_ms: int = 300_000
    clock_skew_ms: int = 2_000
    late_expiry_tolerance_ms: int = 2_000
    heartbeat_period_ms: int = 30_000  # brokers' registerNameServerPeriod, for late heartbeats
    late_heartbeat_slack_ms: int = 15_000  # a refresh gap over period + slack is a late heartbeat
    flapping_windows_per_day: int = 6
    queue_skew_cv: float = 0.5
    queue_skew_max_over_mean: float = 2.0
    admin_burst_changes: int = 10  # more admin changes (104/205/216/327) than this from one host ...
    admin_burst_window_ms: int = 60_000  # ... within this window, on one server, is an admin_burst
    refused_requests_min: int = 1  # this many NO_PERMISSION refusals from one host make a finding

    def __post_init__(self) -> None:
        _check_integers(self, "audit")
        _check_at_least(
            self,
            "audit",
            1,
            "snapshot_interval_ms",
            "heartbeat_period_ms",
            "admin_burst_window_ms",
            "refused_requests_min",
        )
        _check_at_least(
            self,
            "audit",
            0,
            "clock_skew_ms",
            "late_expiry_tolerance_ms",
            "late_heartbeat_slack_ms",
            "flapping_windows_per_day",
            "admin_burst_changes",
        )
        if self.divergence_grace_ms is not None:
            _check_at_least(self, "audit", 0, "divergence_grace_ms")
        for name in ("queue_skew_cv", "queue_skew_max_over_mean"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value > 0):
                raise ConfigError(f"audit.{name} must be a number > 0, not {value}")


@dataclass(frozen=True)
class SecurityConfig:
    """Access control for route changes (``nameserver.acl``); off by default.

    Secrets never live in this file or on the command line: ``secrets_file`` is a path to
    ``accessKey=secretKey`` lines and ``secrets_env`` the *name* of an environment variable holding
    ``accessKey=secretKey[,...]``; they are read once at start (``acl.load_secret_store``).
    """

    enabled: bool = False
    allowed_networks: tuple[str, ...] = ()  # CIDRs a registering broker's address and peer must be in
    allowed_clusters: tuple[str, ...] = ()  # clusters a broker may register in; empty = any
    secrets_file: str = ""
    secrets_env: str = ""
    access_key: str = ""  # the key our own clients (nsaudit fleet) sign with; "" = unsigned
    signature_skew_ms: int = 300_000  # a signature's Timestamp may lie this far from the server's clock
    replay_cache_entries: int = 200_000  # signatures remembered within that window to refuse replays
    accept_rocketmq_signatures: bool = False  # also accept RocketMQ's weaker form (no freshness, no replay check)

    def __post_init__(self) -> None:
        _check_integers(self, "security")
        if self.signature_skew_ms < 1:
            raise ConfigError(f"security.signature_skew_ms must be >= 1, not {self.signature_skew_ms}")
        if self.replay_cache_entries < 1:
            raise ConfigError(f"security.replay_cache_entries must be >= 1, not {self.replay_cache_entries}")
        for text in self.allowed_networks:
            try:
                ipaddress.ip_network(text)
            except ValueError as exc:
                raise ConfigError(f"security.allowed_networks: {text!r} is not a CIDR network: {exc}") from None
        if self.enabled and not (self.secrets_file or self.secrets_env):
            raise ConfigError("security.enabled needs security.secrets_file or security.secrets_env")


@dataclass(frozen=True)
class SparkConfig:
    """How the jobs build their SparkSession."""

    master: str = "local[*]"
    shuffle_partitions: int = 8
    driver_memory: str = "4g"
    java_options: str = "-XX:+UseParallelGC"  # jobs.spark.session.DEFAULT_JAVA_OPTIONS
    # a day whose segments hold fewer bytes is audited with the small-day plan settings
    # (jobs.spark.profile); 0 never uses them
    small_day_bytes: int = 256 * 1024 * 1024

    def __post_init__(self) -> None:
        _check_integers(self, "spark")
        _check_at_least(self, "spark", 1, "shuffle_partitions")
        _check_at_least(self, "spark", 0, "small_day_bytes")


@dataclass(frozen=True)
class LakeConfig:
    """How the lake's Delta tables are written and kept (docs/audit.md, "Lake writes" and "Housekeeping")."""

    writer: str = "delta-rs"  # delta-rs | native (delta-spark) | auto: native where its jars are
    keep_days: int = 0  # nsaudit lake retention keeps the last N audited days; 0 = keep every day

    def __post_init__(self) -> None:
        _check_integers(self, "lake")
        if self.writer not in ("auto", "native", "delta-rs"):
            raise ConfigError(f"lake.writer must be auto, native or delta-rs, not {self.writer!r}")
        if self.keep_days < 0:
            raise ConfigError(f"lake.keep_days must be >= 0 (0 keeps every day), not {self.keep_days}")


@dataclass(frozen=True)
class StorageConfig:
    """How ``s3a://`` events folders and lakes are reached (docs/deploy.md, "Object storage").

    Each key left empty comes from the standard AWS environment variables when a command starts
    (``jobs.storage.settings.resolve``): ``AWS_ENDPOINT_URL_S3`` / ``AWS_ENDPOINT_URL``,
    ``AWS_REGION`` / ``AWS_DEFAULT_REGION``, ``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
    ``AWS_SESSION_TOKEN``. Secrets never live in this file or on the command line:
    ``credentials_file`` is the path of an AWS credentials file (``[profile]`` sections with
    ``aws_access_key_id``, ``aws_secret_access_key`` and optionally ``aws_session_token``).
    """

    endpoint: str = ""  # http(s)://host:port of an S3-compatible server; "" = AWS
    region: str = ""  # "" = the environment's, else us-east-1
    path_style: bool = False  # bucket in the URL path (most S3-compatible servers) instead of the host name
    credentials_file: str = ""  # "" = the environment's keys, else the AWS SDKs' default chain
    profile: str = "default"  # the section of credentials_file
    timeout_ms: int = 30_000  # connect and request timeout of one attempt
    retries: int = 3  # attempts after a failed one

    def __post_init__(self) -> None:
        _check_integers(self, "storage")
        if self.endpoint and not self.endpoint.startswith(("http://", "https://")):
            raise ConfigError(f"storage.endpoint must start with http:// or https://, not {self.endpoint!r}")
        if self.timeout_ms < 1:
            raise ConfigError(f"storage.timeout_ms must be >= 1, not {self.timeout_ms}")
        if self.retries < 0:
            raise ConfigError(f"storage.retries must be >= 0, not {self.retries}")


@dataclass(frozen=True)
class CollectConfig:
    """``nsaudit collect``: polling of real name servers (docs/collect.md)."""

    interval_ms: int = 10_000  # a round of every server starts this often
    concurrency: int = 16  # GET_ROUTEINFO_BY_TOPIC requests in flight per server
    timeout_ms: int = 5_000  # connect, and each answer; longer is a failed round
    backoff_initial_ms: int = 1_000  # first retry after a failed round; doubles per failure ...
    backoff_max_ms: int = 60_000  # ... up to this

    def __post_init__(self) -> None:
        _check_integers(self, "collect")
        for name in ("interval_ms", "concurrency", "timeout_ms", "backoff_initial_ms", "backoff_max_ms"):
            if getattr(self, name) < 1:
                raise ConfigError(f"collect.{name} must be >= 1, not {getattr(self, name)}")
        if self.backoff_max_ms < self.backoff_initial_ms:
            raise ConfigError(
                f"collect.backoff_max_ms must be >= backoff_initial_ms ({self.backoff_initial_ms}), "
                f"not {self.backoff_max_ms}"
            )


@dataclass(frozen=True)
class Config:
    """The whole configuration, one frozen object."""

    nameserver: NameServerConfig = field(default_factory=NameServerConfig)
    eventlog: EventLogConfig = field(default_factory=EventLogConfig)
    audit: AuditConfig = field(default_factory=AuditConfig)
    spark: SparkConfig = field(default_factory=SparkConfig)
    lake: LakeConfig = field(default_factory=LakeConfig)
    storage: StorageConfig = field(default_factory=StorageConfig)
    security: SecurityConfig = field(default_factory=SecurityConfig)
    collect: CollectConfig = field(default_factory=CollectConfig)


_T = TypeVar("_T", bound="DataclassInstance")


def _build(cls: type[_T], values: dict[str, Any], where: str, path: Path) -> _T:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    kwargs: dict[str, Any] = {}
    for key, value in values.items():
        if key not in fields:
            raise ConfigError(f"{path}: unknown key {where}{key!r}; known: {', '.join(sorted(fields))}")
        f = fields[key]
        factory = f.default_factory  # a section's dataclass; MISSING for a plain value
        if isinstance(factory, type) and dataclasses.is_dataclass(factory):
            if not isinstance(value, dict):
                raise ConfigError(f"{path}: [{key}] must be a table")
            kwargs[key] = _build(factory, value, f"{key}.", path)
            continue
        expected = f.type if isinstance(f.type, str) else f.type.__name__
        if not _type_ok(value, expected):
            raise ConfigError(f"{path}: {where}{key} must be {expected}, got {value!r}")
        if expected == "float" and isinstance(value, int):  # a whole number where a float goes
            try:
                value = float(value)
            except OverflowError:
                raise ConfigError(f"{path}: {where}{key} is too large for a number, got {_shown(value)}") from None
        kwargs[key] = tuple(value) if isinstance(value, list) else value  # frozen: lists become tuples
    try:
        return cls(**kwargs)
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


def _type_ok(value: Any, expected: str) -> bool:
    if isinstance(value, list):  # only tuple[str, ...] fields take arrays, of strings
        return expected.startswith("tuple[str") and all(isinstance(v, str) for v in value)
    if isinstance(value, bool):
        return "bool" in expected
    if isinstance(value, int):
        return "int" in expected or "float" in expected
    if isinstance(value, float):
        return "float" in expected
    if isinstance(value, str):
        return "str" in expected and not expected.startswith("tuple")
    return False


def read_config_text(path: str | Path, name: str) -> str:
    """The UTF-8 text of a file of settings (the config, or a file it names): a regular file of at
    most ``MAX_CONFIG_BYTES``; ``name`` is how errors name it.

    ``/dev/null`` is an empty file; another device, a FIFO or a socket is refused before it is
    read: ``/dev/zero`` never ends and a FIFO without a writer never answers. ``O_NONBLOCK`` keeps
    the open of a FIFO from waiting for one.

    Raises:
        ConfigError: not a regular file, or larger than ``MAX_CONFIG_BYTES``.
        OSError: the file cannot be opened or read (``IsADirectoryError`` for a folder).
        UnicodeDecodeError: the bytes are not UTF-8.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    with os.fdopen(fd, "rb") as file:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if stat.S_ISCHR(mode) and os.stat(os.devnull).st_rdev == os.fstat(fd).st_rdev:
            return ""  # /dev/null: no settings, every default
        if not stat.S_ISREG(mode):
            raise ConfigError(f"{name}: not a regular file (a device, FIFO or socket)")
        data = file.read(MAX_CONFIG_BYTES + 1)
    if len(data) > MAX_CONFIG_BYTES:
        raise ConfigError(f"{name}: larger than {MAX_CONFIG_BYTES} bytes (1 MiB)")
    return data.decode("utf-8")


def load_config(path: str | Path | None = None) -> Config:
    """Load a TOML config; ``None`` loads ``conf/nsaudit.toml`` when it exists, else defaults.

    Raises:
        ConfigError: the file is missing, unreadable (a directory, a device or FIFO, no
            permission, over 1 MiB, not UTF-8), not TOML, or has an unknown key, a wrongly typed
            value or a value out of its range.
    """
    if path is None:
        if not DEFAULT_CONFIG_PATH.exists():
            return Config()
        path = DEFAULT_CONFIG_PATH
    path = Path(path)
    try:
        data = tomllib.loads(read_config_text(path, f"{path}"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: config file not found") from None
    except IsADirectoryError:
        raise ConfigError(f"{path}: is a directory, not a config file") from None
    except OSError as exc:  # permission denied, an unreadable device, ...
        raise ConfigError(f"{path}: cannot read the config file: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}): TOML files are UTF-8") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from None
    except ConfigError:  # not a regular file, or too large (a ValueError too)
        raise
    except ValueError as exc:  # an integer of more digits than int() converts (4300)
        raise ConfigError(f"{path}: not usable TOML: {str(exc).split(':')[0]}") from None
    return _build(Config, data, "", path)
