"""A writable root over an exported one (verify_cli/sandbox/bwrap/writable_root.py): an overlayfs in a
private mount namespace, or a full copy where none mounts. Both give the same account of what a run
changed under a folder (files added and changed, paths deleted, links refused), never touch the
exported root, mount nothing the host sees, and leave nothing behind."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from verify_cli.sandbox.bwrap.writable_root import (
    COPY,
    OVERLAY,
    ROOT_READY,
    TooMuchWork,
    WritableRoot,
    overlay_unavailable,
)


def _lower(tmp_path: Path) -> Path:
    lower = tmp_path / "lower"
    for d in ("srv/app/pkg", "srv/app/gone", "usr/bin", "etc"):
        (lower / d).mkdir(parents=True)
    os.symlink("srv/app", lower / "app")  # the workdir reached through a link of the root's
    (lower / "srv/app/calc.py").write_text("def total(n):\n    return 0\n")
    (lower / "srv/app/keep.txt").write_text("same\n")
    (lower / "srv/app/old.txt").write_text("to delete\n")
    (lower / "srv/app/pkg/a.py").write_text("a\n")
    (lower / "srv/app/gone/b.py").write_text("b\n")
    (lower / "usr/bin/tool").write_text("#!/bin/sh\n")
    return lower


def _run_in(root: WritableRoot, script: str) -> subprocess.CompletedProcess[bytes]:
    """``script`` (host shell) where the root is ready, at ``$1`` (its path): what a sandbox does there."""
    read_end, write_end = os.pipe()
    try:
        proc = subprocess.run([*root.launch_prefix(), "/bin/sh", "-c", script, "sh", str(root.path)],
                              capture_output=True, close_fds=False, timeout=60,
                              preexec_fn=lambda: os.dup2(write_end, 8))  # the marker's descriptor
    finally:
        os.close(write_end)
    marker = os.read(read_end, 16)
    os.close(read_end)
    assert marker == ROOT_READY, (marker, proc.stderr)
    return proc


MODES = [pytest.param(OVERLAY, id="overlay"), pytest.param(COPY, id="copy")]


@pytest.mark.parametrize("mode", MODES)
def test_a_runs_changes_under_a_folder_are_read_from_the_host(tmp_path: Path, mode: str) -> None:
    if mode == OVERLAY and overlay_unavailable(str(tmp_path)):
        pytest.skip(f"no overlay here: {overlay_unavailable(str(tmp_path))}")
    lower = _lower(tmp_path)
    before = {p: p.read_bytes() for p in lower.rglob("*") if p.is_file() and not p.is_symlink()}
    with WritableRoot(str(lower), parent=str(tmp_path), force_copy=mode == COPY) as root:
        assert root.mode == mode and ("overlayfs" in root.describe()) == (mode == OVERLAY)
        proc = _run_in(root, 'cd "$1/app" && printf "def total(n):\\n    return sum(n)\\n" > calc.py && '
                             'echo new > new.txt && rm old.txt && rm -rf gone && mkdir gone && echo c > gone/c.py && '
                             'ln -s /etc/passwd link && echo trojan > "$1/usr/bin/tool" && '
                             + (f'grep -q " {root.path} " /proc/self/mounts' if mode == OVERLAY else "true"))
        assert proc.returncode == 0, proc.stderr
        # the mount lived in the run's own namespace: the host never sees it
        assert f" {root.path} " not in Path("/proc/self/mounts").read_text()
        changes = root.changes("/app", max_bytes=1 << 20)
        assert changes.files == {"calc.py": b"def total(n):\n    return sum(n)\n", "new.txt": b"new\n",
                                 "gone/c.py": b"c\n"}
        # a folder removed and made again: the overlay says the folder (opaque), the copy its lost entries
        assert set(changes.deleted) == {"old.txt", "gone" if mode == OVERLAY else "gone/b.py"}
        assert changes.refused == ["link"]
        # what it changed outside the folder is not in the account, and the exported root is untouched
        usr_bin = root.host_path("/usr/bin")
        assert usr_bin is not None and (usr_bin / "tool").read_text() == "trojan\n"
        with pytest.raises(TooMuchWork):
            root.changes("/app", max_bytes=10)
        folder = root.folder
    assert {p: p.read_bytes() for p in lower.rglob("*") if p.is_file() and not p.is_symlink()} == before
    assert not folder.exists()


def test_each_root_is_fresh_and_a_run_sees_what_an_earlier_one_wrote(tmp_path: Path) -> None:
    lower = _lower(tmp_path)
    with WritableRoot(str(lower), parent=str(tmp_path)) as first:
        _run_in(first, 'echo 1 > "$1/srv/app/new.txt"')
        assert _run_in(first, 'cat "$1/srv/app/new.txt"').stdout == b"1\n"
        with WritableRoot(str(lower), parent=str(tmp_path)) as second:
            assert _run_in(second, 'test -e "$1/srv/app/new.txt" || echo absent').stdout == b"absent\n"
            assert second.changes("/app", max_bytes=1 << 20).files == {}


@pytest.mark.parametrize("mode", MODES)
def test_a_folder_made_a_link_is_never_followed_on_the_host(tmp_path: Path, mode: str) -> None:
    """A run that replaces the folder (or its log folder) with a link to a host folder gets
    nothing of the host read as its work: the link is refused, what the image had is deleted."""
    if mode == OVERLAY and overlay_unavailable(str(tmp_path)):
        pytest.skip(f"no overlay here: {overlay_unavailable(str(tmp_path))}")
    lower = _lower(tmp_path)
    (lower / "logs").mkdir()
    host = tmp_path / "host-secrets"
    host.mkdir()
    (host / "reward.txt").write_text("1\n")
    with WritableRoot(str(lower), parent=str(tmp_path), force_copy=mode == COPY) as root:
        _run_in(root, f'rm -rf "$1/srv/app" && ln -s {host} "$1/srv/app" && rm -rf "$1/logs" && ln -s {host} "$1/logs"')
        changes = root.changes("/app", max_bytes=1 << 20)
        assert changes.files == {} and changes.refused == ["."]
        assert changes.deleted == ["calc.py", "gone", "keep.txt", "old.txt", "pkg"]
        assert root.host_path("/logs") is None
    with WritableRoot(str(lower), parent=str(tmp_path), force_copy=mode == COPY) as root:
        _run_in(root, 'rm -rf "$1/srv/app"')
        gone = root.changes("/app", max_bytes=1 << 20)
        assert gone.files == {} and gone.refused == [] and len(gone.deleted) == 5


def test_a_folder_overlayfs_cannot_name_gets_a_copy_saying_why(tmp_path: Path) -> None:
    odd = tmp_path / "a,b"
    odd.mkdir()
    lower = _lower(odd)
    with WritableRoot(str(lower), parent=str(tmp_path)) as root:
        assert root.mode == COPY and "holds ','" in root.describe()
        _run_in(root, 'echo x > "$1/srv/app/new.txt"')
        assert root.changes("/app", max_bytes=1 << 20).files == {"new.txt": b"x\n"}


def test_an_overlay_that_does_not_mount_never_announces_the_root(tmp_path: Path) -> None:
    if overlay_unavailable(str(tmp_path)):
        pytest.skip(f"no overlay here: {overlay_unavailable(str(tmp_path))}")
    with WritableRoot(str(_lower(tmp_path)), parent=str(tmp_path)) as root:
        (root.folder / "work").rmdir()  # overlayfs refuses a missing work folder
        read_end, write_end = os.pipe()
        try:
            proc = subprocess.run([*root.launch_prefix(), "/bin/sh", "-c", "echo ran"], capture_output=True,
                                  close_fds=False, timeout=60, preexec_fn=lambda: os.dup2(write_end, 8))
        finally:
            os.close(write_end)
        assert os.read(read_end, 16) == b"" and proc.returncode == 125 and proc.stdout == b""
        os.close(read_end)
        assert b"mount" in proc.stderr


@pytest.mark.skipif(os.geteuid() != 0, reason="switches to an unprivileged user (needs root)")
def test_an_unprivileged_user_gets_an_overlay_in_a_user_namespace_of_its_own(tmp_path: Path) -> None:
    """Where the caller is not root, the overlay is mounted in a user namespace of its own (Linux
    >= 5.11), or else the root is a copy: either way the same account of the run's changes."""
    import shutil
    import tempfile

    if shutil.which("setpriv") is None:
        pytest.skip("setpriv (util-linux) is not installed")
    base = Path(tempfile.mkdtemp(prefix="verify-unpriv-", dir="/tmp"))
    try:
        lower = _lower(base)
        subprocess.run(["chown", "-R", "65534:65534", str(base)], check=True)
        script = (
            "import os, subprocess, sys\n"
            "from verify_cli.sandbox.bwrap.writable_root import WritableRoot\n"
            f"root = WritableRoot({str(lower)!r}, parent={str(base)!r})\n"
            "r, w = os.pipe()\n"
            "work = 'echo hi > \"$1/srv/app/new.txt\"; rm \"$1/srv/app/old.txt\"'\n"
            "subprocess.run([*root.launch_prefix(), '/bin/sh', '-c', work, 'sh', str(root.path)], close_fds=False,\n"
            "               preexec_fn=lambda: os.dup2(w, 8), check=True)\n"
            "c = root.changes('/app', max_bytes=1 << 20)\n"
            "print(root.mode, sorted(c.files), c.deleted)\n"
            "root.close()\n")
        repo = Path(__file__).resolve().parents[2]
        proc = subprocess.run(["setpriv", "--reuid", "65534", "--regid", "65534", "--clear-groups",
                               sys.executable, "-c", script], capture_output=True, text=True, timeout=60,
                              cwd=str(base), env={**os.environ, "PYTHONPATH": str(repo), "HOME": str(base)})
        if proc.returncode != 0 and "Permission denied" in proc.stderr and str(repo) in proc.stderr:
            pytest.skip("the checkout is not readable by an unprivileged user")
        assert proc.returncode == 0, proc.stderr
        mode, rest = proc.stdout.split(" ", 1)
        assert mode in (OVERLAY, COPY) and rest.strip() == "['new.txt'] ['old.txt']"
        if overlay_unavailable(str(tmp_path)) is None:
            assert mode == OVERLAY, proc.stdout
        assert [p.name for p in base.iterdir()] == ["lower"]
    finally:
        subprocess.run(["rm", "-rf", str(base)], check=False)
