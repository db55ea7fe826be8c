"""A warm docker node's in-process unpack (``harness/warm/docker_node_unpack.py``) against GNU tar.

Both unpack the same archive (the host's own ``write_workdir_tar`` of a real folder) as the
node's user (uid 1000, a user other than root, as in a node), under several umasks, and the two
folders must be the same: every path, type, mode, size, content and modification time to the
nanosecond; times that tar sets to "now" (a folder's, once files are made in it; every access
time) must be "now" in both. Archives the module does not reproduce go to tar and leave the
folder as empty as it was, a write that fails half-way included.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from verify_cli.sandbox.docker.archives import write_workdir_tar

HARNESS_WARM = Path(__file__).resolve().parents[2] / "verify_cli" / "harness" / "warm"
NODE_UID = 1000

#: Run as the node's user: unpack ARCHIVE with tar into A and with the module into B, list both.
COMPARE = r"""
import hashlib, json, os, resource, subprocess, sys, time
sys.path.insert(0, sys.argv[1])
import docker_node_unpack
archive, a, b, limit, fsize = sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6])
data = open(archive, "rb").read()
if fsize:
    resource.setrlimit(resource.RLIMIT_FSIZE, (fsize, fsize))
t0 = time.time_ns()
tar = subprocess.run(["tar", "-x", "-f", "-", "-C", a], input=data, capture_output=True,
                     env={**os.environ, "TAR_OPTIONS": ""})
here = docker_node_unpack.unpack(data, b, limit)
t1 = time.time_ns()

def stamp(ns):  # the file system's clock is coarse: "now" is the run's span, a jiffy either side
    return "now" if t0 - 50_000_000 <= ns <= t1 + 50_000_000 else ns

def listing(root):
    out = []
    for top, dirs, files in os.walk(root):
        for name in dirs + files:
            path = os.path.join(top, name)
            st = os.lstat(path)
            body = ""
            if os.path.isfile(path):
                body = hashlib.sha256(open(path, "rb").read()).hexdigest() if os.access(path, os.R_OK) else "?"
            out.append([os.path.relpath(path, root), st.st_mode, st.st_size, body,
                        stamp(st.st_mtime_ns), stamp(st.st_atime_ns)])
    return sorted(out)

print(json.dumps({"tar": tar.returncode, "here": here, "by_tar": listing(a), "by_module": listing(b)}))
"""

#: An interpreter uid 1000 may run (the project's may live under root's home).
SYSTEM_PYTHON = shutil.which("python3", path="/usr/local/bin:/usr/bin:/bin")
needs_root = pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("setpriv") and shutil.which("tar") and SYSTEM_PYTHON),
    reason="runs tar and the module as uid 1000 (root, setpriv, tar and a system python3)")


@pytest.fixture
def shared_tmp() -> Iterator[Path]:
    """A folder uid 1000 can reach (pytest's own are root's alone), with the module copied in."""
    path = Path(tempfile.mkdtemp(prefix="verify-unpack-"))
    os.chmod(path, 0o755)
    shutil.copy(HARNESS_WARM / "docker_node_unpack.py", path / "docker_node_unpack.py")
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def unpack_both(tmp_path: Path, build: Callable[[Path], None], *, umask: str = "022",
                limit: int = 1 << 30, fsize: int = 0) -> dict:
    src = tmp_path / "src"
    src.mkdir()
    build(src)
    buf = io.BytesIO()
    write_workdir_tar(buf, src)
    archive = tmp_path / "work.tar"
    archive.write_bytes(buf.getvalue())
    script = tmp_path / "compare.py"
    script.write_text(COMPARE)
    for name in ("by_tar", "by_module"):
        (tmp_path / name).mkdir()
        os.chown(tmp_path / name, NODE_UID, NODE_UID)
    for path in (archive, script):
        os.chmod(path, 0o644)
    argv = [str(SYSTEM_PYTHON), str(script), str(tmp_path), str(archive), str(tmp_path / "by_tar"),
            str(tmp_path / "by_module"), str(limit), str(fsize)]
    shell = f"umask {umask}; exec \"$@\""
    done = subprocess.run(["setpriv", "--reuid", str(NODE_UID), "--regid", str(NODE_UID), "--clear-groups",
                           "sh", "-c", shell, "sh", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def plain(d: Path) -> None:
    (d / "hidden_tests").mkdir()
    (d / "hidden_tests" / "check.py").write_text("def check(f):\n    assert f(1) == 2\n")
    (d / "solution.py").write_text("def double(x):\n    return 2 * x\n")


def varied(d: Path) -> None:
    """Nested folders of several modes, files of every permission (0 included), empty ones, and
    modification times in whole seconds, in nanoseconds, far back and in the future."""
    modes = [0o644, 0o755, 0o600, 0o666, 0o777, 0o400, 0o000, 0o640]
    times = [0, 1_500_000_000, 1_234_567_890_123_456_789, 1_999_999_999_999_999_999, 987_654_321_000_000_000]
    for i in range(5):
        inner = d / f"pkg{i}" / "inner"
        inner.mkdir(parents=True)
        for j in range(4):
            f = inner / f"mod{j}.py"
            f.write_bytes(os.urandom((i * 977 + j * 131) % 5000))
            os.chmod(f, modes[(i + j) % len(modes)])
            os.utime(f, ns=(0, times[(i * 4 + j) % len(times)]))
        os.chmod(inner, [0o755, 0o700, 0o777, 0o750, 0o711][i])
        os.utime(inner, ns=(0, times[i]))
        os.utime(d / f"pkg{i}", ns=(0, 1_234_567_890_123_456_789))
    (d / "empty.txt").write_bytes(b"")
    (d / "empty_dir").mkdir()
    os.utime(d / "empty_dir", ns=(0, 1_000_000_000))
    (d / "with space & 'quote'.txt").write_text("x")


@needs_root
@pytest.mark.parametrize("umask", ["022", "077", "002", "000"])
@pytest.mark.parametrize("build", [plain, varied])
def test_the_module_lays_out_what_gnu_tar_does(shared_tmp: Path, build: Callable[[Path], None], umask: str) -> None:
    got = unpack_both(shared_tmp, build, umask=umask)
    assert got["tar"] == 0 and got["here"] is True
    assert got["by_module"] == got["by_tar"]
    assert len(got["by_tar"]) >= 3


def symlink(d: Path) -> None:
    (d / "a.py").write_text("a")
    os.symlink("a.py", d / "link.py")


def hardlink(d: Path) -> None:
    (d / "a.py").write_text("a")
    os.link(d / "a.py", d / "b.py")


def read_only_folder(d: Path) -> None:
    (d / "ro").mkdir()
    (d / "ro" / "x.py").write_text("x")
    os.chmod(d / "ro", 0o555)


def setuid(d: Path) -> None:
    (d / "tool").write_text("x")
    os.chmod(d / "tool", 0o4755)


def not_ascii(d: Path) -> None:
    (d / "é.py").write_text("x")


def tiny_time(d: Path) -> None:
    (d / "a.py").write_text("a")
    os.utime(d / "a.py", ns=(0, 1))  # written by tarfile as "1e-09"


def big(d: Path) -> None:
    (d / "a.py").write_text("a")
    (d / "big.bin").write_bytes(b"x" * 5000)


@needs_root
@pytest.mark.parametrize("build, limit", [(symlink, 1 << 30), (hardlink, 1 << 30), (read_only_folder, 1 << 30),
                                          (setuid, 1 << 30), (not_ascii, 1 << 30), (tiny_time, 1 << 30),
                                          (big, 4096)])
def test_what_the_module_does_not_reproduce_goes_to_tar(shared_tmp: Path, build: Callable[[Path], None],
                                                        limit: int) -> None:
    got = unpack_both(shared_tmp, build, limit=limit)
    assert got["here"] is False and got["by_module"] == []
    assert got["by_tar"]


@needs_root
def test_a_write_that_fails_half_way_leaves_the_folder_empty(shared_tmp: Path) -> None:
    # The file-size rlimit lower than the limit the module is told: the big file's write fails
    # (EFBIG) after the first file was written; the module removes it and leaves the archive to tar.
    got = unpack_both(shared_tmp, big, limit=1 << 30, fsize=4096)
    assert got["here"] is False and got["by_module"] == []
    assert got["tar"] != 0  # tar meets the same limit and says so


def test_root_and_a_folder_not_empty_go_to_tar(tmp_path: Path) -> None:
    sys.path.insert(0, str(HARNESS_WARM))
    try:
        import docker_node_unpack
    finally:
        sys.path.remove(str(HARNESS_WARM))
    buf = io.BytesIO()
    src = tmp_path / "src"
    src.mkdir()
    plain(src)
    write_workdir_tar(buf, src)
    into = tmp_path / "into"
    into.mkdir()
    if os.geteuid() == 0:
        assert docker_node_unpack.unpack(buf.getvalue(), str(into), 1 << 30) is False
        assert not any(into.iterdir())
    (into / "there.txt").write_text("x")
    assert docker_node_unpack.unpack(buf.getvalue(), str(into), 1 << 30) is False
    assert [p.name for p in into.iterdir()] == ["there.txt"]
