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


SHELL_ONLY = "verify-cli-test/shell-only:1"


def _shell_only_image(tmp_path: Path) -> str:
    """An image holding a shell (dash) and its C library, nothing else: no bash, no Python."""
    import shutil
    import tarfile

    dash = shutil.which("dash")
    if dash is None:
        pytest.skip("dash is not installed on this machine")
    libs = [line.split("=>")[-1].split("(")[0].strip() for line in
            subprocess.run(["ldd", dash], capture_output=True, text=True, check=True).stdout.splitlines()]
    archive = tmp_path / "root.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(os.path.realpath(dash), "bin/sh")
        for lib in filter(None, libs):
            if lib.startswith("/"):
                tar.add(os.path.realpath(lib), lib.lstrip("/"))
        for folder in ("tmp", "workspace", "proc", "dev", "etc"):
            info = tarfile.TarInfo(folder)
            info.type, info.mode = tarfile.DIRTYPE, 0o1777 if folder == "tmp" else 0o755
            tar.addfile(info)
    subprocess.run(["docker", "import", str(archive), SHELL_ONLY], check=True, capture_output=True)
    return SHELL_ONLY


@pytest.mark.docker
def test_a_session_opens_on_an_image_with_a_shell_alone(tmp_path: Path) -> None:
    from verify_cli.sandbox.registry import create_sandbox
    from verify_cli.sandbox.sessions import SessionLimits

    image = _shell_only_image(tmp_path)
    try:
        with create_sandbox("docker") as box, box.open_session({"a.txt": b"hi"}, SessionLimits(), image=image) as s:
            result = s.exec("read line < a.txt; echo \"$line there\"; exit 4")  # a command string: no bash here
            assert result.exit_code == 4 and result.stdout.text == "hi there\n", result
            s.write_file("b.txt", b"written")
            assert s.snapshot(["*.txt"]) == {"a.txt": b"hi", "b.txt": b"written"}
    finally:
        subprocess.run(["docker", "rmi", "-f", image], capture_output=True)
