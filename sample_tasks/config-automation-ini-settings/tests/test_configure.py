import os
import shlex
import subprocess
import sys

from configure import ensure_settings

#: Runs a program where the candidate runs (empty outside a verify-cli sandbox).
CANDIDATE_EXEC = shlex.split(os.environ.get("VERIFY_CANDIDATE_EXEC", ""))

MANAGED = {"server": {"host": "127.0.0.1", "port": "8080"}, "logging": {"level": "info"}}

EXAMPLE_BEFORE = """# deployed by ops
[server]
host = 0.0.0.0
workers = 4

[custom]
x = 1
"""

EXAMPLE_AFTER = """# deployed by ops
[server]
host = 127.0.0.1
workers = 4
port = 8080

[custom]
x = 1

[logging]
level = info
"""


def test_creates_missing_file_and_parent_folders(tmp_path):
    path = tmp_path / "etc" / "app" / "app.ini"
    assert ensure_settings(str(path), MANAGED) is True
    assert path.read_bytes() == b"[server]\nhost = 127.0.0.1\nport = 8080\n\n[logging]\nlevel = info\n"
    bare = tmp_path / "new" / "empty.ini"
    assert ensure_settings(str(bare), {}) is True
    assert bare.read_bytes() == b""
    assert ensure_settings(str(bare), {}) is False


def test_second_run_changes_nothing(tmp_path):
    path = tmp_path / "app.ini"
    path.write_text(EXAMPLE_BEFORE, encoding="utf-8")
    assert ensure_settings(str(path), MANAGED) is True
    first = path.read_bytes()
    assert ensure_settings(str(path), MANAGED) is False
    assert ensure_settings(str(path), MANAGED) is False
    assert path.read_bytes() == first == EXAMPLE_AFTER.encode()


def test_user_keys_comments_and_sections_are_preserved(tmp_path):
    path = tmp_path / "app.ini"
    before = ("top=level\n; comment\n[Server]\nHost = keep\n\n[server]\n# pinned by alice\n"
              "timeout = 30\ntags = [a, b]\nhost=10.0.0.1\n  port =  9090  \n\n[logging]\nlevel = debug\nfile = /var/log/app\n")
    path.write_text(before, encoding="utf-8")
    assert ensure_settings(str(path), MANAGED) is True
    assert path.read_text(encoding="utf-8") == (
        "top=level\n; comment\n[Server]\nHost = keep\n\n[server]\n# pinned by alice\n"
        "timeout = 30\ntags = [a, b]\nhost = 127.0.0.1\nport = 8080\n\n[logging]\nlevel = info\nfile = /var/log/app\n")


def test_missing_keys_go_after_last_key_line(tmp_path):
    path = tmp_path / "app.ini"
    path.write_text("[logging]\n\n[server]\nworkers = 2\n# trailing note: port = 1\n\n[other]\na = b\n"
                    "[server]\nhost = second\n", encoding="utf-8")
    assert ensure_settings(str(path), MANAGED) is True
    assert path.read_text(encoding="utf-8") == (
        "[logging]\nlevel = info\n\n[server]\nworkers = 2\nhost = 127.0.0.1\nport = 8080\n"
        "# trailing note: port = 1\n\n[other]\na = b\n[server]\nhost = second\n")


def test_already_correct_lines_are_left_byte_for_byte(tmp_path):
    path = tmp_path / "app.ini"
    content = "[server]\n  port=8080\nhost   =   127.0.0.1\nport = 1\n[logging]\nlevel=info\ndsn=a=b\n"
    path.write_text(content, encoding="utf-8")
    assert ensure_settings(str(path), {**MANAGED, "logging": {"level": "info", "dsn": "a=b"}}) is False
    assert path.read_text(encoding="utf-8") == content


def test_missing_final_newline_is_added_once(tmp_path):
    path = tmp_path / "app.ini"
    path.write_text("[custom]\nx = 1", encoding="utf-8")
    assert ensure_settings(str(path), {"custom": {"x": "1"}}) is True
    assert path.read_text(encoding="utf-8") == "[custom]\nx = 1\n"
    assert ensure_settings(str(path), {"custom": {"x": "1"}}) is False
    empty = tmp_path / "empty.ini"
    empty.write_text("", encoding="utf-8")
    assert ensure_settings(str(empty), {"a": {"k": "v"}}) is True
    assert empty.read_text(encoding="utf-8") == "[a]\nk = v\n"
    blank_end = tmp_path / "blank_end.ini"
    blank_end.write_text("[custom]\nx = 1\n\n", encoding="utf-8")
    assert ensure_settings(str(blank_end), {"new": {"a": "b"}}) is True
    assert blank_end.read_text(encoding="utf-8") == "[custom]\nx = 1\n\n[new]\na = b\n"


def test_command_line_is_idempotent(tmp_path):
    path = tmp_path / "app.ini"
    path.write_text("[server]\nworkers = 4\n", encoding="utf-8")
    outputs = [subprocess.run([*CANDIDATE_EXEC, sys.executable, "configure.py", str(path)], capture_output=True,
                              text=True, timeout=20) for _ in range(2)]
    assert [p.returncode for p in outputs] == [0, 0]
    assert [p.stdout for p in outputs] == ["changed\n", "unchanged\n"]
    assert path.read_text(encoding="utf-8") == (
        "[server]\nworkers = 4\nhost = 127.0.0.1\nport = 8080\n\n[logging]\nlevel = info\n")
