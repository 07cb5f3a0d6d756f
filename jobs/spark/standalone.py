"""A throwaway Spark standalone cluster on this host: one master and one or more workers on 127.0.0.1,
each worker in its own directory.

For trying the nightly audit on a real cluster manager (executors in their own JVMs and Python
workers, tasks shipped over RPC) without installing Spark: :class:`StandaloneCluster` from code,
``python -m jobs.spark.standalone`` from a shell (:func:`main`).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request
from collections.abc import Callable
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar

from common.arguments import int_arg

_T = TypeVar("_T")

# Every worker is a JVM on this host: more than a few dozen is a typo, not a cluster.
MAX_WORKERS = 32
MAX_WORKER_CORES = 1024


_MASTER_CLASS = "org.apache.spark.deploy.master.Master"
_WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
# Master log lines (Master.scala, WebUI.scala) that name the ports it bound.
_MASTER_URL_RE = re.compile(r"Starting Spark master at (spark://\S+)")
_WEBUI_PORT_RE = re.compile(r"Bound MasterWebUI to \S+, and started at http://\S+:(\d+)")


def spark_home() -> str:
    """The Spark home of the installed pyspark (it ships ``bin/spark-class`` and ``jars/``)."""
    import pyspark

    return os.path.dirname(os.path.abspath(pyspark.__file__))


class ClusterError(RuntimeError):
    """The master or worker did not come up; the message ends with the tail of its log."""


class StandaloneCluster:
    """A Spark standalone master and ``workers`` workers bound to 127.0.0.1, as child processes.

    The master and worker are started with the ``bin/spark-class`` of the pyspark in this
    interpreter's environment (:func:`spark_home`). Ports are picked by the JVMs (port 0) and read
    back from their logs, so two clusters never collide.

    Attributes:
        work_dir: holds ``master.log``, ``worker.log`` (``worker-N.log``) and each worker's own
            directory of application dirs (``work``, or ``worker-N`` with several workers).
        master_url: ``spark://127.0.0.1:PORT``, set by :meth:`start`.
        webui_url: the master's web UI (``/json`` gives its state), set by :meth:`start`.

    Example:
        >>> with StandaloneCluster(Path("/tmp/sa")) as cluster:
        ...     subprocess.run([".venv/bin/nsaudit", "audit", ..., "--master", cluster.master_url])
    """

    def __init__(
        self,
        work_dir: Path,
        worker_memory: str = "2g",
        worker_cores: int = 2,
        daemon_memory: str = "512m",
        workers: int = 1,
    ) -> None:
        if not 1 <= workers <= MAX_WORKERS or not 1 <= worker_cores <= MAX_WORKER_CORES:
            raise ValueError(
                f"workers must be in 1..{MAX_WORKERS} and worker_cores in 1..{MAX_WORKER_CORES}, "
                f"not {workers} and {worker_cores}"
            )
        self.work_dir = Path(work_dir).resolve()
        self.worker_memory = worker_memory
        self.worker_cores = worker_cores
        self.daemon_memory = daemon_memory  # heap of the master and worker JVMs, not executors
        self.master_url: str | None = None
        self.webui_url: str | None = None
        self._master: subprocess.Popen[bytes] | None = None
        self.workers = workers
        self._workers: list[subprocess.Popen[bytes]] = []

    def _spawn(self, name: str, args: list[str]) -> subprocess.Popen[bytes]:
        home = spark_home()
        env = dict(
            os.environ,
            SPARK_HOME=home,
            SPARK_LOCAL_IP="127.0.0.1",
            SPARK_DAEMON_MEMORY=self.daemon_memory,
            # an empty conf dir: no spark-env.sh or spark-defaults.conf from elsewhere
            SPARK_CONF_DIR=str(self.work_dir / "conf"),
        )
        log = open(self.work_dir / f"{name}.log", "ab")
        try:
            # spark-class execs java, so the child is the JVM itself: SIGTERM runs its shutdown
            # hooks. It stays in our process group, so whoever kills the group kills the cluster.
            return subprocess.Popen(
                [os.path.join(home, "bin", "spark-class"), *args],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        finally:
            log.close()

    def _wait_for(
        self, what: str, proc: subprocess.Popen[bytes], log_name: str, probe: Callable[[], _T | None], deadline: float
    ) -> _T:
        while time.monotonic() < deadline:
            found = probe()
            if found:
                return found
            if proc.poll() is not None:
                raise ClusterError(f"{what} exited with {proc.returncode}\n{self._tail(log_name)}")
            time.sleep(0.25)
        raise ClusterError(f"{what} not up after the timeout\n{self._tail(log_name)}")

    def _tail(self, log_name: str, lines: int = 20) -> str:
        try:
            return "\n".join((self.work_dir / log_name).read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def _grep_log(self, log_name: str, pattern: re.Pattern[str]) -> str | None:
        try:
            match = pattern.search((self.work_dir / log_name).read_text(errors="replace"))
        except OSError:
            return None
        return match.group(1) if match else None

    def state(self) -> dict[str, Any]:
        """The master's state as its web UI's ``/json`` reports it (workers, applications)."""
        with urllib.request.urlopen(f"{self.webui_url}/json", timeout=5) as response:
            state: dict[str, Any] = json.load(response)
        return state

    def _worker_alive(self) -> bool:
        try:
            workers = self.state().get("workers", [])
        except OSError:
            return False
        alive = [w for w in workers if w.get("state") == "ALIVE" and w.get("cores") == self.worker_cores]
        return len(alive) >= self.workers

    def start(self, timeout: float = 120.0) -> str:
        """Start the master, then the worker; return the master URL once the worker is ALIVE.

        Raises:
            ClusterError: either process exited or did not come up in ``timeout`` seconds (both
                are stopped again).
        """
        (self.work_dir / "conf").mkdir(parents=True, exist_ok=True)
        deadline = time.monotonic() + timeout
        try:
            self._master = self._spawn(
                "master", [_MASTER_CLASS, "--host", "127.0.0.1", "--port", "0", "--webui-port", "0"]
            )
            self.master_url = self._wait_for(
                "spark master",
                self._master,
                "master.log",
                lambda: self._grep_log("master.log", _MASTER_URL_RE),
                deadline,
            )
            # The log names the UI by hostname ("localhost"); it is bound to 127.0.0.1 only.
            webui_port = self._wait_for(
                "spark master web UI",
                self._master,
                "master.log",
                lambda: self._grep_log("master.log", _WEBUI_PORT_RE),
                deadline,
            )
            self.webui_url = f"http://127.0.0.1:{webui_port}"
            for n in range(self.workers):
                name = "worker" if self.workers == 1 else f"worker-{n + 1}"
                work = self.work_dir / ("work" if self.workers == 1 else name)  # a directory of its own
                self._workers.append(
                    self._spawn(
                        name,
                        [
                            _WORKER_CLASS,
                            "--host",
                            "127.0.0.1",
                            "--port",
                            "0",
                            "--webui-port",
                            "0",
                            "--cores",
                            str(self.worker_cores),
                            "--memory",
                            self.worker_memory,
                            "--work-dir",
                            str(work),
                            self.master_url,
                        ],
                    )
                )
            self._wait_for("spark workers", self._workers[-1], f"{name}.log", self._worker_alive, deadline)
        except BaseException:
            self.stop()
            raise
        return self.master_url

    def stop(self, timeout: float = 30.0) -> None:
        """Stop the workers (and their executors), then the master; idempotent, never raises."""
        for proc in (*self._workers, self._master):
            if proc is not None:
                _stop(proc, timeout)
        self._workers, self._master = [], None

    def __enter__(self) -> StandaloneCluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()


def _stop(proc: subprocess.Popen[bytes], timeout: float) -> None:
    """SIGTERM the JVM (a worker's shutdown hooks kill its executors), SIGKILL after ``timeout``."""
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _seconds(text: str) -> float:
    """An argparse type: a finite number of seconds above 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number") from None
    if not 0 < value < float("inf"):  # nan fails both
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text}")
    return value


def _parser() -> argparse.ArgumentParser:
    """The command line's options (the command after ``--`` is split off before)."""
    parser = argparse.ArgumentParser(
        prog="python -m jobs.spark.standalone",
        usage="%(prog)s [options] [-- CMD ...]",
        description=__doc__.splitlines()[0],
        epilog="Prints the master URL (spark://127.0.0.1:PORT) once the worker has registered and runs until "
        "SIGTERM or Ctrl-C. With -- CMD ..., runs CMD with SPARK_MASTER_URL set to the URL instead, "
        "stops the cluster and exits with CMD's code.",
    )
    parser.add_argument("--work-dir", default=None, help="logs and worker dirs (default: a temporary dir, removed)")
    parser.add_argument("--worker-memory", default="2g", help="memory the worker offers executors (default 2g)")
    parser.add_argument(
        "--worker-cores",
        type=int_arg(1, MAX_WORKER_CORES),
        default=2,
        help=f"cores each worker offers, 1..{MAX_WORKER_CORES} (default 2)",
    )
    parser.add_argument(
        "--workers",
        type=int_arg(1, MAX_WORKERS),
        default=1,
        help=f"workers, each in its own directory and JVM, 1..{MAX_WORKERS} (default 1)",
    )
    parser.add_argument(
        "--timeout", type=_seconds, default=120.0, help="seconds to wait for start-up, more than 0 (default 120)"
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """``python -m jobs.spark.standalone``; returns the exit code.

    ::

        python -m jobs.spark.standalone [--work-dir DIR] [--worker-memory 2g] [--worker-cores 2]
            prints the master URL (spark://127.0.0.1:PORT) on stdout once the worker has registered,
            then runs until SIGTERM or SIGINT and stops the worker and the master.
        python -m jobs.spark.standalone [...] -- COMMAND ARG...
            runs COMMAND against the cluster ("{master}" in an argument becomes the URL, and
            SPARK_MASTER_URL is set), stops the cluster and exits with COMMAND's exit code.
    """
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:
        command = argv[argv.index("--") + 1 :]
        argv = argv[: argv.index("--")]
    args = _parser().parse_args(argv)

    work_dir = Path(args.work_dir) if args.work_dir else Path(tempfile.mkdtemp(prefix="nsaudit-standalone-"))
    cluster = StandaloneCluster(work_dir, args.worker_memory, args.worker_cores, workers=args.workers)
    stopping = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stopping.set())
    try:
        try:
            url = cluster.start(args.timeout)
        except ClusterError as exc:
            print(f"standalone: error: {exc}", file=sys.stderr)
            return 1
        if not command:
            print(url, flush=True)
            print(
                f"standalone: master UI {cluster.webui_url}, logs in {work_dir}; stop with SIGTERM or Ctrl-C",
                file=sys.stderr,
                flush=True,
            )
            while not stopping.wait(0.5):
                pass
            return 0
        child = subprocess.Popen(
            [a.replace("{master}", url) for a in command], env=dict(os.environ, SPARK_MASTER_URL=url)
        )
        while child.poll() is None:
            if stopping.wait(0.5):
                child.terminate()
        return child.wait()
    finally:
        cluster.stop()
        if not args.work_dir:
            shutil.rmtree(work_dir, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
