"""Events and lakes in a bucket: what ``s3a://`` may name, where its settings come from, and what a
user sees when the bucket is missing, the key wrong, the endpoint dead or the day empty: one line,
exit 2, no secret, nothing written (docs/deploy.md, "Object storage").

A real S3 server (S3Proxy, the ``s3_server`` fixture) answers; nothing here starts Spark.
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import subprocess
import sys
from pathlib import Path

import pyarrow.fs as pafs
import pytest

from common.config import ConfigError, StorageConfig
from jobs.ingest.segments import IngestInputError, list_day_segments
from jobs.storage import locations, settings
from jobs.storage.problems import StorageError, check_reachable
from jobs.storage.s3proxy import free_port
from tests.jobs.buckets import BUCKET, config_file, on_s3, server_settings, subprocess_env, upload

DAY = dt.date(2026, 11, 21)
REPO = Path(__file__).resolve().parents[3]


@pytest.mark.parametrize(
    "text, normalised",
    [
        ("s3a://audit-lake/prod/", "s3a://audit-lake/prod"),
        ("s3://audit-lake//prod/lake", "s3a://audit-lake/prod/lake"),
        ("s3a://audit-lake", "s3a://audit-lake"),
        ("file:///var/lib/nsaudit/lake", "/var/lib/nsaudit/lake"),
    ],
)
def test_locations_are_normalised_once(text, normalised):
    assert locations.check(text) == normalised
    assert locations.join(normalised, "events") == normalised + "/events"


@pytest.mark.parametrize(
    "text, message",
    [
        ("hdfs://nn/lake", "unsupported scheme hdfs://"),
        ("s3a://Bad_Bucket/x", "is not an S3 bucket name"),
        ("s3a://", "is not an S3 bucket name"),
        ("s3a://AKIAEXAMPLE:topsecret@bucket/lake", "credentials in an s3a:// URI are not accepted"),
    ],
)
def test_a_location_that_cannot_be_used_is_refused(text, message):
    with pytest.raises(ValueError, match=message) as raised:
        locations.check(text)
    assert "topsecret" not in str(raised.value)


def test_settings_come_from_the_config_else_the_aws_environment(tmp_path):
    environ = {
        "AWS_ENDPOINT_URL": "http://env:9000",
        "AWS_REGION": "eu-west-1",
        "AWS_ACCESS_KEY_ID": "env-key",
        "AWS_SECRET_ACCESS_KEY": "env-secret",
    }
    from_env = settings.resolve(StorageConfig(), environ)
    assert (from_env.store.endpoint, from_env.store.region, from_env.store.access_key) == (
        "http://env:9000",
        "eu-west-1",
        "env-key",
    )
    assert from_env.credentials_from == "AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"

    credentials = tmp_path / "credentials"
    credentials.write_text("[audit]\naws_access_key_id = file-key\naws_secret_access_key = file-secret\n")
    config = StorageConfig(
        endpoint="http://cfg:9000",
        region="us-west-2",
        path_style=True,
        credentials_file=str(credentials),
        profile="audit",
    )
    from_config = settings.resolve(config, environ)
    assert (from_config.store.endpoint, from_config.store.region, from_config.store.secret_key) == (
        "http://cfg:9000",
        "us-west-2",
        "file-secret",
    )
    options = from_config.delta_options()
    assert options["aws_conditional_put"] == "etag"  # commits never overwrite a version (docs/audit.md)
    assert (options["AWS_ALLOW_HTTP"], options["AWS_VIRTUAL_HOSTED_STYLE_REQUEST"]) == ("true", "false")
    hadoop = from_config.hadoop_conf()
    assert (hadoop["fs.s3a.path.style.access"], hadoop["fs.s3a.connection.ssl.enabled"]) == ("true", "false")
    assert hadoop["fs.s3a.secret.key"] == "file-secret"
    # no secret in what a plan or a settings object shows
    assert "file-secret" not in repr(from_config) and "file-key" not in repr(from_config.store)
    assert settings.redact("key file-key, secret file-secret", from_config) == "key ***, secret ***"


@pytest.mark.parametrize(
    "content, message",
    [
        (None, "No such file"),
        ("[other]\naws_access_key_id = k\naws_secret_access_key = s3cr3t\n", "no [default] profile"),
        ("[default]\naws_access_key_id = k\n", "needs aws_access_key_id and aws_secret_access_key"),
    ],
)
def test_a_bad_credentials_file_names_the_file_not_a_key(tmp_path, content, message):
    path = tmp_path / "credentials"
    if content is not None:
        path.write_text(content)
    with pytest.raises(ConfigError, match=re.escape(message)) as raised:
        settings.resolve(StorageConfig(credentials_file=str(path)), {})
    assert str(path) in str(raised.value) and "s3cr3t" not in str(raised.value)


def test_a_credentials_file_that_is_a_device_or_not_utf8_is_one_config_error(tmp_path):
    latin1 = tmp_path / "credentials"
    latin1.write_bytes(b"[default]\naws_access_key_id = caf\xe9\naws_secret_access_key = s3cr3t\n")
    for path, message in (("/dev/zero", "not a regular file"), (str(latin1), "not UTF-8 text")):
        with pytest.raises(ConfigError, match=message) as raised:
            settings.resolve(StorageConfig(credentials_file=path), {})
        assert str(raised.value).startswith(f"storage.credentials_file {path}: ") and "s3cr3t" not in str(raised.value)


def test_a_bucket_day_lists_closed_segments_and_says_what_it_skips(s3_server, tmp_path, caplog):
    day_dir = tmp_path / "events" / "ns-a" / DAY.isoformat()
    day_dir.mkdir(parents=True)
    (day_dir / "events-00000000000000000001.jsonl").write_text('{"v":1}\n')
    (day_dir / "events-00000000000000000009.jsonl.gz").write_bytes(b"")
    # a sync that copied a segment still being written, and an upload tool's temporary file
    (day_dir / "events-00000000000000000042.jsonl.open").write_text('{"v":1}\n{"v"')
    (day_dir / "events-00000000000000000042.jsonl.part").write_text("")
    (tmp_path / "events" / "ns-b" / "2026-11-20").mkdir(parents=True)
    (tmp_path / "events" / "ns-b" / "2026-11-20" / "events-00000000000000000001.jsonl").write_text("{}\n")
    events = upload(s3_server, tmp_path / "events", "listing/events")
    with on_s3(s3_server), caplog.at_level(logging.WARNING):
        found = list_day_segments(events, DAY)
        assert [(s.file, s.compressed, s.path) for s in found] == [
            (
                "ns-a/2026-11-21/events-00000000000000000001.jsonl",
                False,
                f"{events}/ns-a/2026-11-21/events-00000000000000000001.jsonl",
            ),
            (
                "ns-a/2026-11-21/events-00000000000000000009.jsonl.gz",
                True,
                f"{events}/ns-a/2026-11-21/events-00000000000000000009.jsonl.gz",
            ),
        ]
        warned = " ".join(r.getMessage() for r in caplog.records)
        assert "skipped 2 objects" in warned
        assert "events-00000000000000000042.jsonl.open (still open when it was copied)" in warned
        assert "events-00000000000000000042.jsonl.part (not a segment)" in warned
        with pytest.raises(IngestInputError, match="no event-log segments for 2026-11-22"):
            list_day_segments(events, DAY + dt.timedelta(days=1))


def test_a_missing_bucket_refused_credentials_or_a_dead_endpoint_is_said_in_one_line(s3_server):
    with on_s3(s3_server):
        check_reachable(f"s3a://{BUCKET}/anything")  # the bucket is there, the prefix need not be
        with pytest.raises(StorageError, match=r"^s3a://no-such-bucket/lake: bucket no-such-bucket does not exist"):
            check_reachable("s3a://no-such-bucket/lake")
    wrong = settings.resolve(
        s3_server.storage_config(credentials_file=str(s3_server.credentials_file(secret="wrong-secret-value"))), {}
    )
    previous = settings._current
    try:
        settings.use(wrong)
        with pytest.raises(
            StorageError,
            match=r"^s3a://nsaudit/lake: access denied \(credentials from "
            r"\[storage\] credentials_file .*\)$",
        ) as raised:
            check_reachable(f"s3a://{BUCKET}/lake")
        assert s3_server.access_key not in str(raised.value)
        settings.use(settings.resolve(s3_server.storage_config(endpoint=f"http://127.0.0.1:{free_port()}"), {}))
        with pytest.raises(StorageError, match=r"cannot reach the object store at http://127\.0\.0\.1:\d+ "):
            check_reachable(f"s3a://{BUCKET}/lake")
    finally:
        settings._current = previous


def _audit(argv: list[str]) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "nsaudit.cli", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=subprocess_env(),
        cwd=REPO,
    )


def _lake_objects(server, prefix: str) -> list[str]:
    fs = server_settings(server).store.filesystem()
    selector = pafs.FileSelector(f"{BUCKET}/{prefix}", recursive=True, allow_not_found=True)
    return [info.path for info in fs.get_file_info(selector)]


@pytest.mark.parametrize("case", ["wrong credentials", "missing bucket", "unreachable endpoint", "no events that day"])
def test_bad_input_is_one_line_exit_2_and_leaves_the_lake_as_it_was(s3_server, tmp_path, case):
    """``nsaudit audit`` and ``nsaudit route`` on a bucket: one line naming the problem, no trace,
    no secret, exit 2, and not one object written (the check comes before the first write)."""
    day_dir = tmp_path / "events" / "ns-a" / DAY.isoformat()
    day_dir.mkdir(parents=True)
    (day_dir / "events-00000000000000000001.jsonl").write_text("{}\n")
    upload(s3_server, tmp_path / "events", f"bad-input/{case.replace(' ', '-')}/events")
    base = f"s3a://{BUCKET}/bad-input/{case.replace(' ', '-')}"
    events, lake, date = f"{base}/events", f"{base}/lake", DAY.isoformat()
    storage, expected = {}, ""
    if case == "wrong credentials":
        storage = {"credentials_file": str(s3_server.credentials_file(secret="not-the-secret-4711"))}
        expected = f"{events}: access denied (credentials from [storage] credentials_file"
    elif case == "missing bucket":
        events, lake = "s3a://no-such-bucket/events", "s3a://no-such-bucket/lake"
        expected = "s3a://no-such-bucket/events: bucket no-such-bucket does not exist at http://127.0.0.1:"
    elif case == "unreachable endpoint":
        storage = {"endpoint": f"http://127.0.0.1:{free_port()}"}
        expected = f"{events}: cannot reach the object store at http://127.0.0.1:"
    else:
        date = (DAY + dt.timedelta(days=1)).isoformat()
        expected = f"no event-log segments for {date} under {events}"
    config = config_file(s3_server, tmp_path / "audit.toml", **storage)
    audit = _audit(["audit", "--events", events, "--lake", lake, "--date", date, "--config", str(config)])
    assert audit.returncode == 2, audit.stderr
    assert audit.stderr.count("\n") == 1 and expected in audit.stderr, audit.stderr
    for secret in (s3_server.secret_key, "not-the-secret-4711"):
        assert secret not in audit.stderr + audit.stdout
    assert _lake_objects(s3_server, f"bad-input/{case.replace(' ', '-')}/lake") == []
    if case != "no events that day":
        route = _audit(
            [
                "route",
                "--lake",
                lake,
                "--ns",
                "ns-a",
                "--topic",
                "t",
                "--at",
                f"{date}T01:00:00Z",
                "--config",
                str(config),
            ]
        )
        assert route.returncode == 2 and route.stderr.count("\n") == 1, route.stderr
        assert expected.replace(events, lake).split(" (")[0] in route.stderr, route.stderr
