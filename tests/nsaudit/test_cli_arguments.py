"""Every command's bad arguments, as a user types them: one line on stderr, exit 2, no traceback.

Each case runs ``nsaudit.cli.main`` in this process (an exception escaping it is the traceback a
user would see); one case runs the real console entry point in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from nsaudit.cli import main

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture()
def places(tmp_path, monkeypatch):
    """An empty events folder, a plain file and a folder nothing can be created in, as relative names."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "events").mkdir()
    (tmp_path / "a-file").write_text("x")
    (tmp_path / "no-concurrency.toml").write_text("[collect]\nconcurrency = 0\n")
    (tmp_path / "latin1.toml").write_bytes(b"# caf\xe9\n[nameserver]\n")  # not UTF-8
    (tmp_path / "broken.toml").write_text("[nameserver\nlisten = \n")
    (tmp_path / "zero-snapshots.toml").write_text("[audit]\nsnapshot_interval_ms = 0\n")
    (tmp_path / "a-folder.toml").mkdir()
    (tmp_path / "huge-expiry.toml").write_text(f"[nameserver]\nbroker_expiry_ms = {_HUGE}\n")
    (tmp_path / "huge-interval.toml").write_text(f"[collect]\ninterval_ms = {_HUGE}\n")
    (tmp_path / "huge-float.toml").write_text("[audit]\nqueue_skew_cv = 1" + "0" * 400 + "\n")
    (tmp_path / "5000-digits.toml").write_text("[audit]\nclock_skew_ms = 1" + "0" * 5000 + "\n")
    os.mkfifo(tmp_path / "a-fifo.toml")  # no writer: reading it would wait for ever
    (tmp_path / "huge.toml").write_text("#" * (1 << 20) + "\n")  # a comment, but over 1 MiB
    return tmp_path


_HUGE = "9" * 20  # past a signed 64-bit integer

# Every command that takes --config, with its other arguments valid (or checked after the config).
_CONFIG_COMMANDS = {
    "nameserver": ["nameserver", "--ns-id", "ns-a", "--events", "events"],
    "collect": ["collect", "--namesrv", "127.0.0.1:9876", "--events", "obs", "--rounds", "1"],
    "fleet": ["fleet", "--ns", "127.0.0.1:9876", "--duration", "1"],
    "audit": ["audit", "--events", "events", "--lake", "lake", "--date", "2026-11-21"],
    "lake optimize": ["lake", "optimize", "--lake", "events"],
    "lake vacuum": ["lake", "vacuum", "--lake", "events"],
    "lake retention": ["lake", "retention", "--lake", "events"],
}
_BAD_CONFIGS = {
    "a folder": "a-folder.toml",
    "not UTF-8": "latin1.toml",
    "not TOML": "broken.toml",
    "a value out of range": "zero-snapshots.toml",
    "a device": "/dev/zero",
    "a FIFO": "a-fifo.toml",
    "over 1 MiB": "huge.toml",
    "a float key of 401 digits": "huge-float.toml",
    "an integer of 5001 digits": "5000-digits.toml",
}


def _config_cases() -> list[tuple[str, list[str]]]:
    return [
        (f"{name}: --config {what}", argv + ["--config", file])
        for name, argv in _CONFIG_COMMANDS.items()
        for what, file in _BAD_CONFIGS.items()
    ]


# local times whose zone offset moves them past the years 1 .. 9999 that datetime can hold
_LATE = "9999-12-31T23:59:59-23:59"
_EARLY = "0001-01-01T00:00:00+01:00"


def _time_cases() -> list[tuple[str, list[str]]]:
    route = ["route", "--lake", "events", "--ns", "ns-a", "--topic", "t", "--at"]
    cases = [
        (f"route: --at {text}", route + [text])
        for text in (
            "9999999999999999",
            "9" * 20,
            "-" + "9" * 20,
            "-99999999999999",
            "9999-12-31T12:00:00Z",
            "0001-01-01T00:00:00Z",
            "0001-01-02T00:00:00+01:00",
            # an offset that takes the instant past datetime's own limits
            "9999-12-31T23:59:59-23:59",
            "0001-01-01T00:00:00+01:00",
        )
    ]
    return cases + [
        ("cluster: --at 20 digits", ["cluster", "--lake", "events", "--ns", "ns-a", "--at", "9" * 20]),
        ("diff: --to 16 digits", ["diff", "--lake", "events", "--ns", "ns-a", "--from", "0", "--to", "9" * 16]),
        ("cluster: --at past year 9999", ["cluster", "--lake", "events", "--ns", "ns-a", "--at", _LATE]),
        ("diff: --from before year 1", ["diff", "--lake", "events", "--ns", "ns-a", "--from", _EARLY, "--to", "0"]),
        ("diff: --to past year 9999", ["diff", "--lake", "events", "--ns", "ns-a", "--from", "0", "--to", _LATE]),
        ("simulate: --start 16 digits", ["simulate", "--events", "sim", "--start", "9" * 16]),
        ("simulate: --start before year 1", ["simulate", "--events", "sim", "--start", _EARLY]),
        ("simulate: --start past year 9999", ["simulate", "--events", "sim", "--start", _LATE]),
        (
            "simulate: --start + --hours past the last day",
            ["simulate", "--events", "sim", "--start", "9999-12-30T23:00:00Z", "--hours", "2"],
        ),
        ("simulate: --hours past the last day", ["simulate", "--events", "sim", "--hours", "1e12"]),
        ("simulate: --hours of 1e308", ["simulate", "--events", "sim", "--hours", "1e308"]),
        ("audit: --date 9999-12-31", ["audit", "--events", "events", "--lake", "lake", "--date", "9999-12-31"]),
        ("incidents: --date 0001-01-01", ["incidents", "--lake", "events", "--date", "0001-01-01"]),
    ]


def _cases() -> list[tuple[str, list[str]]]:
    ns = ["nameserver", "--ns-id", "ns-a", "--events", "events"]
    sim = ["simulate", "--events", "sim", "--hours", "0.01"]
    fleet = ["fleet", "--ns", "127.0.0.1:9876", "--duration", "1"]
    audit = ["audit", "--events", "events", "--lake", "lake", "--date", "2026-11-21"]
    route = ["route", "--lake", "lake", "--ns", "ns-a", "--topic", "t", "--at", "0"]
    cluster = ["cluster", "--lake", "lake", "--ns", "ns-a", "--at", "0"]
    diff = ["diff", "--lake", "lake", "--ns", "ns-a", "--from", "0", "--to", "1"]
    demo = ["demo", "--dir", "demo"]
    lake = ["--lake", "events"]  # a folder without lake tables
    collect = ["collect", "--namesrv", "127.0.0.1:9876;127.0.0.1:9877", "--events", "obs", "--rounds", "1"]
    return [
        ("no command", []),
        ("unknown command", ["bogus"]),
        ("nameserver: missing --ns-id", ns[:1] + ns[3:]),
        ("nameserver: --listen not HOST:PORT", ns + ["--listen", "nowhere"]),
        ("nameserver: --listen port out of range", ns + ["--listen", "127.0.0.1:99999"]),
        ("nameserver: negative expiry", ns + ["--broker-expiry-ms", "-5"]),
        ("nameserver: scan interval not a number", ns + ["--scan-interval-ms", "often"]),
        ("nameserver: missing config", ns + ["--config", "missing.toml"]),
        ("simulate: negative --ns", sim + ["--ns", "-1"]),
        ("simulate: negative --brokers", sim + ["--brokers", "-1"]),
        ("simulate: --hours not a number", sim + ["--hours", "many"]),
        ("simulate: negative --hours", sim + ["--hours", "-3"]),
        ("simulate: bad --start", sim + ["--start", "2026-13-40T00:00:00Z"]),
        ("simulate: --start without a zone", sim + ["--start", "2026-11-21T00:00:00"]),
        ("simulate: unknown fault", sim + ["--faults", "expire,meteor"]),
        ("simulate: negative --fault-rate", sim + ["--fault-rate", "-1"]),
        ("simulate: --events cannot be made", ["simulate", "--events", "a-file/sim", "--hours", "0.01"]),
        ("fleet: --ns not HOST:PORT", ["fleet", "--ns", "nowhere"]),
        ("fleet: --ns port out of range", ["fleet", "--ns", "127.0.0.1:99999"]),
        ("fleet: negative --brokers", fleet + ["--brokers", "-1"]),
        ("fleet: --duration not a number", fleet + ["--duration", "long"]),
        ("fleet: tiny --period-ms", fleet + ["--period-ms", "5"]),
        ("fleet: unknown fault", fleet + ["--faults", "meteor"]),
        ("fleet: missing config", fleet + ["--config", "missing.toml"]),
        ("collect: missing --namesrv", collect[:1] + collect[3:]),
        (
            "collect: --namesrv entry not HOST:PORT",
            ["collect", "--namesrv", "127.0.0.1:9876;nowhere", "--events", "obs"],
        ),
        ("collect: --namesrv port 0", ["collect", "--namesrv", "127.0.0.1:0", "--events", "obs"]),
        ("collect: --namesrv empty", ["collect", "--namesrv", ";", "--events", "obs"]),
        ("collect: --namesrv twice the same", ["collect", "--namesrv", "h:1;h:1", "--events", "obs"]),
        ("collect: --namesrv bad stream id", ["collect", "--namesrv", "../x=h:1", "--events", "obs"]),
        ("collect: --interval-ms 0", collect + ["--interval-ms", "0"]),
        ("collect: --interval-ms not a number", collect + ["--interval-ms", "often"]),
        ("collect: negative --rounds", collect + ["--rounds", "-1"]),
        ("collect: missing config", collect + ["--config", "missing.toml"]),
        ("collect: --events is a file", collect[:4] + ["a-file"]),
        ("collect: [collect] concurrency 0", collect + ["--config", "no-concurrency.toml"]),
        ("collect: [collect] interval_ms past 64 bits", collect + ["--config", "huge-interval.toml"]),
        ("collect: --interval-ms past 64 bits", collect + ["--interval-ms", _HUGE]),
        ("collect: --rounds past 64 bits", collect + ["--rounds", _HUGE]),
        ("nameserver: [nameserver] broker_expiry_ms past 64 bits", ns + ["--config", "huge-expiry.toml"]),
        ("nameserver: --broker-expiry-ms past 64 bits", ns + ["--broker-expiry-ms", _HUGE]),
        ("nameserver: --scan-interval-ms past 64 bits", ns + ["--scan-interval-ms", _HUGE]),
        ("nameserver: --broker-expiry-ms over ten years", ns + ["--broker-expiry-ms", "315360000001"]),
        ("simulate: --ns past 64 bits", sim + ["--ns", _HUGE]),
        ("simulate: --brokers past 64 bits", sim + ["--brokers", _HUGE]),
        ("simulate: --slaves past 64 bits", sim + ["--slaves", _HUGE]),
        ("simulate: --topics past 64 bits", sim + ["--topics", _HUGE]),
        ("simulate: --seed past 64 bits", sim + ["--seed", _HUGE]),
        ("fleet: --brokers past 64 bits", fleet + ["--brokers", _HUGE]),
        ("fleet: --topics past 64 bits", fleet + ["--topics", _HUGE]),
        ("fleet: --period-ms past 64 bits", fleet + ["--period-ms", _HUGE]),
        ("fleet: --seed past 64 bits", fleet + ["--seed", _HUGE]),
        ("demo: --brokers past 64 bits", demo + ["--brokers", _HUGE]),
        ("demo: --seed past 64 bits", demo + ["--seed", _HUGE]),
        ("route: --version past 64 bits", route + ["--version", _HUGE]),
        ("lake vacuum: --retain-hours past 64 bits", ["lake", "vacuum", "--retain-hours", _HUGE, "--force"] + lake),
        ("lake retention: --keep-days past 64 bits", ["lake", "retention", "--keep-days", _HUGE] + lake),
        ("lake history: --limit past 64 bits", ["lake", "history", "events", "--limit", _HUGE] + lake),
        ("audit: impossible --date", audit[:-1] + ["2026-13-40"]),
        ("audit: --date not a date", audit[:-1] + ["yesterday"]),
        ("audit: missing --events", ["audit", "--events", "missing", "--lake", "lake", "--date", "2026-11-21"]),
        ("audit: --lake is a file", ["audit", "--events", "events", "--lake", "a-file", "--date", "2026-11-21"]),
        ("audit: --lake cannot be made", ["audit", "--events", "events", "--lake", "a-file/lake"]),
        ("audit: missing config", audit + ["--config", "missing.toml"]),
        ("audit: bad --master", audit + ["--master", "bogus"]),
        ("audit: bad --fail-on", audit + ["--fail-on", "sometimes"]),
        ("route: missing --topic", route[:5] + route[7:]),
        ("route: --at not a time", route[:-1] + ["noon"]),
        ("route: --at without a zone", route[:-1] + ["2026-11-21T12:00:00"]),
        ("route: missing lake", route),
        ("cluster: impossible --at", cluster[:-1] + ["2026-13-40T00:00:00Z"]),
        ("diff: --from after --to", diff[:-4] + ["--from", "5", "--to", "1"]),
        ("diff: --to not a time", diff[:-1] + ["later"]),
        ("route: --version not a number", route + ["--version", "latest"]),
        ("lake: no command", ["lake"]),
        ("lake: unknown command", ["lake", "defrag"] + lake),
        ("lake optimize: missing --lake", ["lake", "optimize"]),
        ("lake optimize: --lake not found", ["lake", "optimize", "--lake", "missing"]),
        ("lake optimize: no tables in --lake", ["lake", "optimize"] + lake),
        ("lake vacuum: --retain-hours not a number", ["lake", "vacuum", "--retain-hours", "week"] + lake),
        ("lake vacuum: below 168 h without --force", ["lake", "vacuum", "--retain-hours", "1"] + lake),
        ("lake vacuum: negative --retain-hours", ["lake", "vacuum", "--retain-hours", "-1", "--force"] + lake),
        ("lake retention: negative --keep-days", ["lake", "retention", "--keep-days", "-1"] + lake),
        ("lake retention: missing config", ["lake", "retention", "--config", "missing.toml"] + lake),
        ("lake history: missing TABLE", ["lake", "history"] + lake),
        ("lake history: no such table", ["lake", "history", "events"] + lake),
        ("lake history: zero --limit", ["lake", "history", "events", "--limit", "0"] + lake),
        ("demo: negative --brokers", demo + ["--brokers", "-1"]),
        ("demo: --topics not a number", demo + ["--topics", "many"]),
        ("demo: --dir cannot be made", ["demo", "--dir", "a-file/demo"]),
        ("demo: --seed not a number", demo + ["--seed", "x"]),
    ]


_ALL = _cases() + _config_cases() + _time_cases()


@pytest.mark.parametrize("argv", [argv for _, argv in _ALL], ids=[name for name, _ in _ALL])
def test_a_bad_argument_is_one_line_and_exit_2(places, capsys, argv):
    code = main(argv)
    out, err = capsys.readouterr()
    assert code == 2, err
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("nsaudit"), err
    assert "Traceback" not in err


@pytest.mark.parametrize(
    "what, file, says",
    [
        ("a folder", "a-folder.toml", "is a directory"),
        ("not UTF-8", "latin1.toml", "not UTF-8"),
        ("not TOML", "broken.toml", "not valid TOML"),
        ("a device", "/dev/zero", "not a regular file"),
        ("a FIFO", "a-fifo.toml", "not a regular file"),
        ("over 1 MiB", "huge.toml", "larger than 1048576 bytes"),
    ],
)
def test_a_bad_config_names_the_file_and_what_is_wrong(places, capsys, what, file, says):
    assert main(_CONFIG_COMMANDS["nameserver"] + ["--config", file]) == 2
    err = capsys.readouterr().err
    assert file in err and says in err, err


@pytest.mark.parametrize("argv", [argv for _, argv in _time_cases()], ids=[name for name, _ in _time_cases()])
def test_an_out_of_range_time_is_refused_for_its_range(places, capsys, argv):
    # The lake of these cases has no tables: the time must be refused before the lake is read.
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "out of range" in err or "ends after 9999-12-30T23:59:59.999Z" in err, err


@pytest.mark.parametrize(
    "argv, says",
    [
        (
            _CONFIG_COMMANDS["nameserver"] + ["--config", "huge-expiry.toml"],
            f"huge-expiry.toml: nameserver.broker_expiry_ms must be <= 315360000000 (ten years), not {_HUGE}",
        ),
        (
            _CONFIG_COMMANDS["collect"] + ["--config", "huge-interval.toml"],
            f"huge-interval.toml: collect.interval_ms must be <= 315360000000 (ten years), not {_HUGE}",
        ),
        (
            _CONFIG_COMMANDS["nameserver"] + ["--broker-expiry-ms", _HUGE],
            f"argument --broker-expiry-ms: must be in 1..315360000000 (ten years), not {_HUGE}",
        ),
        (
            _CONFIG_COMMANDS["nameserver"] + ["--scan-interval-ms", "0"],
            "argument --scan-interval-ms: must be in 1..315360000000 (ten years), not 0",
        ),
        (
            _CONFIG_COMMANDS["collect"] + ["--interval-ms", _HUGE],
            f"argument --interval-ms: must be in 1..315360000000 (ten years), not {_HUGE}",
        ),
    ],
)
def test_an_integer_out_of_range_names_the_key_and_the_range(places, capsys, argv, says):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert says in err, err


def test_the_console_script_shows_no_traceback_for_a_bad_date(tmp_path):
    (tmp_path / "events").mkdir()
    proc = subprocess.run(
        [sys.executable, "-m", "nsaudit.cli", "audit", "--events", "events", "--lake", "lake", "--date", "2026-13-40"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert line.startswith("nsaudit audit: error: argument --date: not a date: '2026-13-40'"), line


@pytest.mark.parametrize(
    "argv",
    [
        ["--events", "events"],  # no --ns-id
        ["--ns-id", "a", "--events", "events", "--config", "."],  # a folder as the config
        ["--ns-id", "a", "--events", "events", "--broker-expiry-ms", "soon"],
        ["--ns-id", "a", "--events", "events", "--bogus"],
    ],
)
def test_python_m_nameserver_bad_arguments_are_one_line(tmp_path, argv):
    proc = subprocess.run(
        [sys.executable, "-m", "nameserver", *argv],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
    )
    assert proc.returncode == 2
    [line] = proc.stderr.splitlines()
    assert line.startswith("nsaudit nameserver: error: ") and "Traceback" not in proc.stderr, proc.stderr
