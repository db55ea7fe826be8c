"""The scrubbed, pinned environment and the fixed paths every sandbox shows its command."""

from __future__ import annotations

import functools
import sys
import threading
from collections.abc import Mapping
from pathlib import Path

#: Paths inside an isolating sandbox (bwrap, docker). The process backend uses host paths.
SANDBOX_WORKDIR = "/workspace"
SANDBOX_RESULTS = "/results"
SANDBOX_HARNESS = "/opt/verify-harness"
SANDBOX_TMP = "/tmp"

#: The harness's sources, grouped by role (:mod:`verify_cli.harness`). Sandboxes see the flat
#: run-time folder :func:`harness_dir` builds from them, never this one.
HARNESS_SOURCE_DIR = Path(__file__).resolve().parent.parent / "harness"

DEFAULT_PATH = "/usr/local/bin:/usr/bin:/bin"

_harness_lock = threading.Lock()
_harness_built: list[tuple[Path, int]] = []


def harness_dir() -> Path:
    """The harness folder a run sees (mounted read-only in an isolating sandbox): the harness's
    files flat, as task commands name them (``python -m verify_calls``), with ``candidate/`` its
    subfolder. Built once per process from the grouped sources into a fresh private folder
    (removed at exit by the process that built it) and byte-compiled there (``__pycache__``): a
    sandboxed run sees it read-only, so without that every run would compile each harness module
    it imports (a built-in runner's run: some 60 ms of CPU, most of what it costs above an
    interpreter start). A fresh folder per process, never a shared cache: nothing a run or
    another process wrote can reach the harness of the next."""
    import os

    with _harness_lock:
        if _harness_built and _harness_built[0][1] == os.getpid():
            return _harness_built[0][0]
        import atexit
        import compileall
        import contextlib
        import shutil
        import tempfile

        from verify_cli.harness import build_runtime_folder

        # The sources byte-compiled where they are (once for all processes; nothing happens
        # where the folder is not writable, an installed package whose installer compiled it),
        # their compiled copies copied with them, and whatever is still missing compiled there.
        with contextlib.suppress(Exception):
            compileall.compile_dir(str(HARNESS_SOURCE_DIR), quiet=2)
        pid = os.getpid()
        _prune_harness_folders(Path(tempfile.gettempdir()))
        folder = Path(tempfile.mkdtemp(prefix=f"{HARNESS_FOLDER_PREFIX}{pid}-"))
        build_runtime_folder(folder)
        with contextlib.suppress(Exception):
            compileall.compile_dir(str(folder), quiet=2)
        _harness_built[:] = [(folder, pid)]

        def _remove() -> None:
            if os.getpid() == pid:  # a forked child that exits leaves its parent's folder alone
                shutil.rmtree(folder, ignore_errors=True)

        atexit.register(_remove)
        return folder


#: The run-time folders' names: ``verify-cli-harness-<pid of the process that built it>-<random>``.
HARNESS_FOLDER_PREFIX = "verify-cli-harness-"


def _prune_harness_folders(tmp: Path) -> None:
    """Remove the run-time folders of this user's processes that ended without running their
    exit handlers (killed, or ``os._exit`` as pytest-xdist's workers end): a folder is kept while
    the process named in it runs."""
    import os
    import re
    import shutil

    pattern = re.compile(re.escape(HARNESS_FOLDER_PREFIX) + r"(\d+)-")
    try:
        entries = list(os.scandir(tmp))
    except OSError:
        return
    for entry in entries:
        m = pattern.match(entry.name)
        if not m:
            continue
        try:
            if entry.stat(follow_symlinks=False).st_uid != os.getuid() or not entry.is_dir(follow_symlinks=False):
                continue
            os.kill(int(m.group(1)), 0)
        except ProcessLookupError:
            shutil.rmtree(entry.path, ignore_errors=True)
        except OSError:
            continue


def candidate_harness_dir() -> Path:
    """The candidate side's harness folder (mounted on its own in the candidate's sandbox)."""
    return harness_dir() / "candidate"


def compile_harness() -> None:
    """Make sure the run-time harness folder is built and byte-compiled (:func:`harness_dir`)."""
    harness_dir()


def __getattr__(name: str) -> Path:
    """``HARNESS_DIR`` and ``CANDIDATE_HARNESS_DIR``: the run-time folders, built on first use."""
    if name == "HARNESS_DIR":
        return harness_dir()
    if name == "CANDIDATE_HARNESS_DIR":
        return candidate_harness_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


#: A RAM-backed folder for per-run scratch, and the free space it must have to be used.
RAM_SCRATCH = "/dev/shm"
RAM_SCRATCH_MIN_FREE = 1 << 30


@functools.cache
def scratch_root() -> str | None:
    """Where per-run scratch folders go (work folders, warm workers' job folders): a RAM-backed
    file system where one is mounted, writable and has room, since creating and removing a run's
    few folders on a disk file system can cost milliseconds each (several with online discard),
    as much as a warm run itself; None (the system's temporary folder) where there is none, or
    where ``TMPDIR`` chooses one."""
    import os

    found: str | None = None
    try:
        with open("/proc/self/mounts", encoding="utf-8") as fh:
            tmpfs = any(line.split()[1:3] == [RAM_SCRATCH, "tmpfs"] for line in fh if line.strip())
        st = os.statvfs(RAM_SCRATCH)
        if (tmpfs and not os.environ.get("TMPDIR") and os.access(RAM_SCRATCH, os.W_OK | os.X_OK)
                and st.f_bavail * st.f_frsize >= RAM_SCRATCH_MIN_FREE):
            found = RAM_SCRATCH
    except OSError:
        found = None
    return found


def pinned_environment(*, workdir: str, results_dir: str, harness_dir: str, tmp_dir: str,
                       path: str = DEFAULT_PATH, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a sandboxed command: nothing of the host's leaks in.

    ``extra`` (from the caller's RunSpec) is applied last, so a harness can set
    ``PYTHONHASHSEED`` or a shuffle seed per run.
    """
    env = {
        "PATH": path,
        "HOME": workdir,
        "TMPDIR": tmp_dir,
        "LANG": "C.UTF-8",
        "LC_ALL": "C.UTF-8",
        "TZ": "UTC",
        "PYTHONHASHSEED": "0",
        "PYTHONDONTWRITEBYTECODE": "1",
        "PYTHONUNBUFFERED": "1",
        # No user site in any interpreter of a run: a candidate could write one in $HOME.
        "PYTHONNOUSERSITE": "1",
        "PYTHONPATH": harness_dir,
        "NODE_PATH": harness_dir,  # the harness's node preload (verify_node_guard.js)
        "NO_COLOR": "1",
        "CI": "true",
        "VERIFY_RESULTS_DIR": results_dir,
        "VERIFY_WORKDIR": workdir,
        "VERIFY_HARNESS_DIR": harness_dir,
    }
    if extra:
        env.update(extra)
    if env.get("NODE_OPTIONS") and harness_dir:
        from verify_cli.sandbox.plumbing.trusted_launch import absolute_harness_requires

        env["NODE_OPTIONS"] = absolute_harness_requires(env["NODE_OPTIONS"], harness_dir)
    return env


def python_runtime_prefixes() -> list[str]:
    """Folders holding the interpreter verify-cli runs under (its venv and base install)."""
    out: list[str] = []
    for p in (sys.prefix, sys.base_prefix, sys.exec_prefix, sys.base_exec_prefix):
        if p and p not in out:
            out.append(p)
    return out


#: Two-process grading: where the channel folder and the candidate-side harness appear in an
#: isolating sandbox, and the harness folder they come from.
SANDBOX_CHANNEL_DIR = "/.verify-channel"
SANDBOX_CANDIDATE_HARNESS = "/opt/verify-candidate"
CHANNEL_SOCKET = "channel.sock"


def candidate_exec_prefix(python: str, harness_dir: str, channel: str) -> str:
    """``VERIFY_CANDIDATE_EXEC``: the command prefix (shell words) that runs a program in the
    candidate's sandbox through the channel ``channel``."""
    import shlex

    from verify_cli.sandbox.plumbing.trusted_launch import python_script_argv

    return shlex.join([*python_script_argv(python, f"{harness_dir}/verify_candidate_exec.py"),
                       "--channel", channel, "--"])


def candidate_environment(*, workdir: str, tmp_dir: str, channel: str, candidate_harness: str,
                          path: str = DEFAULT_PATH, extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The whole environment of a candidate process: pinned, no results or harness folder."""
    env = pinned_environment(workdir=workdir, results_dir="", harness_dir="", tmp_dir=tmp_dir,
                             path=path, extra=extra)
    for name in ("VERIFY_RESULTS_DIR", "VERIFY_HARNESS_DIR", "NODE_PATH"):
        env.pop(name, None)
    env.update({"PYTHONPATH": candidate_harness, "VERIFY_CANDIDATE_HARNESS": candidate_harness,
                "VERIFY_CHANNEL": channel})
    return env
