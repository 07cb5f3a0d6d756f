"""A throwaway S3 server on this host: S3Proxy (``jars/s3proxy``, fetched by set-up) serving a local
folder on 127.0.0.1, with one access key.

For trying events and a lake in a bucket without a cloud account, and for the tests and benchmarks
that do: a real S3 server speaking the REST API over HTTP with AWS signatures, not a mock. Its
filesystem store makes ``If-None-Match: *`` puts atomic, as the delta-rs writer's commits need.

Example:
    >>> with S3ProxyServer(Path("/tmp/s3"), buckets=("lake",)) as server:
    ...     config = server.storage_config()      # [storage] for this server
"""

from __future__ import annotations

import os
import secrets
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType
from typing import Any

from common.config import StorageConfig

JARS_DIR = Path(__file__).resolve().parents[2] / "jars" / "s3proxy" / "lib"
_MAIN_CLASS = "org.gaul.s3proxy.Main"


class S3ProxyError(RuntimeError):
    """The server did not come up; the message ends with the tail of its log."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


class S3ProxyServer:
    """S3Proxy on ``127.0.0.1:port`` over ``work_dir/data`` (one folder per bucket), as a child
    process; :meth:`stop` and :meth:`start` again keep the port and the data (a network cut).

    Attributes:
        endpoint: ``http://127.0.0.1:PORT``.
        access_key, secret_key: the one identity it accepts (random per server).
    """

    def __init__(self, work_dir: Path, buckets: tuple[str, ...] = (), port: int | None = None) -> None:
        self.work_dir = Path(work_dir).resolve()
        self.port = port or free_port()
        self.endpoint = f"http://127.0.0.1:{self.port}"
        self.access_key = "nsaudit-" + secrets.token_hex(4)
        self.secret_key = secrets.token_hex(16)
        self.buckets = buckets
        self._proc: subprocess.Popen[bytes] | None = None

    def storage_config(self, **overrides: Any) -> StorageConfig:
        """``[storage]`` that reaches this server (credentials through :meth:`credentials_file`)."""
        values: dict[str, Any] = dict(
            endpoint=self.endpoint,
            region="us-east-1",
            path_style=True,
            credentials_file=str(self.credentials_file()),
            timeout_ms=10_000,
            retries=2,
        )
        values.update(overrides)
        return StorageConfig(**values)

    def credentials_file(self, profile: str = "default", secret: str | None = None) -> Path:
        """An AWS credentials file with this server's key (or a wrong ``secret``)."""
        path = self.work_dir / f"credentials-{profile}{'-wrong' if secret else ''}"
        path.write_text(
            f"[{profile}]\naws_access_key_id = {self.access_key}\naws_secret_access_key = {secret or self.secret_key}\n"
        )
        path.chmod(0o600)
        return path

    def _properties(self) -> Path:
        data = self.work_dir / "data"
        for bucket in self.buckets:
            (data / bucket).mkdir(parents=True, exist_ok=True)
        path = self.work_dir / "s3proxy.conf"
        path.write_text(
            f"s3proxy.endpoint={self.endpoint}\n"
            "s3proxy.authorization=aws-v2-or-v4\n"
            f"s3proxy.identity={self.access_key}\n"
            f"s3proxy.credential={self.secret_key}\n"
            "jclouds.provider=filesystem-nio2\n"
            f"jclouds.filesystem.basedir={data}\n"
        )
        # S3Proxy's jar has no logging configuration (logback would log every request at DEBUG)
        (self.work_dir / "logback.xml").write_text(
            '<configuration><appender name="out" class="ch.qos.logback.core.ConsoleAppender"><encoder>'
            "<pattern>%d %p %c{30}: %m%n</pattern></encoder></appender>"
            '<root level="WARN"><appender-ref ref="out"/></root></configuration>\n'
        )
        return path

    def start(self, timeout: float = 90.0) -> str:
        """Start the server; return its endpoint once it accepts connections.

        Raises:
            S3ProxyError: no jars (run ``bash jars/fetch.sh s3proxy``), or it exited or did not
                come up within ``timeout`` seconds.
        """
        if not JARS_DIR.is_dir():
            raise S3ProxyError(f"no S3Proxy jars in {JARS_DIR}: run bash jars/fetch.sh s3proxy")
        self.work_dir.mkdir(parents=True, exist_ok=True)
        properties = self._properties()
        log = open(self.work_dir / "s3proxy.log", "ab")
        try:
            self._proc = subprocess.Popen(
                [
                    "java",
                    "-Xmx256m",
                    "-XX:+UseSerialGC",
                    f"-Dlogback.configurationFile={self.work_dir / 'logback.xml'}",
                    "-cp",
                    f"{JARS_DIR}/*",
                    _MAIN_CLASS,
                    "--properties",
                    str(properties),
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            log.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise S3ProxyError(f"S3Proxy exited with {self._proc.returncode}\n{self._tail()}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=1):
                    return self.endpoint
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise S3ProxyError(f"S3Proxy not up after {timeout:.0f} s\n{self._tail()}")

    def stop(self, kill: bool = False) -> None:
        """Stop the server (SIGTERM, or SIGKILL with ``kill``: connections cut mid-request);
        idempotent, never raises. The data stays."""
        proc, self._proc = self._proc, None
        if proc is None or proc.poll() is not None:
            return
        proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    @property
    def running(self) -> bool:
        """Whether the server process is alive."""
        return self._proc is not None and self._proc.poll() is None

    def _tail(self, lines: int = 20) -> str:
        try:
            text = (self.work_dir / "s3proxy.log").read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def __enter__(self) -> S3ProxyServer:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def java_available() -> bool:
    """Whether ``java`` is on the PATH (set-up installs it)."""
    return any(os.access(os.path.join(d, "java"), os.X_OK) for d in os.environ.get("PATH", "").split(os.pathsep))
