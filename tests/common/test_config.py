"""Config: TOML into frozen objects; unknown keys and wrong types are errors naming key and file."""

import dataclasses
import os

import pytest

from common.config import DEFAULT_CONFIG_PATH, MAX_CONFIG_BYTES, Config, ConfigError, load_config, max_of
from nsaudit.cli import main


def test_the_shipped_file_loads_with_the_spec_defaults():
    cfg = load_config(DEFAULT_CONFIG_PATH)
    assert cfg.nameserver.broker_expiry_ms == 120_000
    assert cfg.nameserver.scan_interval_ms == 10_000
    assert cfg.audit.snapshot_interval_ms == 300_000
    assert cfg.audit.divergence_grace_ms is None  # derived unless set
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.audit.snapshot_interval_ms = 1  # type: ignore[misc]


def test_an_unknown_key_names_the_key_and_the_file(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text("[audit]\ndivergence_grace = 40000\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert "divergence_grace" in str(err.value) and str(path) in str(err.value)


def test_an_unknown_section_and_a_wrong_type_are_errors(tmp_path):
    (tmp_path / "a.toml").write_text("[nope]\nx = 1\n")
    with pytest.raises(ConfigError, match="nope"):
        load_config(tmp_path / "a.toml")
    (tmp_path / "b.toml").write_text('[nameserver]\nbroker_expiry_ms = "soon"\n')
    with pytest.raises(ConfigError, match="broker_expiry_ms"):
        load_config(tmp_path / "b.toml")


def test_keys_set_in_a_file_override_defaults(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text("[audit]\ndivergence_grace_ms = 40000\nsnapshot_interval_ms = 60000\n")
    cfg = load_config(path)
    assert (cfg.audit.divergence_grace_ms, cfg.audit.snapshot_interval_ms) == (40_000, 60_000)


def test_the_cli_reports_a_bad_config_in_one_line(tmp_path, capsys):
    path = tmp_path / "bad.toml"
    path.write_text("[audit]\nbogus = 1\n")
    code = main(
        [
            "audit",
            "--events",
            str(tmp_path),
            "--lake",
            str(tmp_path / "lake"),
            "--date",
            "2026-11-20",
            "--config",
            str(path),
        ]
    )
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1 and "bogus" in err[0] and "Traceback" not in err[0]


@pytest.mark.parametrize(
    "text, key",
    [
        ("[audit]\nsnapshot_interval_ms = 0\n", "audit.snapshot_interval_ms"),
        ("[audit]\nclock_skew_ms = -1\n", "audit.clock_skew_ms"),
        ("[audit]\nqueue_skew_cv = nan\n", "audit.queue_skew_cv"),
        ("[audit]\ndivergence_grace_ms = -5\n", "audit.divergence_grace_ms"),
        ("[eventlog]\nsegment_max_bytes = 0\n", "eventlog.segment_max_bytes"),
        ("[spark]\nshuffle_partitions = 0\n", "spark.shuffle_partitions"),
    ],
)
def test_a_value_out_of_its_range_names_the_key_and_the_file(tmp_path, text, key):
    path = tmp_path / "range.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert key in str(err.value) and str(path) in str(err.value)


def test_a_folder_or_a_non_utf8_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="is a directory"):
        load_config(tmp_path)
    (tmp_path / "latin1.toml").write_bytes(b"# caf\xe9\n")
    with pytest.raises(ConfigError, match="not UTF-8"):
        load_config(tmp_path / "latin1.toml")


def test_a_device_a_fifo_or_a_huge_file_is_refused_without_reading_it(tmp_path):
    os.mkfifo(tmp_path / "fifo.toml")  # no writer: a read would wait for ever
    for path in ("/dev/zero", tmp_path / "fifo.toml"):
        with pytest.raises(ConfigError, match="not a regular file"):
            load_config(path)
    (tmp_path / "huge.toml").write_text("#" * MAX_CONFIG_BYTES + "\n")
    with pytest.raises(ConfigError, match="larger than 1048576 bytes"):
        load_config(tmp_path / "huge.toml")
    (tmp_path / "just.toml").write_text("#" * (MAX_CONFIG_BYTES - 1) + "\n")  # 1 MiB exactly
    assert load_config(tmp_path / "just.toml") == Config()
    assert load_config("/dev/null") == Config()  # the one device read: empty, every default


def _integer_keys() -> list[tuple[str, str]]:
    """Every integer key of the config, as (section, key)."""
    return [
        (section.name, f.name)
        for section in dataclasses.fields(Config)
        for f in dataclasses.fields(section.default_factory())
        if "int" in str(f.type)
    ]


@pytest.mark.parametrize("section, key", _integer_keys(), ids=[f"{s}.{k}" for s, k in _integer_keys()])
def test_every_integer_key_is_bounded_by_its_unit(tmp_path, section, key):
    high, _ = max_of(key)
    assert high <= 2**63 - 1
    path = tmp_path / "over.toml"
    path.write_text(f"[{section}]\n{key} = {high + 1}\n")
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert f"{section}.{key} must be <= {high}" in str(err.value) and str(path) in str(err.value)
    path.write_text(f"[{section}]\n{key} = {'9' * 20}\n")  # past what TOML's own integers hold
    with pytest.raises(ConfigError, match=f"{section}.{key}"):
        load_config(path)


@pytest.mark.parametrize(
    "text",
    [
        "[nameserver]\nbroker_expiry_ms = 315360000000\n",  # ten years
        "[eventlog]\nsegment_max_bytes = 1099511627776\n",  # 1 TiB
        "[lake]\nkeep_days = 3652057\n",  # 0001-01-02 .. 9999-12-30
        "[security]\nreplay_cache_entries = 2147483647\n",
    ],
)
def test_the_largest_value_of_each_unit_is_accepted(tmp_path, text):
    path = tmp_path / "max.toml"
    path.write_text(text)
    load_config(path)


@pytest.mark.parametrize(
    "text, says",
    [
        ("[audit]\nqueue_skew_cv = 1" + "0" * 400 + "\n", "audit.queue_skew_cv is too large for a number"),
        ("[nameserver]\nbroker_expiry_ms = 1" + "0" * 400 + "\n", "not an integer of 401 digits"),
        ("[nameserver]\nbroker_expiry_ms = 1" + "0" * 5000 + "\n", "not usable TOML: Exceeds the limit"),
    ],
)
def test_an_integer_of_hundreds_of_digits_is_a_config_error(tmp_path, text, says):
    path = tmp_path / "digits.toml"
    path.write_text(text)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    assert says in str(err.value) and str(path) in str(err.value) and "\n" not in str(err.value)
