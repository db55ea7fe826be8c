"""The sample cache: graded samples on disk, keyed by (task content hash, model, sampling
parameters, seed), one JSON line per sample, appended as each is graded.

An interrupted run loses at most the samples in flight; the next run reads what is there and
samples only the rest. A run asking for more samples adds to the same file. Infrastructure
errors are never cached: they are retried on the next run.

Each line is written (to the kernel) as its sample is graded, so a killed run keeps every
graded sample; the files are flushed to the disk (``fsync``) at most once per
:data:`SYNC_SECONDS` and at the end of a run (:meth:`SampleCache.sync`), not once per line: a
per-line ``fsync`` cost about 6 ms on this machine's disk, on the thread that hands samples
back, which is as much as a warm grading. A machine that loses power loses at most the last
second's samples (a torn last line is skipped on reading); they are sampled again.
"""

from __future__ import annotations

import hashlib
import os
import threading
import time
from pathlib import Path

from verify_cli.difficulty.samples import SampleRecord
from verify_cli.difficulty.stats import SampleStatus

#: Bumped when the prompt, extraction or seeds change what a cached sample means. 2: a bare
#: answer that is not valid Python is a parse error; seeds come from the one derivation
#: (verify_cli.sampling.seeds), so samples cached under format 1 were drawn under other seeds.
SAMPLE_FORMAT = "2"

#: The longest a graded sample waits in the page cache before its file is synced to the disk.
SYNC_SECONDS = 1.0
#: Statuses never cached: a sandbox failure is graded again, and a prompt too long for the
#: context is decided again (a run with a longer context generates it).
_NOT_CACHED = frozenset({SampleStatus.INFRA_ERROR.value, SampleStatus.PROMPT_TOO_LONG.value})


def sample_cache_key(task_hash: str, model_id: str, params_fingerprint: str, seed: int) -> str:
    h = hashlib.sha256()
    for part in (SAMPLE_FORMAT, task_hash, model_id, params_fingerprint, str(seed)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()[:32]


class SampleCache:
    """``folder/<key>.jsonl`` per (task, model, parameters, seed). Safe to share between threads."""

    def __init__(self, folder: Path) -> None:
        self.folder = Path(folder)
        self._lock = threading.Lock()
        self._unsynced: set[Path] = set()
        self._synced_at = time.monotonic()

    def path(self, key: str) -> Path:
        return self.folder / f"{key}.jsonl"

    def load(self, key: str) -> list[SampleRecord]:
        """The cached samples of ``key``, by sample index; a torn last line (a killed writer) is skipped."""
        try:
            text = self.path(key).read_text("utf-8")
        except OSError:
            return []
        records: dict[int, SampleRecord] = {}
        for line in text.splitlines():
            try:
                record = SampleRecord.from_line(line)
            except (ValueError, TypeError, KeyError):
                continue
            if record.status not in _NOT_CACHED:
                records[record.sample_index] = record
        return [records[i] for i in sorted(records)]

    def append(self, key: str, record: SampleRecord, *, line: str | None = None) -> None:
        """Append ``record`` to ``key``'s file (``line``: its :meth:`SampleRecord.to_line`, if made already)."""
        if record.status in _NOT_CACHED:
            return
        line = line if line is not None else record.to_line()
        path = self.path(key)
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            with path.open("a+b") as fh:
                if fh.tell() > 0:  # a writer killed mid-line left no newline: end that line first
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        line = "\n" + line
                fh.write(line.encode("utf-8"))
            self._unsynced.add(path)
            if time.monotonic() - self._synced_at >= SYNC_SECONDS:
                self._sync_locked()

    def sync(self) -> None:
        """Flush every file appended to since the last sync to the disk (the end of a run)."""
        with self._lock:
            self._sync_locked()

    def _sync_locked(self) -> None:
        for path in sorted(self._unsynced):
            try:
                fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                continue  # removed meanwhile: nothing of it to keep
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._unsynced.clear()
        self._synced_at = time.monotonic()
