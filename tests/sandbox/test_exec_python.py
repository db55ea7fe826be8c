"""The exec server's own interpreter, carried into any image: the bundle runs the server's
modules with its own loader and libraries alone, and one that another user could have written is
never used."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from verify_cli.sandbox.environment import candidate_harness_dir, compile_harness
from verify_cli.sandbox.sessions.exec_python import MOUNT, _ours, exec_python


def test_the_bundle_runs_the_exec_server_with_nothing_of_the_host_but_itself() -> None:
    bundle = exec_python()
    assert bundle is exec_python()  # built once
    folder = bundle.folder
    assert (folder / "ld.so").is_file() and (folder / "bin" / f"python{bundle.version}").is_file()
    assert (folder / "lib" / f"python{bundle.version}" / "encodings" / "utf_8.py").is_file()
    assert bundle.argv()[0] == f"{MOUNT}/ld.so" and bundle.environment()["PYTHONHOME"] == MOUNT
    compile_harness()
    # As a container runs it, from its own folder: its loader, its libraries, its home.
    argv = [str(folder / "ld.so"), "--inhibit-cache", "--library-path", str(folder / "lib"),
            str(folder / "bin" / f"python{bundle.version}"), "-S", "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); import verify_session_server, tarfile, ctypes, json; "
            "print(sys.prefix)", str(candidate_harness_dir())]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=60,
                         env={"PYTHONHOME": str(folder), "PATH": "/nonexistent"})
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == str(folder)


def test_a_bundle_another_user_could_write_is_not_ours(tmp_path: Path) -> None:
    bundle = exec_python()
    assert _ours(bundle.folder)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "ld.so").write_bytes(b"x")
    assert _ours(tmp_path / "b")
    os.chmod(tmp_path / "b" / "ld.so", 0o666)
    assert not _ours(tmp_path / "b")


@pytest.mark.docker
def test_a_session_opens_on_an_image_without_python() -> None:
    from verify_cli.sandbox.registry import create_sandbox
    from verify_cli.sandbox.sessions import SessionLimits

    with create_sandbox("docker") as box, \
            box.open_session({"a.js": b"console.log(6 * 7)\n"}, SessionLimits(), image="verify-cli/node:20") as s:
        assert s.exec("command -v python python3 || true").stdout.text.strip() == ""
        result = s.exec("node a.js")
        assert result.ok and result.stdout.text.strip() == "42", result
        assert s.snapshot(["*.js"]) == {"a.js": b"console.log(6 * 7)\n"}
