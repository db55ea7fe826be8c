import pytest

from orders_etl.config import DEFAULTS, ConfigError, load_config, merge


def write(tmp_path, text):
    path = tmp_path / "etl.toml"
    path.write_text(text, encoding="utf-8")
    return path


def test_no_file_gives_the_defaults():
    assert load_config(None) == DEFAULTS


def test_whole_section_replaces_values(tmp_path):
    config = load_config(write(tmp_path, '[output]\npath = "out/s.json"\nindent = 4\n'))
    assert config["output"] == {"path": "out/s.json", "indent": 4}


def test_partial_section_keeps_the_other_defaults(tmp_path):
    config = load_config(write(tmp_path, "[output]\nindent = 0\n"))
    assert config["output"] == {"path": "summary.json", "indent": 0}


def test_nested_table_is_merged_at_depth(tmp_path):
    config = load_config(write(tmp_path, '[clean.rates]\nCHF = "1.05"\n'))
    assert config["clean"]["rates"] == {"EUR": "1", "USD": "0.9", "GBP": "1.15", "CHF": "1.05"}
    assert config["clean"]["currency"] == "EUR"


def test_merge_changes_neither_argument():
    base = {"a": {"b": 1, "c": 2}}
    override = {"a": {"b": 3}}
    merge(base, override)
    assert base == {"a": {"b": 1, "c": 2}} and override == {"a": {"b": 3}}


def test_unknown_section_is_refused(tmp_path):
    with pytest.raises(ConfigError, match=r"\[outptu\]"):
        load_config(write(tmp_path, "[outptu]\nindent = 1\n"))


def test_bad_aggregate_key_is_refused(tmp_path):
    with pytest.raises(ConfigError, match="aggregate.by"):
        load_config(write(tmp_path, '[aggregate]\nby = "week"\n'))
