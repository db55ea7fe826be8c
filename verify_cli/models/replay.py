"""The ``replay`` backend: completions generated elsewhere, read from JSONL or Parquet.

Each row is ``{"task_id": ..., "completion": "raw model text"}`` (files are extracted as from
any model) or ``{"task_id": ..., "files": {path: content}}`` (already extracted). A task's rows
are its samples, in file order; asking for more samples than a task has gives what there is.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
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


def read_replay_rows(path: Path) -> list[tuple[str, Completion]]:
    """(task id, completion) pairs of a JSONL or Parquet file, in file order."""
    path = Path(path)
    if not path.is_file():
        raise UsageError(f"{path}: no such file", hint="give a .jsonl or .parquet file of completions")
    rows: list[tuple[str, Completion]] = []
    if path.suffix == ".parquet":
        import pyarrow.parquet as pq

        for i, row in enumerate(pq.read_table(path).to_pylist()):
            rows.append(_completion(row, f"{path}: row {i}"))
        return rows
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as e:
                raise UsageError(f"{path}:{lineno}: not a JSON object ({e})") from None
            if not isinstance(row, dict):
                raise UsageError(f"{path}:{lineno}: not a JSON object")
            rows.append(_completion(row, f"{path}:{lineno}"))
    return rows


@dataclass(frozen=True)
class ReplayConfig(BackendConfig):
    """``model``: the JSONL or Parquet file of completions."""

    model: str | Path = field(metadata={"help": "the JSONL or Parquet file of completions"})


@register_model_backend("replay")
class ReplayBackend(ModelBackend):
    """``model`` is the JSONL or Parquet file of completions."""

    config_type = ReplayConfig

    def __init__(self, model: str | Path) -> None:
        self.path = Path(model)
        self._by_task: dict[str, list[Completion]] = {}
        for task_id, completion in read_replay_rows(self.path):
            self._by_task.setdefault(task_id, []).append(completion)
        self._digest = hashlib.sha256(self.path.read_bytes()).hexdigest()[:16]

    @property
    def model_id(self) -> str:
        """The file and a hash of its bytes: a changed file is a different model."""
        return f"replay:{self.path.name}:{self._digest}"

    def task_ids(self) -> list[str]:
        return sorted(self._by_task)

    def samples_available(self, task_id: str) -> int | None:
        return len(self._by_task.get(task_id, ()))

    def generate(self, prompts: Sequence[Prompt], params: SamplingParams) -> list[list[Completion]]:
        """Up to ``n`` stored completions of each prompt's task, from ``prompt.first_sample`` on."""
        out = []
        for p in prompts:
            stored = self._by_task.get(p.task_id, [])
            out.append(stored[p.first_sample:p.first_sample + params.n])
        return out
