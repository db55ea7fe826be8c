"""The sample cache: graded samples on disk, keyed by (task content hash, model, sampling
parameters, seed), one JSON line per sample, appended as each is graded.

An interrupted run loses at most the samples in flight; the next run reads what is there and
samples only the rest. A run asking for more samples adds to the same file. Infrastructure
errors are never cached: they are retried on the next run.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
from pathlib import Path

from verify_cli.difficulty.samples import SampleRecord
from verify_cli.difficulty.stats import SampleStatus

#: Bumped when the prompt, extraction or seeds change what a cached sample means. 2: a bare
#: answer that is not valid Python is a parse error; seeds come from the one derivation
#: (verify_cli.sampling.seeds), so samples cached under format 1 were drawn under other seeds.
SAMPLE_FORMAT = "2"


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
                record = SampleRecord.from_dict(json.loads(line))
            except (ValueError, TypeError, KeyError):
                continue
            if record.status != SampleStatus.INFRA_ERROR.value:
                records[record.sample_index] = record
        return [records[i] for i in sorted(records)]

    def append(self, key: str, record: SampleRecord) -> None:
        if record.status == SampleStatus.INFRA_ERROR.value:
            return
        line = json.dumps(record.to_dict(), ensure_ascii=False) + "\n"
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            with self.path(key).open("a+b") as fh:
                if fh.tell() > 0:  # a writer killed mid-line left no newline: end that line first
                    fh.seek(-1, os.SEEK_END)
                    if fh.read(1) != b"\n":
                        line = "\n" + line
                fh.write(line.encode("utf-8"))
                fh.flush()
                os.fsync(fh.fileno())
