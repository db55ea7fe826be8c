"""The ``replay`` backend: completions generated elsewhere, read from JSONL or Parquet.

Each row is ``{"task_id": ..., "completion": "raw model text"}`` (files are extracted as from
any model) or ``{"task_id": ..., "files": {path: content}}`` (already extracted). A task's rows
are its samples, in file order; asking for more samples than a task has gives what there is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from verify_cli.backend_config import BackendConfig
from verify_cli.errors import UsageError
from verify_cli.models.base import Completion, ModelBackend, Prompt, SamplingParams
from verify_cli.models.registry import register_model_backend


def _files_value(value: Any, where: str) -> dict[str, str]:
    if isinstance(value, str):  # a JSON object stored as text
        try:
            value = json.loads(value)
        except ValueError:
            raise UsageError(f"{where}: 'files' is text but not a JSON object") from None
    if isinstance(value, list):  # Parquet maps read back as [(key, value), ...] or [{path, content}]
        pairs = [(v["path"], v["content"]) if isinstance(v, Mapping) else tuple(v) for v in value]
        value = dict(pairs)
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                  for k, v in value.items()):
        raise UsageError(f"{where}: 'files' must map file paths to their text")
    return dict(value)


def _completion(row: Mapping[str, Any], where: str) -> tuple[str, Completion]:
    task_id = row.get("task_id")
    if not isinstance(task_id, str) or not task_id:
        raise UsageError(f"{where}: a row needs a 'task_id' (text)")
    if row.get("files") is not None:
        return task_id, Completion(text=str(row.get("completion") or ""), files=_files_value(row["files"], where))
    text = row.get("completion")
    if not isinstance(text, str):
        raise UsageError(f"{where}: a row needs 'completion' (text) or 'files' (path to content)",
                         hint='e.g. {"task_id": "coding/roman-numerals", "completion": "```python roman.py\\n...```"}')
    return task_id, Completion(text=text)


def _jsonl_row(line: bytes, path: Path, lineno: int) -> dict[str, Any] | None:
    """The JSON object on one line of a JSONL file (None for a blank line)."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"{path}:{lineno}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    if not text.strip():
        return None
    try:
        row = json.loads(text)
    except ValueError as e:
        raise UsageError(f"{path}:{lineno}: not a JSON object ({e})") from None
    if not isinstance(row, dict):
        raise UsageError(f"{path}:{lineno}: not a JSON object")
    return row


def _replay_positions(path: Path) -> Iterator[tuple[str, int, Completion]]:
    """(task id, position, completion) of each row, in file order, every row checked: a JSONL
    row's position is the byte offset of its line, a Parquet row's its index."""
    if not path.is_file():
        raise UsageError(f"{path}: no such file", hint="give a .jsonl or .parquet file of completions")
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        index = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=1024):
            for row in batch.to_pylist():
                task_id, completion = _completion(row, f"{path}: row {index}")
                yield task_id, index, completion
                index += 1
        return
    with path.open("rb") as fh:
        offset = 0
        for lineno, line in enumerate(fh, 1):
            row = _jsonl_row(line, path, lineno)
            if row is not None:
                task_id, completion = _completion(row, f"{path}:{lineno}")
                yield task_id, offset, completion
            offset += len(line)


def read_replay_rows(path: Path) -> list[tuple[str, Completion]]:
    """(task id, completion) pairs of a JSONL or Parquet file, in file order."""
    return [(task_id, completion) for task_id, _, completion in _replay_positions(Path(path))]


@dataclass(frozen=True)
class ReplayConfig(BackendConfig):
    """``model``: the JSONL or Parquet file of completions."""

    model: str | Path = field(metadata={"help": "the JSONL or Parquet file of completions"})


@register_model_backend("replay")
class ReplayBackend(ModelBackend):
    """``model`` is the JSONL or Parquet file of completions.

    Every row is read and checked when the backend is made (a broken row is a usage error naming
    its line), but only each row's position is kept: a completion is read from the file again
    when it is generated, so a file of millions of completions costs a few bytes a row in memory,
    not the completions. The file must not change while the backend is in use (its hash is the
    model id); a row read back that no longer names its task is an error."""

    config_type = ReplayConfig

    def __init__(self, model: str | Path) -> None:
        self.path = Path(model)
        self._by_task: dict[str, list[int]] = {}
        self._table: Any = None
        for task_id, position, _ in _replay_positions(self.path):
            self._by_task.setdefault(task_id, []).append(position)
        with self.path.open("rb") as fh:
            self._digest = hashlib.file_digest(fh, "sha256").hexdigest()[:16]

    @property
    def model_id(self) -> str:
        """The file and a hash of its bytes: a changed file is a different model."""
        return f"replay:{self.path.name}:{self._digest}"

    def _read(self, task_id: str, positions: Sequence[int]) -> list[Completion]:
        if not positions:
            return []
        if self.path.suffix == ".parquet":
            if self._table is None:  # columnar, read once: a few bytes a row beyond the data
                import pyarrow.parquet as pq

                self._table = pq.read_table(self.path)
            rows = [(i, self._table.slice(i, 1).to_pylist()[0]) for i in positions]
            found = [_completion(row, f"{self.path}: row {i}") for i, row in rows]
        else:
            found = []
            with self.path.open("rb") as fh:
                for offset in positions:
                    fh.seek(offset)
                    row = _jsonl_row(fh.readline(), self.path, 0)
                    found.append(_completion(row or {}, f"{self.path}: byte {offset}"))
        if any(t != task_id for t, _ in found):
            raise UsageError(f"{self.path}: the file changed while it was being replayed",
                             hint="replay a file that no other program writes meanwhile")
        return [c for _, c in found]

    def task_ids(self) -> list[str]:
        return sorted(self._by_task)

    def samples_available(self, task_id: str) -> int | None:
        return len(self._by_task.get(task_id, ()))

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Completion]]:
        """Up to ``n`` stored completions of each prompt's task, from ``prompt.first_sample`` on."""
        out = []
        for p in prompts:
            stored = self._by_task.get(p.task_id, [])
            out.append(self._read(p.task_id, stored[p.first_sample:p.first_sample + params.n]))
        return out
