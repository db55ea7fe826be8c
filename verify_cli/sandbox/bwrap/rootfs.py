"""bwrap over a root file system that is not the host's (:attr:`RuntimeLayer.root`): an image's
root file system, exported once (:mod:`verify_cli.environments.rootfs`), shown to a run as its
system in place of the host's.

Each top-level entry of the root (``/usr``, ``/etc``, ``/opt``, ``/bin -> usr/bin``...) is bound
read-only at its own path, or made the same symbolic link, except the folders every sandbox makes
its own (``/proc``, ``/dev``, ``/tmp``, the work and results folders...). The sandbox's own
``/etc/passwd``, ``/etc/group`` and ``/etc/hosts`` are bound over the image's, as over the host's.

Two-process runs start nested sandboxes from inside the run: the image need not hold bubblewrap
(or a C library the host's bwrap was built against), so the host's ``bwrap`` is bound in with its
own loader and libraries (:func:`host_bwrap_bundle`) and run through that loader.
"""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

#: Top-level names of a root file system a sandbox never takes from it: its own mounts, and the
#: folders a run's sandbox makes (work, results, tmp, channel, source, trusted home).
SKIPPED = frozenset({"proc", "dev", "sys", "tmp", "run", "workspace", "results", "lost+found",
                     ".verify-src", ".verify-channel", ".verify-home", ".verify-bwrap", ".dockerenv"})

#: Where the host's bwrap, its loader and its libraries appear in a sandbox over a foreign root.
BUNDLE_DIR = "/.verify-bwrap"

#: Folders a root file system must hold (created at export) because a sandbox binds something
#: at a path under one of its read-only top-level folders.
MOUNT_POINTS = ("opt/verify-harness", "opt/verify-candidate")
#: Files a root file system must hold for the sandbox's own to be bound over them.
MOUNT_FILES = ("etc/passwd", "etc/group", "etc/hosts")


def root_view_args(root: str, *, source: str | None = None) -> list[str]:
    """bubblewrap arguments that show ``root``'s top-level entries at ``/``, read-only.

    ``source`` is where those entries are bound from (default ``root`` itself; ``"/"`` for a
    sandbox nested in one that already shows them): which entries exist and which are links is
    read from ``root`` on the host."""
    base = root if source is None else source.rstrip("/")
    argv: list[str] = []
    for name in sorted(os.listdir(root)):
        if name in SKIPPED:
            continue
        path = os.path.join(root, name)
        if os.path.islink(path):
            argv += ["--symlink", os.readlink(path), f"/{name}"]
        elif os.path.isdir(path):
            argv += ["--ro-bind", f"{base}/{name}", f"/{name}"]
    return argv


@functools.cache
def _host_bwrap_files() -> tuple[tuple[str, str], ...]:
    """(host file, name under :data:`BUNDLE_DIR`) of the host's bwrap, loader and libraries."""
    exe = shutil.which("bwrap")
    if exe is None:
        return ()
    real = os.path.realpath(exe)
    files = [(real, "bwrap")]
    try:
        out = subprocess.run(["ldd", real], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.TimeoutExpired):
        out = ""
    for line in out.splitlines():
        m = re.match(r"\s*(\S+)\s+=>\s+(/\S+)", line)
        if m:
            files.append((os.path.realpath(m.group(2)), f"lib/{m.group(1)}"))
            continue
        m = re.match(r"\s*(/\S*ld-linux\S*|/\S*ld\.so\S*)\s", line)
        if m:
            files.append((os.path.realpath(m.group(1)), "ld.so"))
    return tuple(files)


def host_bwrap_bundle() -> tuple[list[str], list[str]]:
    """(bwrap binds, command prefix): the host's bwrap bound under :data:`BUNDLE_DIR` with what
    it links against, and the argv that runs it there whatever C library the root holds."""
    files = _host_bwrap_files()
    binds: list[str] = []
    for host, name in files:
        binds += ["--ro-bind", host, f"{BUNDLE_DIR}/{name}"]
    if any(name == "ld.so" for _, name in files):
        return binds, [f"{BUNDLE_DIR}/ld.so", "--library-path", f"{BUNDLE_DIR}/lib", f"{BUNDLE_DIR}/bwrap"]
    return binds, [f"{BUNDLE_DIR}/bwrap"]  # a static bwrap


def nested_bwrap(root: str | None) -> list[str]:
    """The command that starts a nested sandbox from inside a run over ``root`` (``bwrap`` from
    the host's system where ``root`` is None)."""
    return host_bwrap_bundle()[1] if root is not None else ["bwrap"]


def file_in_root(root: str | Path, path: str, depth: int = 0) -> Path | None:
    """The regular file ``path`` (absolute, as the sandbox sees it) names inside ``root``, its
    symbolic links followed within ``root``; None where there is none."""
    base = Path(root)
    if depth > 16:
        return None
    here = base
    parts = [p for p in path.split("/") if p]
    for i, part in enumerate(parts):
        nxt = here / part
        if nxt.is_symlink():
            target = os.readlink(nxt)
            rest = "/".join(parts[i + 1:])
            start = target if target.startswith("/") else str(Path("/") / here.relative_to(base) / target)
            return file_in_root(base, os.path.normpath(f"{start}/{rest}" if rest else start), depth + 1)
        here = nxt
    return here if here.is_file() else None


def which_in_root(root: str, name: str, search_path: str) -> str | None:
    """Where ``name`` (a command word) is found on ``search_path`` inside ``root``, as the
    sandbox sees it; None where it is not."""
    if "/" in name:
        return name if file_in_root(root, name) is not None else None
    for folder in search_path.split(":"):
        if folder and file_in_root(root, f"{folder.rstrip('/')}/{name}") is not None:
            return f"{folder.rstrip('/')}/{name}"
    return None


def prepare_root(root: Path) -> None:
    """Make the mount points a sandbox needs inside an exported root (:data:`MOUNT_POINTS`,
    :data:`MOUNT_FILES`). Never through a symbolic link of the root's (it would point into the
    host's file system here): ValueError where one is in the way."""
    def checked(rel: str) -> Path:
        here = root
        for part in rel.split("/"):
            here = here / part
            if here.is_symlink():
                raise ValueError(f"the image's /{here.relative_to(root)} is a symbolic link: a sandbox mounts "
                                 f"/{rel} there (make it a folder in the image)")
        return here

    for rel in MOUNT_POINTS:
        checked(rel).mkdir(parents=True, exist_ok=True)
    for rel in MOUNT_FILES:
        path = checked(rel)
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch()


__all__ = ["BUNDLE_DIR", "SKIPPED", "file_in_root", "host_bwrap_bundle", "nested_bwrap", "prepare_root",
           "root_view_args", "which_in_root"]
