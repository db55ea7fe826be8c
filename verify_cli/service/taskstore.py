"""The task sets a service grades: loaded at start from PATHs, re-read when they change.

Each request looks its task up here. The task's folder is stat-checked on every lookup (the
path, size, mtime and inode of each file and folder under it): any difference re-loads the
task. An id not known yet re-discovers the PATHs (a walk for task.toml files; only new folders
are loaded), so a task added to a served folder is found without a restart.
"""

from __future__ import annotations

import difflib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from verify_cli.errors import TaskFormatError, UsageError
from verify_cli.tasks.loader import discover_task_dirs, load_task
from verify_cli.tasks.model import Task

Fingerprint = tuple[tuple[str, int, int, int], ...]


class TaskLookupError(Exception):
    """A request named a task that is not served (``code`` unknown_task) or does not load
    (``code`` task_unloadable)."""

    def __init__(self, code: str, message: str, hint: str | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.hint = hint


def fingerprint(folder: Path) -> Fingerprint:
    """What changes when anything under ``folder`` is edited, added or removed (no file is read)."""
    out: list[tuple[str, int, int, int]] = []
    stack = [str(folder)]
    while stack:
        current = stack.pop()
        try:
            entries = list(os.scandir(current))
        except OSError:
            continue
        for entry in entries:
            try:
                st = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            out.append((entry.path, st.st_size, st.st_mtime_ns, st.st_ino))
            if entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return tuple(sorted(out))


@dataclass
class _Entry:
    folder: Path
    fingerprint: Fingerprint
    task: Task | None
    error: TaskFormatError | None
    content: str | None = None


class TaskStore:
    """Tasks by id and by folder, thread-safe."""

    def __init__(self, roots: Sequence[Path]) -> None:
        self.roots = [Path(r).resolve() for r in roots]
        for r in self.roots:
            if not r.exists():
                raise UsageError(f"{r}: no such file or folder", hint="give task folders or folders of tasks")
        self._lock = threading.Lock()
        self._by_folder: dict[Path, _Entry] = {}
        self._by_id: dict[str, Path] = {}
        self.reloads = 0
        self._scan()
        if not self._by_folder:
            raise UsageError(f"no task.toml found under {', '.join(map(str, self.roots))}",
                             hint="give task folders or folders of tasks")

    # -- loading ---------------------------------------------------------------------------

    def _load(self, folder: Path) -> _Entry:
        fp = fingerprint(folder)
        try:
            return _Entry(folder, fp, load_task(folder), None)
        except TaskFormatError as e:
            return _Entry(folder, fp, None, e)

    def _scan(self, *, check_known: bool = True) -> None:
        """Discover the PATHs' task folders again; keep the entries whose folder did not change
        (``check_known`` false: keep every known folder's entry as it is, to be checked when
        it is looked up)."""
        folders: list[Path] = []
        for root in self.roots:
            try:
                folders.extend(d.resolve() for d in discover_task_dirs(root))
            except UsageError:
                continue
        entries: dict[Path, _Entry] = {}
        for folder in folders:
            old = self._by_folder.get(folder)
            keep = old is not None and (not check_known or old.fingerprint == fingerprint(folder))
            entries[folder] = old if keep and old is not None else self._load(folder)
        by_id: dict[str, Path] = {}
        for folder, entry in entries.items():
            if entry.task is not None and entry.task.id not in by_id:
                by_id[entry.task.id] = folder
        self._by_folder, self._by_id = entries, by_id

    def _fresh(self, folder: Path) -> _Entry:
        entry = self._by_folder.get(folder)
        if entry is None or entry.fingerprint != fingerprint(folder):
            entry = self._load(folder)
            self._by_folder[folder] = entry
            self.reloads += 1
            if entry.task is not None:
                self._by_id = {k: v for k, v in self._by_id.items() if v != folder}
                self._by_id.setdefault(entry.task.id, folder)
        return entry

    # -- lookups ---------------------------------------------------------------------------

    def by_id(self, task_id: str) -> Task:
        """The served task ``task_id`` as its folder reads now."""
        with self._lock:
            folder = self._by_id.get(task_id)
            if folder is None:
                self._scan(check_known=False)
                folder = self._by_id.get(task_id)
            if folder is None:
                close = difflib.get_close_matches(task_id, list(self._by_id), n=1, cutoff=0.6)
                raise TaskLookupError("unknown_task", f"no served task has id {task_id!r}",
                                      hint=f"did you mean {close[0]!r}?" if close else "GET /v1/tasks lists them")
            entry = self._fresh(folder)
            return self._task_of(entry, task_id)

    def by_path(self, path: str) -> Task:
        """The task in folder ``path`` (absolute, or relative to a served PATH), which must lie
        inside a served PATH."""
        p = Path(path)
        candidates = [p] if p.is_absolute() else [r / p for r in self.roots] + [
            r.parent / p for r in self.roots]
        for c in candidates:
            try:
                folder = c.resolve()
            except OSError:
                continue
            if not any(folder == r or r in folder.parents for r in self.roots):
                continue
            if (folder / "task.toml").is_file():
                with self._lock:
                    return self._task_of(self._fresh(folder), path)
        raise TaskLookupError("unknown_task", f"{path!r} is not a task folder inside a served PATH",
                              hint=f"served: {', '.join(map(str, self.roots))}")

    def content_hash(self, task: Task) -> str:
        """The SHA-256 of ``task``'s folder as loaded (computed once per load of the folder)."""
        with self._lock:
            entry = self._by_folder.get(task.root.resolve())
        if entry is None or entry.task is not task:
            return task.content_hash()
        if entry.content is None:
            entry.content = task.content_hash()
        return entry.content

    @staticmethod
    def _task_of(entry: _Entry, name: str) -> Task:
        if entry.task is None:
            raise TaskLookupError("task_unloadable", f"task {name!r} does not load: {entry.error}")
        return entry.task

    def tasks(self) -> list[Task]:
        with self._lock:
            return [e.task for e in self._by_folder.values() if e.task is not None]

    def failures(self) -> list[tuple[Path, TaskFormatError]]:
        with self._lock:
            return [(e.folder, e.error) for e in self._by_folder.values() if e.error is not None]
