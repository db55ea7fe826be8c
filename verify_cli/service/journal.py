"""Acknowledged results survive the service: each is written here before it is answered.

One JSON line per graded candidate that carried an ``id``: the key, a digest of what was graded,
and the result. The line reaches the kernel (``write`` on an ``O_APPEND`` descriptor) before the
answer leaves, so a service killed with SIGKILL and restarted answers a retry of the same id
from here, without grading again; ``fsync=True`` also survives a crash of the machine.
Infrastructure errors are never journalled: a retry grades them again.

A result is keyed by the client's id *and* the content of the task it was graded against
(:func:`journal_key`): after a task's tests change, a retry of an old id is graded again rather
than answered the old score.

One service at a time per journal (an exclusive ``flock``). A service on the default journal
that finds it held by another takes the next free one beside it (:func:`open_journal`), so two
services on one machine both start. The file is rewritten with its newest ``max_entries``
lines when it grows past twice that.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from verify_cli.errors import UsageError


class JournalConflict(Exception):
    """An id already journalled for a different candidate."""


def candidate_digest(payload: dict[str, Any]) -> str:
    """A digest of what a candidate asks to grade (its task and answer), to tell a retry from a
    reused id."""
    return hashlib.sha256(json.dumps(payload, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def journal_key(candidate_id: str, task_hash: str) -> str:
    """The journal's key of a candidate id graded against a task whose content hashes to
    ``task_hash``."""
    return f"{candidate_id}@{task_hash[:32]}"


#: Journals beside the default one a service may take when it is held.
DEFAULT_JOURNAL_SPARES = 32


class JournalHeld(UsageError):
    """Another service holds the journal."""


class Journal:
    def __init__(self, path: Path, *, fsync: bool = False, max_entries: int = 200_000) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self.max_entries = max_entries
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._fd)
            raise JournalHeld(f"{self.path}: another verify-cli serve holds this journal",
                             hint="give each service its own --journal") from None
        self._lock = threading.Lock()
        self._entries: OrderedDict[str, tuple[str, dict[str, Any]]] = OrderedDict()
        self._lines = 0
        self._read()

    def _read(self) -> None:
        with open(self.path, "rb") as fh:
            for raw in fh:
                try:
                    rec = json.loads(raw)
                    key, digest, result = rec["key"], rec["digest"], rec["result"]
                except (ValueError, KeyError, TypeError):
                    continue  # a line cut short by a kill mid-write: that result was never answered
                self._entries[key] = (digest, result)
                self._entries.move_to_end(key)
                self._lines += 1

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str, digest: str) -> dict[str, Any] | None:
        """The result journalled under ``key``, or None; JournalConflict when ``key`` was used
        for a different candidate."""
        with self._lock:
            found = self._entries.get(key)
        if found is None:
            return None
        if found[0] != digest:
            raise JournalConflict(key)
        return found[1]

    def put(self, key: str, digest: str, result: dict[str, Any]) -> None:
        line = json.dumps({"key": key, "digest": digest, "result": result}, separators=(",", ":")) + "\n"
        data = line.encode()
        with self._lock:
            os.write(self._fd, data)
            if self.fsync:
                os.fsync(self._fd)
            self._entries[key] = (digest, result)
            self._entries.move_to_end(key)
            self._lines += 1
            if self._lines > 2 * self.max_entries:
                self._compact()

    def _compact(self) -> None:
        while len(self._entries) > self.max_entries:
            self._entries.popitem(last=False)
        tmp = self.path.with_suffix(self.path.suffix + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            for key, (digest, result) in self._entries.items():
                fh.write(json.dumps({"key": key, "digest": digest, "result": result}, separators=(",", ":")) + "\n")
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, self.path)
        new_fd = os.open(self.path, os.O_RDWR | os.O_APPEND)
        fcntl.flock(new_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        old, self._fd = self._fd, new_fd
        os.close(old)
        self._lines = len(self._entries)

    def close(self) -> None:
        with self._lock, contextlib.suppress(OSError):
            os.close(self._fd)


def open_journal(path: Path, *, fsync: bool = False, spares: int = 0) -> Journal:
    """The journal at ``path``; when another service holds it and ``spares`` > 0, the first free
    of ``NAME-2.jsonl`` ... ``NAME-{spares + 1}.jsonl`` beside it."""
    path = Path(path)
    try:
        return Journal(path, fsync=fsync)
    except JournalHeld:
        if spares <= 0:
            raise
    for n in range(2, spares + 2):
        try:
            return Journal(path.with_name(f"{path.stem}-{n}{path.suffix}"), fsync=fsync)
        except JournalHeld:
            continue
    raise JournalHeld(f"{path}: it and {spares} journals beside it are held by other services",
                      hint="give each service its own --journal")
