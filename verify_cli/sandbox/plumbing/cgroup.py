"""Per-run cgroups (v1 or v2) for memory and process limits and for killing a whole run.

Used by the local backends where the cgroup file system is writable (root, or a delegated
subtree). Where it is not, the backends fall back to rlimits and say so in their isolation line.
"""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")


def _own_v1_path(controller: str) -> str | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            _, ctrls, path = line.split(":", 2)
            if controller in ctrls.split(","):
                return path
    except OSError:
        return None
    return None


def _own_v2_path() -> str | None:
    try:
        for line in Path("/proc/self/cgroup").read_text().splitlines():
            if line.startswith("0::"):
                return line[3:]
    except OSError:
        return None
    return None



def read_small_file(path: str) -> bytes:
    """A small file's bytes (a cgroup or /proc file) with plain system calls: read on every run."""
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    try:
        chunks = []
        while chunk := os.read(fd, 65536):
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


@dataclass
class RunCgroup:
    """The cgroup folders of one run; ``procs_files`` are written to move a process in."""

    dirs: list[Path]
    memory_dir: Path | None
    pids_dir: Path | None
    version: int

    @functools.cached_property
    def procs_files(self) -> list[str]:
        return [str(d / "cgroup.procs") for d in self.dirs]

    def join_self(self) -> None:
        """Move the calling process into the run's cgroups (called in the child before exec)."""
        for f in self.procs_files:
            fd = os.open(f, os.O_WRONLY)
            try:
                os.write(fd, b"0")
            finally:
                os.close(fd)

    def pids(self) -> set[int]:
        out: set[int] = set()
        for f in self.procs_files:
            with contextlib.suppress(OSError):
                out.update(map(int, read_small_file(f).split()))
        return out

    def kill_all(self) -> None:
        """SIGKILL every process of the run until none is left (daemonised children included)."""
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            pids = self.pids()
            if not pids:
                return
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.01)

    def oom_killed(self) -> bool:
        if self.memory_dir is None:
            return False
        name = "memory.oom_control" if self.version == 1 else "memory.events"
        with contextlib.suppress(OSError, ValueError):
            for line in (self.memory_dir / name).read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill" and int(value) > 0:
                    return True
        return False

    def memory_peak_bytes(self) -> int | None:
        if self.memory_dir is None:
            return None
        name = "memory.max_usage_in_bytes" if self.version == 1 else "memory.peak"
        with contextlib.suppress(OSError, ValueError):
            return int((self.memory_dir / name).read_text().strip())
        return None

    def remove(self) -> None:
        self.kill_all()
        for d in self.dirs:
            for _ in range(50):
                try:
                    d.rmdir()
                    break
                except FileNotFoundError:
                    break
                except OSError:
                    time.sleep(0.02)


class CgroupManager:
    """Creates per-run cgroups under verify-cli's own parent, when the hierarchy is writable."""

    def __init__(self) -> None:
        self.version = 0
        self._parents: dict[str, Path] = {}
        self.reason = ""
        self._detect()

    @property
    def available(self) -> bool:
        return self.version > 0

    def _detect(self) -> None:
        if (CGROUP_ROOT / "cgroup.controllers").exists():
            own = _own_v2_path()
            if own is None:
                self.reason = "cannot read /proc/self/cgroup"
                return
            parent = CGROUP_ROOT / own.lstrip("/")
            # v2 forbids processes in inner nodes: runs go in a sibling leaf of our own cgroup.
            base = parent.parent / "verify-cli" if parent != CGROUP_ROOT else CGROUP_ROOT / "verify-cli"
            try:
                base.mkdir(exist_ok=True)
                ctrl = (base.parent / "cgroup.subtree_control")
                with contextlib.suppress(OSError):
                    ctrl.write_text("+memory +pids")
                (base / "cgroup.subtree_control").write_text("+memory +pids")
            except OSError as e:
                self.reason = f"cgroup v2 not writable ({e.strerror})"
                return
            self._parents = {"memory": base, "pids": base}
            self.version = 2
            return
        parents: dict[str, Path] = {}
        for controller in ("memory", "pids"):
            own = _own_v1_path(controller)
            root = CGROUP_ROOT / controller
            if own is None or not root.is_dir():
                self.reason = f"cgroup v1 controller {controller!r} not mounted"
                return
            parent = root / own.lstrip("/") / "verify-cli"
            try:
                parent.mkdir(exist_ok=True)
                probe = parent / f"probe-{uuid.uuid4().hex[:8]}"
                probe.mkdir()
                probe.rmdir()
            except OSError as e:
                self.reason = f"cgroup v1 {controller} not writable ({e.strerror})"
                return
            parents[controller] = parent
        self._parents = parents
        self.version = 1

    def create(self, *, memory_bytes: int, max_pids: int) -> RunCgroup:
        name = f"run-{uuid.uuid4().hex[:12]}"
        if self.version == 2:
            d = self._parents["memory"] / name
            d.mkdir()
            (d / "memory.max").write_text(str(memory_bytes))
            with contextlib.suppress(OSError):
                (d / "memory.swap.max").write_text("0")
            (d / "pids.max").write_text(str(max_pids))
            return RunCgroup([d], d, d, 2)
        mem = self._parents["memory"] / name
        pids = self._parents["pids"] / name
        mem.mkdir()
        pids.mkdir()
        (mem / "memory.limit_in_bytes").write_text(str(memory_bytes))
        with contextlib.suppress(OSError):  # absent when swap accounting is off
            (mem / "memory.memsw.limit_in_bytes").write_text(str(memory_bytes))
        (pids / "pids.max").write_text(str(max_pids))
        return RunCgroup([mem, pids], mem, pids, 1)


_MANAGER: CgroupManager | None = None


def cgroup_manager() -> CgroupManager:
    global _MANAGER
    if _MANAGER is None:
        _MANAGER = CgroupManager()
    return _MANAGER


def oom_kills(cgroup: RunCgroup | None) -> int:
    """How many processes the kernel's OOM killer has killed in ``cgroup`` so far (0 without one)."""
    if cgroup is None or cgroup.memory_dir is None:
        return 0
    name = "memory.oom_control" if cgroup.version == 1 else "memory.events"
    with contextlib.suppress(OSError, ValueError):
        for line in read_small_file(f"{cgroup.memory_dir}/{name}").decode().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    return 0
