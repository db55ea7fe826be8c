import json
import os
import shlex
import subprocess
import sys

import pytest

from kv import main

#: Runs a program where the candidate runs (empty outside a verify-cli sandbox).
CANDIDATE_EXEC = shlex.split(os.environ.get("VERIFY_CANDIDATE_EXEC", ""))


@pytest.fixture
def kv(tmp_path, capsys, monkeypatch):
    monkeypatch.delenv("KV_DB", raising=False)
    db = str(tmp_path / "store.json")

    def run(*args, use_db=True):
        argv = (["--db", db] if use_db else []) + list(args)
        try:
            code = main(argv)
        except SystemExit as e:
            code = e.code
        out, err = capsys.readouterr()
        return code, out, err.rstrip("\n")

    return run


def test_set_get_and_file_format(kv, tmp_path):
    assert kv("set", "name", "Ada Lovelace") == (0, "", "")
    assert kv("set", "empty", "") == (0, "", "")
    assert kv("get", "name") == (0, "Ada Lovelace\n", "")
    assert kv("get", "empty") == (0, "\n", "")
    text = (tmp_path / "store.json").read_text(encoding="utf-8")
    assert text == json.dumps({"empty": "", "name": "Ada Lovelace"}, indent=2, sort_keys=True) + "\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store.json"]


def test_missing_keys_exit_1_and_reads_do_not_create_file(kv, tmp_path):
    assert kv("get", "nope") == (1, "", "error: no such key: nope")
    assert kv("del", "nope") == (1, "", "error: no such key: nope")
    assert kv("list") == (0, "", "")
    assert not (tmp_path / "store.json").exists()


def test_del_and_list_with_prefix(kv):
    for key, value in [("b.x", "2"), ("a.y", "1"), ("b.a", "3"), ("c", "x=y")]:
        assert kv("set", key, value) == (0, "", "")
    assert kv("list") == (0, "a.y=1\nb.a=3\nb.x=2\nc=x=y\n", "")
    assert kv("list", "--prefix", "b.") == (0, "b.a=3\nb.x=2\n", "")
    assert kv("del", "b.a") == (0, "", "")
    assert kv("list", "--prefix", "b") == (0, "b.x=2\n", "")
    assert kv("list", "--prefix", "zz") == (0, "", "")
    assert kv("get", "b.a") == (1, "", "error: no such key: b.a")


def test_incr(kv):
    assert kv("incr", "hits") == (0, "1\n", "")
    assert kv("incr", "hits", "5") == (0, "6\n", "")
    assert kv("incr", "hits", "-10") == (0, "-4\n", "")
    assert kv("get", "hits") == (0, "-4\n", "")
    kv("set", "word", "abc")
    assert kv("incr", "word") == (1, "", "error: not an integer: word")
    assert kv("get", "word") == (0, "abc\n", "")
    assert kv("incr", "hits", "x")[0] == 2
    assert kv("get", "hits") == (0, "-4\n", "")


def test_invalid_keys_exit_2_and_change_nothing(kv, tmp_path):
    for bad in ("a=b", "has space", "", "tab\there"):
        assert kv("set", bad, "v") == (2, "", f"error: invalid key: {bad}")
    assert not (tmp_path / "store.json").exists()


def test_usage_errors_exit_2(kv, tmp_path):
    assert kv()[0] == 2
    assert kv("frobnicate")[0] == 2
    assert kv("set", "only-key")[0] == 2
    assert kv("get", "a", "b")[0] == 2
    assert kv("get", "a", use_db=False) == (2, "", "error: no database (use --db or KV_DB)")
    assert not (tmp_path / "store.json").exists()


def test_script_uses_kv_db_environment_variable(tmp_path):
    other = tmp_path / "env.json"
    env = {"PATH": "/usr/bin:/bin", "KV_DB": str(other)}
    runs = [subprocess.run([*CANDIDATE_EXEC, sys.executable, "kv.py", *args], capture_output=True, text=True,
                           env=env, timeout=20) for args in (["set", "k", "v w"], ["get", "k"], ["get", "x"])]
    assert [(p.returncode, p.stdout) for p in runs] == [(0, ""), (0, "v w\n"), (1, "")]
    assert runs[2].stderr == "error: no such key: x\n"
    assert json.loads(other.read_text(encoding="utf-8")) == {"k": "v w"}
