"""A writable root over an exported one (verify_cli/sandbox/bwrap/writable_root.py): an overlayfs in a
private mount namespace, or a full copy where none mounts. Both give the same account of what a run
changed under a folder (files added and changed, paths deleted, links refused), never touch the
exported root, mount nothing the host sees, and leave nothing behind."""

from __future__ import annotations

import os
import subprocess
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
