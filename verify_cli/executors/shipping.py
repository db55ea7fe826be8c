"""Task folders sent by content: nodes of a cluster need not share a file system with the driver.

The driver packs each task folder once (:func:`pack_task`), keyed by its content hash; a node
unpacks it once into a folder of its own (:class:`TaskDepot`) and grades the driver's
:class:`~verify_cli.tasks.model.Task` with only its ``root`` pointed there, so the task is the
same object, field for field, wherever it runs.
"""

from __future__ import annotations

import os
import shutil
import stat
import tempfile
import threading
from dataclasses import dataclass, replace
from pathlib import Path, PurePosixPath

from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import list_files


@dataclass(frozen=True)
class TaskBundle:
    """Every file of a task folder: POSIX relative path -> (permission bits, bytes)."""

    content_hash: str
    files: dict[str, tuple[int, bytes]]

    @property
    def size(self) -> int:
        return sum(len(data) for _, data in self.files.values())


def pack_task(task: Task) -> TaskBundle:
    """The task folder's files by content (the files :meth:`Task.content_hash` covers)."""
    files: dict[str, tuple[int, bytes]] = {}
    for rel, path in list_files(task.root).items():
        files[rel] = (stat.S_IMODE(path.stat().st_mode), path.read_bytes())
    return TaskBundle(task.content_hash(), files)


def unpack_task(bundle: TaskBundle, dest: Path) -> Path:
    """Write ``bundle`` into the new folder ``dest`` (atomically: a half-written folder is never
    seen under that name)."""
    staging = Path(tempfile.mkdtemp(prefix=".unpack-", dir=dest.parent))
    try:
        for rel, (mode, data) in bundle.files.items():
            parts = PurePosixPath(rel).parts
            if not parts or ".." in parts or PurePosixPath(rel).is_absolute():
                raise ValueError(f"unsafe path in task bundle: {rel!r}")
            target = staging.joinpath(*parts)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
            os.chmod(target, mode & 0o777)
        os.replace(staging, dest)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return dest


class TaskDepot:
    """A node's unpacked task folders, by content hash; thread-safe."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.root.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._folders: dict[str, Path] = {}

    def has(self, content_hash: str) -> bool:
        with self._lock:
            return content_hash in self._folders

    def add(self, bundle: TaskBundle) -> Path:
        with self._lock:
            folder = self._folders.get(bundle.content_hash)
            if folder is None:
                folder = unpack_task(bundle, self.root / bundle.content_hash)
                self._folders[bundle.content_hash] = folder
            return folder

    def localise(self, task: Task, content_hash: str) -> Task:
        """``task`` with its root at this node's copy (which :meth:`add` must have made)."""
        with self._lock:
            return replace(task, root=self._folders[content_hash])

    def close(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
