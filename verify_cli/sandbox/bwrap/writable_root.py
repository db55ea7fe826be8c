"""A writable root file system for one bwrap run (or a few in a row) over an exported image root
(:mod:`.rootfs` shows an exported root read-only; a Harbor trial writes its whole container).

Two ways, chosen per scratch folder, the cheaper first:

- **overlay**: a kernel overlayfs with the exported root as its lower layer and an upper and work
  folder of the trial's own, mounted in a private mount namespace (``unshare --mount``; as root,
  or else in a user namespace of its own where the kernel allows it: Linux >= 5.11). The mount
  lives only as long as that namespace (the run's processes): nothing is mounted on the host
  and nothing needs unmounting; removing the scratch folder removes everything. What the run
  changed is the upper folder, read on the host afterwards (as docker reads a container's
  ``docker diff`` from its overlay's upper layer): regular files added or changed, whiteouts for
  paths deleted, opaque folders for folders removed and made again.
- **copy**: where no overlay can be mounted (an upper folder on a file system overlayfs refuses,
  no user namespaces), a full copy of the root (``cp -a --reflink=auto``: a clone where the file
  system shares extents); its changes are what differs from the exported root.

Nothing here knows of tasks: the caller says which folder's changes it wants (:meth:`changes`).
"""

from __future__ import annotations

import os
import shlex
import shutil
import stat
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

from verify_cli.sandbox.plumbing.trees import remove_tree

#: The two ways a writable root is made.
OVERLAY, COPY = "overlay", "copy"
#: The descriptor the launch prefix writes its marker on (:data:`verify_cli.sandbox.local.RESULTS_FD`).
MARKER_FD = 8
#: The marker the launch prefix writes once the root is mounted (overlay) or ready (copy).
ROOT_READY = b"R"
#: Extended attributes overlayfs marks a folder "opaque" with (made again after removal).
_OPAQUE_XATTRS = ("trusted.overlay.opaque", "user.overlay.opaque")

_PROBE_LOCK = threading.Lock()


def _overlay_script() -> str:
    mount = shutil.which("mount") or "/bin/mount"
    return (f'{shlex.quote(mount)} -t overlay overlay -o "lowerdir=$1,upperdir=$2,workdir=$3" "$4" || exit 125\n'
            f"printf {ROOT_READY.decode()} >&{MARKER_FD} || exit 125\n"
            'shift 4\nexec "$@"\n')


def _unshare_argv() -> list[str] | None:
    """How to enter a private mount namespace where this process may mount an overlay."""
    exe = shutil.which("unshare")
    if exe is None:
        return None
    argv = [exe, "--mount", "--propagation", "private"]
    if os.geteuid() != 0:
        argv[1:1] = ["--user", "--map-root-user"]
    return argv


_PROBED: dict[tuple[int, int], str | None] = {}


def _overlay_works(parent: str, lower: str | None) -> str | None:
    """None where an overlay over ``lower`` with its upper folder under ``parent`` can be mounted
    here, else why not (asked once per pair of file systems)."""
    key = (os.stat(parent).st_dev, os.stat(lower).st_dev if lower else -1)
    if key not in _PROBED:
        _PROBED[key] = _probe_overlay(parent, lower)
    return _PROBED[key]


def _probe_overlay(parent: str, lower: str | None) -> str | None:
    unshare = _unshare_argv()
    if unshare is None:
        return "unshare (util-linux) is not installed"
    probe = Path(tempfile.mkdtemp(prefix="verify-overlay-probe-", dir=parent))
    try:
        for name in ("lower", "upper", "work", "merged"):
            (probe / name).mkdir()
        (probe / "lower" / "f").write_text("x")
        lowerdir = lower or str(probe / "lower")  # the real one where given: its file system counts too
        script = _overlay_script().replace(f" >&{MARKER_FD}", "")
        proc = subprocess.run([*unshare, "/bin/sh", "-c", script, "sh", lowerdir, *(str(probe / n) for n in
                              ("upper", "work", "merged")), "/bin/sh", "-c", f"test -d {probe}/merged/."],
                              capture_output=True, timeout=30)
        if proc.returncode != 0:
            return (proc.stderr.decode("utf-8", "replace").strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        return None
    except (OSError, subprocess.TimeoutExpired) as e:
        return str(e)
    finally:
        remove_tree(probe)


def overlay_unavailable(parent: str | None = None, lower: str | None = None) -> str | None:
    """Why no overlay over ``lower`` (a folder; default: one of the probe's own) can be mounted
    for a writable root under ``parent`` (default: the system's temporary folder), or None where
    one can."""
    with _PROBE_LOCK:
        return _overlay_works(parent or tempfile.gettempdir(), lower)


@dataclass
class RootChanges:
    """What a run changed under one folder of its root: regular files added or changed (by path
    relative to the folder, read from the host), paths deleted, and paths refused (links,
    devices: not plain work)."""

    files: dict[str, bytes] = field(default_factory=dict)
    deleted: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)


class TooMuchWork(Exception):
    """The changed files under the folder hold more than the caller's bound."""


def _resolve(root: Path, path: str) -> str:
    """``path`` (absolute, as the sandbox sees it) with the symbolic links of ``root``'s
    folders on the way followed inside ``root``: where a run's writes to it land."""
    parts = [p for p in path.split("/") if p]
    out: list[str] = []
    hops = 0
    while parts:
        part = parts.pop(0)
        if part == "..":
            if out:
                out.pop()
            continue
        if part == ".":
            continue
        here = root.joinpath(*out, part)
        if here.is_symlink() and hops < 32:
            hops += 1
            target = os.readlink(here)
            parts = [p for p in target.split("/") if p] + parts
            if target.startswith("/"):
                out = []
            continue
        out.append(part)
    return "/" + "/".join(out)


class WritableRoot:
    """A private, writable view of the exported root ``lower`` (a host folder), for one run or
    a few in a row (each run mounts it afresh: what one wrote, the next sees). Close it (or use
    it as a context manager) to remove everything it holds."""

    def __init__(self, lower: str, *, parent: str | None = None, force_copy: bool = False) -> None:
        """``parent``: where the root's own folders go (default: the system's temporary folder). A
        copy goes beside ``lower`` where that folder is writable (the same file system: a clone
        where it shares extents, and never a RAM-backed scratch folder), else under ``parent``."""
        self.lower = Path(lower)
        odd = [c for c in ",:\\" if c in f"{self.lower}{parent or tempfile.gettempdir()}"]
        if force_copy:
            why: str | None = "asked for a copy"
        elif odd:  # overlayfs's mount options separate paths by them
            why = f"an overlay cannot take a folder whose path holds {odd[0]!r}"
        else:
            why = overlay_unavailable(parent, str(self.lower))
        self.mode = OVERLAY if why is None else COPY
        #: Why the root is a copy (the overlay's failure), "" for an overlay.
        self.why_copy = why or ""
        beside = str(self.lower.parent) if os.access(self.lower.parent, os.W_OK) else parent
        self.folder = Path(tempfile.mkdtemp(prefix="verify-root-", dir=parent if self.mode == OVERLAY else beside))
        try:
            if self.mode == OVERLAY:
                for name in ("upper", "work", "merged"):
                    (self.folder / name).mkdir()
                self.path = self.folder / "merged"
                self.changed = self.folder / "upper"
            else:
                self.path = self.changed = self.folder / "root"
                proc = subprocess.run(["cp", "-a", "--reflink=auto", f"{self.lower}/.", str(self.path)],
                                      capture_output=True, timeout=3600)
                if proc.returncode != 0:
                    raise OSError(f"copying the root file system failed: "
                                  f"{proc.stderr.decode('utf-8', 'replace').strip()[-300:]}")
        except BaseException:
            remove_tree(self.folder)
            raise

    def describe(self) -> str:
        """One line for a verdict's notes: how the root was made writable."""
        if self.mode == OVERLAY:
            return "a private overlayfs over the image's exported root file system"
        return f"a full copy of the image's exported root file system (no overlay here: {self.why_copy})"

    def launch_prefix(self) -> list[str]:
        """The host command that makes the root ready for a run and then runs the rest of its
        command line there (bwrap binding :attr:`path` at ``/``): it writes :data:`ROOT_READY` on
        descriptor :data:`MARKER_FD` once the root is there (a missing marker: the root could not
        be mounted, an infrastructure failure)."""
        if self.mode == COPY:
            return ["/bin/sh", "-c", f'printf {ROOT_READY.decode()} >&{MARKER_FD} || exit 125\nexec "$@"', "sh"]
        unshare = _unshare_argv()
        if unshare is None:
            raise OSError("unshare is not installed")
        return [*unshare, "/bin/sh", "-c", _overlay_script(), "sh", str(self.lower), str(self.folder / "upper"),
                str(self.folder / "work"), str(self.path)]

    def _real_folder(self, rel: str) -> Path | None:
        """``rel`` under :attr:`changed` where each step to it is a folder of the runs' own (never
        a link they made: it could point anywhere on the host), else None."""
        here = self.changed
        for part in [p for p in rel.split("/") if p]:
            here = here / part
            try:
                if not stat.S_ISDIR(os.lstat(here).st_mode):
                    return None
            except OSError:
                return None
        return here

    def _replaced(self, rel: str) -> bool:
        """Whether a step to ``rel`` under :attr:`changed` is there and not a folder (a whiteout,
        a link, a file the runs made in its place)."""
        here = self.changed
        for part in [p for p in rel.split("/") if p]:
            here = here / part
            try:
                if not stat.S_ISDIR(os.lstat(here).st_mode):
                    return True
            except OSError:
                return False
        return False

    def host_path(self, path: str) -> Path | None:
        """Where the files the runs wrote at the folder ``path`` (absolute, inside) are on the host,
        between runs: in the upper layer (overlay: only what was written) or the copy. None where
        it is not a folder there, or is reached through a link of the runs' (never followed)."""
        return self._real_folder(_resolve(self.lower, path).lstrip("/"))

    def changes(self, under: str, *, max_bytes: int) -> RootChanges:
        """What the runs changed under ``under`` (absolute, inside): read from the host, never
        following a link of the run's. :class:`TooMuchWork` past ``max_bytes`` of files. Where the
        runs removed ``under`` itself (or a folder on the way) or made it a link or a file, nothing
        of it is work: ``deleted`` names every entry the image had there (and ``refused`` is
        ``["."]`` where something else stands in its place)."""
        rel_under = _resolve(self.lower, under).lstrip("/")
        out = RootChanges()
        top = self._real_folder(rel_under)
        if top is None:
            if self.mode == OVERLAY and not self._replaced(rel_under):
                return out  # nothing written under it
            # removed, or made a link or a file: none of it is work, and what the image had is gone
            lower = self.lower / rel_under
            out.deleted = sorted(os.listdir(lower)) if lower.is_dir() and not lower.is_symlink() else []
            if os.path.lexists(self.changed / rel_under) and not _whiteout(self.changed / rel_under):
                out.refused.append(".")
            return out
        if self.mode == OVERLAY:
            self._overlay_changes(top, "", out, [0], max_bytes)
        else:
            self._copy_changes(top, self.lower / rel_under, "", out, [0], max_bytes)
        out.deleted.sort()
        out.refused.sort()
        return out

    @staticmethod
    def _take(path: Path, rel: str, out: RootChanges, total: list[int], max_bytes: int) -> None:
        size = os.lstat(path).st_size
        total[0] += size
        if total[0] > max_bytes:
            raise TooMuchWork(f"the changed files hold more than {max_bytes >> 20} MiB")
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
        with os.fdopen(fd, "rb") as fh:
            out.files[rel] = fh.read(max_bytes + 1)

    def _overlay_changes(self, folder: Path, prefix: str, out: RootChanges, total: list[int], max_bytes: int) -> None:
        try:
            names = sorted(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            return
        for name in names:
            path = folder / name
            rel = f"{prefix}{name}"
            st = os.lstat(path)
            try:
                was: int | None = os.lstat(self.lower / path.relative_to(self.changed)).st_mode
            except OSError:
                was = None
            if stat.S_ISCHR(st.st_mode) and st.st_rdev == 0:
                out.deleted.append(rel)  # a whiteout
            elif stat.S_ISDIR(st.st_mode):
                if was is not None and (not stat.S_ISDIR(was) or any(_xattr(path, a) == b"y"
                                                                     for a in _OPAQUE_XATTRS)):
                    out.deleted.append(rel)  # a file made a folder, or removed and made again (opaque)
                self._overlay_changes(path, f"{rel}/", out, total, max_bytes)
            elif stat.S_ISREG(st.st_mode):
                if was is not None and stat.S_ISDIR(was):
                    out.deleted.append(rel)  # a folder made a file
                self._take(path, rel, out, total, max_bytes)
            else:
                out.refused.append(rel)

    def _copy_changes(self, folder: Path, original: Path, prefix: str, out: RootChanges, total: list[int],
                      max_bytes: int) -> None:
        try:
            names = set(os.listdir(folder))
        except (FileNotFoundError, NotADirectoryError):
            names = set()
        try:
            before = set(os.listdir(original)) if original.is_dir() and not original.is_symlink() else set()
        except OSError:
            before = set()
        for name in sorted(before - names):
            out.deleted.append(f"{prefix}{name}")
        for name in sorted(names):
            path, old = folder / name, original / name
            rel = f"{prefix}{name}"
            st = os.lstat(path)
            try:
                was: os.stat_result | None = os.lstat(old)
            except OSError:
                was = None
            if stat.S_ISDIR(st.st_mode):
                if was is not None and not stat.S_ISDIR(was.st_mode):
                    out.deleted.append(rel)
                self._copy_changes(path, old, f"{rel}/", out, total, max_bytes)
            elif stat.S_ISREG(st.st_mode):
                if was is not None and stat.S_ISDIR(was.st_mode):
                    out.deleted.append(rel)
                if was is None or not stat.S_ISREG(was.st_mode) or _differs(path, old, st, was):
                    self._take(path, rel, out, total, max_bytes)
            elif was is None or (st.st_mode, st.st_mtime_ns) != (was.st_mode, was.st_mtime_ns):
                out.refused.append(rel)

    def close(self) -> None:
        remove_tree(self.folder)

    def __enter__(self) -> WritableRoot:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _whiteout(path: Path) -> bool:
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISCHR(st.st_mode) and st.st_rdev == 0


def _xattr(path: Path, name: str) -> bytes | None:
    try:
        return os.getxattr(path, name, follow_symlinks=False)
    except OSError:
        return None


def _differs(path: Path, old: Path, st: os.stat_result, was: os.stat_result) -> bool:
    if (st.st_size, st.st_mode) != (was.st_size, was.st_mode):
        return True
    if st.st_mtime_ns == was.st_mtime_ns:
        return False  # cp -a keeps times: untouched (a write that also restores the time is not work)
    with open(path, "rb") as a, open(old, "rb") as b:
        while True:
            x, y = a.read(1 << 16), b.read(1 << 16)
            if x != y:
                return True
            if not x:
                return False


__all__ = ["COPY", "MARKER_FD", "OVERLAY", "ROOT_READY", "RootChanges", "TooMuchWork", "WritableRoot",
           "overlay_unavailable"]
