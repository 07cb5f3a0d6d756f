"""``python -m jobs.spark.standalone`` refuses a worker count, core count or timeout it cannot
honour with one line and exit code 2, before it starts a JVM."""

from __future__ import annotations

import subprocess
import sys

import pytest

from jobs.spark.standalone import StandaloneCluster


@pytest.mark.parametrize(
    ("flag", "value", "says"),
    [
        ("--workers", "0", "--workers: must be in 1..32, not 0"),
        ("--workers", "99999999999999999999999", "--workers: must be in 1..32"),
        ("--worker-cores", "0", "--worker-cores: must be in 1..1024, not 0"),
        ("--worker-cores", "two", "--worker-cores: 'two' is not a whole number"),
        ("--timeout", "nan", "--timeout: must be a number of seconds above 0, not nan"),
        ("--timeout", "-1", "--timeout: must be a number of seconds above 0, not -1"),
        ("--timeout", "1e999", "--timeout: must be a number of seconds above 0, not 1e999"),
    ],
)
def test_a_value_out_of_range_is_one_line_and_exit_2(flag, value, says, tmp_path):
    run = subprocess.run(
        [sys.executable, "-m", "jobs.spark.standalone", "--work-dir", str(tmp_path), flag, value, "--", "true"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert run.returncode == 2, run.stderr
    errors = [line for line in run.stderr.splitlines() if "error:" in line]
    assert len(errors) == 1 and says in errors[0], run.stderr
    assert "Traceback" not in run.stderr and not list(tmp_path.iterdir())  # nothing was started


def test_the_class_refuses_no_workers():
    with pytest.raises(ValueError, match="workers must be in 1..32"):
        StandaloneCluster(".", workers=0)
