"""Where built environments are kept: one folder per realised identity, with its manifest and
build log, built under a lock so that processes (check-tasks' workers, a Ray node's graders)
sharing a machine build each environment once."""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from verify_cli.sandbox.plumbing.trees import remove_tree

MANIFEST = "manifest.json"
BUILD_LOG = "build.log"
#: The environment's files (the venv of a "prefix" environment).
PREFIX_DIR = "prefix"


def default_store_dir() -> Path:
    """``$VERIFY_CLI_ENV_DIR``, else ``$XDG_CACHE_HOME/verify-cli/environments`` (``~/.cache``)."""
    explicit = os.environ.get("VERIFY_CLI_ENV_DIR")
    if explicit:
        return Path(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "verify-cli" / "environments"


@dataclass(frozen=True)
class StoredEnvironment:
    """One built environment as the store lists it."""

    identity: str
    folder: Path
    manifest: dict[str, Any]

    @property
    def form(self) -> str:
        """``prefix``, ``image``, or ``image+rootfs`` (an image whose root file system was exported
        for bwrap into this folder)."""
        form = str(self.manifest.get("form", ""))
        return f"{form}+rootfs" if self.manifest.get("rootfs") else form

    @property
    def bytes(self) -> int:
        total = 0
        for root, _dirs, files in os.walk(self.folder):
            for name in files:
                with contextlib.suppress(OSError):
                    total += os.lstat(os.path.join(root, name)).st_size
        return total


class EnvironmentStore:
    """A folder of built environments, by realised identity."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = Path(root) if root is not None else default_store_dir()

    def folder(self, identity: str) -> Path:
        return self.root / identity

    def manifest(self, identity: str) -> dict[str, Any] | None:
        """The manifest of a finished build of ``identity``, or None."""
        try:
            data = json.loads((self.folder(identity) / MANIFEST).read_text())
        except (OSError, ValueError):
            return None
        return data if isinstance(data, dict) and data.get("identity") == identity else None

    @contextlib.contextmanager
    def building(self, identity: str) -> Iterator[Path]:
        """Hold ``identity``'s build lock (one builder per machine); yields its folder. A caller
        that finds a manifest once it holds the lock uses it: another process built it."""
        self.root.mkdir(parents=True, exist_ok=True)
        with open(self.root / f".{identity}.lock", "a+") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                yield self.folder(identity)
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def begin(self, identity: str) -> Path:
        """An empty folder for a new build of ``identity`` (a failed or partial one removed);
        call under :meth:`building`."""
        folder = self.folder(identity)
        remove_tree(folder)
        folder.mkdir(parents=True)
        return folder

    def finish(self, identity: str, manifest: dict[str, Any]) -> None:
        """Record a finished build (the manifest is written last: a folder without one is not
        an environment)."""
        manifest = {**manifest, "identity": identity, "built_at": time.time()}
        tmp = self.folder(identity) / f".{MANIFEST}.tmp"
        tmp.write_text(json.dumps(manifest, indent=1, sort_keys=True))
        os.replace(tmp, self.folder(identity) / MANIFEST)

    def entries(self) -> list[StoredEnvironment]:
        """Every finished environment, oldest first."""
        out = []
        if self.root.is_dir():
            for d in sorted(self.root.iterdir()):
                if d.is_dir() and (m := self.manifest(d.name)) is not None:
                    out.append(StoredEnvironment(d.name, d, m))
        return sorted(out, key=lambda e: float(e.manifest.get("built_at", 0)))

    def remove(self, identity: str) -> None:
        with self.building(identity) as folder:
            remove_tree(folder)
        with contextlib.suppress(OSError):
            (self.root / f".{identity}.lock").unlink()


__all__ = ["BUILD_LOG", "MANIFEST", "PREFIX_DIR", "EnvironmentStore", "StoredEnvironment", "default_store_dir",
           "remove_tree"]
