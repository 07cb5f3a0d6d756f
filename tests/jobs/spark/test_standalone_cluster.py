"""The nightly audit on a real Spark standalone cluster, with the events and the lake only in a
bucket, gives the same tables as on ``local[2]`` with local folders.

The cluster side runs in subprocesses, as a user would run it: ``python -m jobs.spark.standalone``
starts a master and two workers on 127.0.0.1, each in its own directory, and ``spark-submit``
runs ``jobs/nightly_audit.py`` with the project shipped as a zip (``--py-files``) and hadoop-aws as
``--jars``, auditing the test session's fault-free day (``tests.jobs.fault_free``, every stage),
uploaded to the session's S3 server, into an ``s3a://`` lake: executors in the workers' JVMs read
the segments and write the Delta files through the bucket, never a local path. The executors' Python
is the venv's without its site (``-S``): its packages are on the path, but not the ``.pth`` of this
project's editable install, so a module missing from the zip fails the run instead of loading from
the checkout. The reference is the same day audited on the session's ``local[2]`` into a local lake,
which runs with other Spark settings (the small-day ones of ``jobs.spark.profile``: no adaptive
execution, broadcast joins or code generation, other partition counts), while the cluster runs with
Spark's own (``small_day_bytes = 0``): every table, and the report's ``summary.json``, must not
depend on any of that either (``bench/lake_diff.py``'s comparison). docs/deploy.md, "A cluster",
describes the same run.
"""

from __future__ import annotations

import importlib.util
import json
import os
import signal
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

from jobs.lake.tables import count_table_rows
from jobs.spark.profile import SMALL_DAY_JAVA_OPTIONS
from jobs.spark.s3a import hadoop_aws_jars
from jobs.spark.standalone import spark_home
from tests.jobs.buckets import BUCKET, config_file, on_s3, upload
from tests.jobs.fault_free import (
    DAY,
    fault_free_day,  # noqa: F401 - the shared audited day (a fixture)
)

pytestmark = [pytest.mark.slow, pytest.mark.spark, pytest.mark.timeout(1800)]

REPO = Path(__file__).resolve().parents[3]
_spec = importlib.util.spec_from_file_location("lake_diff", REPO / "bench" / "lake_diff.py")
lake_diff = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(lake_diff)
AUDIT_TIMEOUT_S = 900  # the machine is shared: a 2-hour day takes minutes under load


def _subprocess_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    # The audit must pick the executors' Python itself (build_session), not inherit the one a
    # test session may have set; nor may it think it runs under spark-submit.
    for name in (
        "PYSPARK_PYTHON",
        "PYSPARK_DRIVER_PYTHON",
        "PYSPARK_GATEWAY_PORT",
        "PYSPARK_GATEWAY_SECRET",
        "SPARK_MASTER_URL",
        # nor a path to the checkout: Spark hands the workers' PYTHONPATH on to the executors
        "PYTHONPATH",
    ):
        env.pop(name, None)
    # Every JVM of the cluster (master, workers, driver, executors) compiles with the JIT's first
    # tier only, as a small day's audit does: the optimizing tier spends minutes of the two cores'
    # time compiling code this small day runs a few times. JIT flags change no result; the plan
    # settings under test stay Spark's own.
    env["JAVA_TOOL_OPTIONS"] = SMALL_DAY_JAVA_OPTIONS
    return env


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    """``(master URL, work dir)`` of a standalone master and two workers; torn down however the test ends."""
    work = tmp_path_factory.mktemp("standalone")
    with open(work / "cli.log", "wb") as cli_log:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "jobs.spark.standalone",
                "--work-dir",
                str(work),
                "--worker-memory",
                "1g",
                "--worker-cores",
                "1",
                "--workers",
                "2",
                "--timeout",
                "180",
            ],
            cwd=REPO,
            env=_subprocess_env(),
            stdout=subprocess.PIPE,
            stderr=cli_log,
            text=True,
            start_new_session=True,  # the master and worker JVMs join this group: one kill takes all
        )
    try:
        url = proc.stdout.readline().strip()  # "" if the script gave up (it exits 1 then)
        assert url.startswith("spark://127.0.0.1:"), (
            f"standalone cluster did not start (exit {proc.poll()}):\n{(work / 'cli.log').read_text()}"
        )
        yield url, work
    finally:
        proc.terminate()  # SIGTERM: the script stops the worker, then the master
        try:
            proc.wait(60)
        except subprocess.TimeoutExpired:
            pass
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # whatever is left of the group, if anything
        except (ProcessLookupError, PermissionError):
            pass
        proc.wait()


def _zip_of_the_project(path: Path) -> Path:
    """The project's packages as one zip, as a user ships them (``--py-files``)."""
    with zipfile.ZipFile(path, "w") as archive:
        for package in ("common", "jobs", "nameserver", "schemas"):
            for file in sorted((REPO / package).rglob("*")):
                if file.suffix in (".py", ".json") and "__pycache__" not in file.parts:
                    archive.write(file, file.relative_to(REPO))
    return path


def _executor_python(directory: Path) -> Path:
    """An interpreter for the executors: the venv's Python without its site (``-S``), its packages
    on ``PYTHONPATH`` (entries there are not site directories, so no ``.pth`` file runs, and the
    editable install of this project, a ``.pth`` finder, is not there). Each start is logged in
    ``executor-python.log`` beside it."""
    wrapper = directory / "executor-python"
    packages = sysconfig.get_paths()["purelib"]
    wrapper.write_text(
        "#!/bin/sh\n"
        f'echo "$@" >> "{directory}/executor-python.log"\n'
        f'PYTHONPATH="{packages}${{PYTHONPATH:+:$PYTHONPATH}}" exec "{sys.executable}" -S "$@"\n'
    )
    wrapper.chmod(0o755)
    return wrapper


def _start_audit(events: str, lake: str, config: Path, master: str, log_dir: Path) -> subprocess.Popen:
    jars = hadoop_aws_jars()
    assert jars, "hadoop-aws's jars are missing: bash jars/fetch.sh hadoop-aws"
    argv = [
        os.path.join(spark_home(), "bin", "spark-submit"),
        "--master",
        master,
        "--py-files",
        str(_zip_of_the_project(log_dir / "nsaudit.zip")),
        "--jars",
        ",".join(jars),
        "--conf",
        f"spark.pyspark.python={_executor_python(log_dir)}",
        "--conf",
        f"spark.pyspark.driver.python={sys.executable}",
        "--driver-memory",
        "1g",
        str(REPO / "jobs" / "nightly_audit.py"),
        "--events",
        events,
        "--lake",
        lake,
        "--date",
        DAY.isoformat(),
        "--config",
        str(config),
        "--verbose",
    ]  # Spark's log on stderr too
    with open(log_dir / "cluster.out", "wb") as out, open(log_dir / "cluster.err", "wb") as err:
        return subprocess.Popen(argv, cwd=log_dir, env=_subprocess_env(), stdout=out, stderr=err)


def _wait_audit(proc: subprocess.Popen, master: str, log_dir: Path) -> None:
    name = "cluster" if master.startswith("spark://") else "local"
    code = proc.wait(AUDIT_TIMEOUT_S)
    log = (log_dir / f"{name}.err").read_text(errors="replace")
    stderr = log[-4000:]
    # 134 is the SIGABRT at interpreter exit that jobs/lake/delta/arrow.py fixed; name it if it is back.
    assert code != 134, f"audit on {master} aborted at exit (134, see jobs/lake/delta/arrow.py):\n{stderr}"
    assert code == 0, f"audit on {master} exited {code}:\n{stderr}"
    # the stages free their checkpoints after the last read: nothing for the log to warn about
    assert "was locally checkpointed" not in log, [line for line in log.splitlines() if "checkpointed" in line][:3]
    summary = json.loads((log_dir / f"{name}.out").read_text().strip().splitlines()[-1])
    assert summary["date"] == DAY.isoformat()


def test_audit_on_a_two_worker_cluster_with_a_bucket_equals_local(
    cluster,
    fault_free_day,  # noqa: F811  (the imported fixture)
    s3_server,
    tmp_path,
    capsys,
):
    url, work = cluster
    events = upload(s3_server, fault_free_day.events, "cluster/events")
    lake = f"s3a://{BUCKET}/cluster/lake"
    config = config_file(s3_server, tmp_path / "audit.toml")
    # Spark's own plan settings on the cluster (adaptive execution, broadcasts, code generation),
    # not the small-day ones the session's reference ran with (jobs.spark.profile)
    config.write_text(
        config.read_text().replace(
            'driver_memory = "1g"\nshuffle_partitions = 2',
            'driver_memory = "1g"\nshuffle_partitions = 3\nsmall_day_bytes = 0',
        )
    )
    proc = _start_audit(events, lake, config, url, tmp_path)
    try:
        _wait_audit(proc, url, tmp_path)
    finally:
        if proc.poll() is None:  # timed out: take it down
            proc.kill()
            proc.wait()

    # The run was an application of that master, with an executor on each worker, each in its own directory.
    master_log = (work / "master.log").read_text(errors="replace")
    assert f"Registered app nsaudit-audit-{DAY.isoformat()}" in master_log
    assert master_log.count("Launching executor") == 2, master_log[-3000:]
    for n in (1, 2):
        assert list((work / f"worker-{n}").glob("app-*/*/stderr")), f"worker-{n} ran no executor"

    # Python workers ran on the executors, through the interpreter without the editable install
    starts = (tmp_path / "executor-python.log").read_text().splitlines()
    assert any("pyspark.daemon" in line or "pyspark.worker" in line for line in starts), starts

    # every table, and the report's summary.json, as bench/lake_diff.py compares two lakes
    with on_s3(s3_server):
        code = lake_diff.main([str(fault_free_day.lake), lake, "--config", str(config)])
        for table in ("events", "topic_route_history", "liveness_windows", "route_snapshots"):
            assert count_table_rows(f"{lake}/{table}") > 0, f"{table} is empty: the day exercises nothing"
    compared = capsys.readouterr().out
    assert code == 0, compared
    tables = [line.split()[0] for line in compared.splitlines() if line.endswith(" same")]
    assert len(tables) == 18, compared  # every table of the audit
