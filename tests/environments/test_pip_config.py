"""verify_cli/environments/pip_config.py: uv is given what pip reads, or set-up falls back to pip."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "verify_cli" / "environments" / "pip_config.py"
_spec = importlib.util.spec_from_file_location("pip_config_to_uv", SCRIPT)
assert _spec is not None and _spec.loader is not None
tool = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(tool)

LISTING = """\
:env:.find-links='/opt/wheels'
:env:.disable-pip-version-check='1'
global.find-links='/elsewhere'
global.extra-index-url='file:///a/simple file:///b/simple'
global.constraint='/etc/pip/c.txt'
global.cert='/etc/ssl/ca.pem'
site.index-url='https://mirror.example/simple'
"""


def test_the_environment_wins_over_files_and_lists_are_split() -> None:
    conf = tool.settings(LISTING)
    assert conf["find-links"] == "/opt/wheels"
    assert tool.uv_arguments(conf) == [
        "--find-links=/opt/wheels", "--extra-index-url=file:///a/simple",
        "--extra-index-url=file:///b/simple", "--constraint=/etc/pip/c.txt",
        "SSL_CERT_FILE=/etc/ssl/ca.pem", "--index-url=https://mirror.example/simple"]


def test_what_uv_cannot_be_given_falls_back_to_pip() -> None:
    assert tool.uv_arguments({"proxy": "http://proxy:3128"}) is None
    assert tool.uv_arguments({"trusted-host": "mirror.example"}) is None
    assert tool.uv_arguments({"index-url": "https://user:secret@mirror.example/simple"}) is None
    assert tool.uv_arguments({"no-index": "true", "timeout": "60"}) == ["--no-index"]
    assert tool.uv_arguments({}) == []


def test_the_script_reads_this_pip() -> None:
    out = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, check=False)
    assert out.returncode in (0, 3), out.stderr
    if out.returncode == 0:
        assert all(line.startswith(("--", "SSL_CERT_FILE=")) for line in out.stdout.splitlines())
