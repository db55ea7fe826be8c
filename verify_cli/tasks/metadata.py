"""What a task folder records about itself beside the task proper: where it came from
(``source.json``, written by ``verify-cli import``) and its measured difficulty (a ``[difficulty]``
table that ``verify-cli difficulty --write-back`` adds to task.toml, or one carried in from an
imported row)."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path
from typing import Any

from verify_cli.tasks.model import TASK_FILE, Task

SOURCE_FILE = "source.json"

#: Default buckets over a pass rate p (the difficulty command's defaults).
BUCKETS = ("unsolved", "hard", "medium", "easy", "solved")


def task_source(task: Task | Path) -> dict[str, Any]:
    """The provenance record of an imported task ({} when there is none or it is unreadable)."""
    root = task.root if isinstance(task, Task) else Path(task)
    try:
        doc = json.loads((root / SOURCE_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return doc if isinstance(doc, dict) else {}


def difficulty_record(task: Task | Path) -> dict[str, Any] | None:
    """The measured difficulty: task.toml's ``[difficulty]`` table, else the imported row's."""
    root = task.root if isinstance(task, Task) else Path(task)
    try:
        doc = tomllib.loads((root / TASK_FILE).read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError):
        doc = {}
    record = doc.get("difficulty")
    if isinstance(record, dict) and record:
        return record
    carried = task_source(root).get("difficulty")
    if isinstance(carried, dict) and carried:
        return carried
    if isinstance(carried, (int, float, str)) and not isinstance(carried, bool) and str(carried).strip():
        return {"value": carried}
    return None


def pass_rate(record: dict[str, Any]) -> float | None:
    for key in ("pass_rate", "value", "p"):
        value = record.get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 <= value <= 1:
            return float(value)
    return None


def difficulty_bucket(record: dict[str, Any] | None) -> str:
    """The record's own bucket, else one from its pass rate, else its label; 'unmeasured' without."""
    if not record:
        return "unmeasured"
    bucket = record.get("bucket")
    if isinstance(bucket, str) and bucket:
        return bucket
    p = pass_rate(record)
    if p is not None:
        if p == 0:
            return "unsolved"
        if p == 1:
            return "solved"
        return "hard" if p < 1 / 3 else "medium" if p < 2 / 3 else "easy"
    label = record.get("value", record.get("label"))
    return str(label) if isinstance(label, str) and label else "unmeasured"
