"""Write a TaskDraft as a task folder: task.toml (validated against the schema), prompt.md,
the files, and ``source.json`` (where the row came from)."""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path
from typing import Any

from verify_cli.importers.model import RowError, TaskDraft
from verify_cli.tasks.loader import validate_document
from verify_cli.tasks.model import PROMPT_FILE, RUNNER_COMMANDS, RUNNER_RESULTS, TASK_FILE, TaskKind
from verify_cli.tasks.paths import unsafe_relative_path

from verify_cli.tasks.metadata import SOURCE_FILE
PYTHON_IMAGE = "verify-cli/python:3.11"


def toml_value(value: Any) -> str:
    """One TOML value (strings, numbers, booleans, arrays of them, inline tables)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            raise ValueError("TOML here holds finite numbers only")
        return repr(value)
    if isinstance(value, str):
        # A JSON string is a TOML basic string once DEL is escaped (JSON leaves it as is).
        return json.dumps(value, ensure_ascii=False).replace("\x7f", "\\u007f")
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{" + ", ".join(f"{toml_key(k)} = {toml_value(v)}" for k, v in value.items()) + "}"
    raise ValueError(f"cannot write {type(value).__name__} to TOML")


def toml_key(key: str) -> str:
    return key if key.replace("_", "").replace("-", "").isalnum() and key.isascii() else toml_value(key)


def dumps_toml(doc: dict[str, Any]) -> str:
    """TOML text of a document of scalars, arrays and (one level of) tables."""
    lines: list[str] = []
    tables: list[tuple[str, dict[str, Any]]] = []
    for key, value in doc.items():
        if isinstance(value, dict):
            tables.append((key, value))
        else:
            lines.append(f"{toml_key(key)} = {toml_value(value)}")
    for name, table in tables:
        lines.append("")
        lines.append(f"[{toml_key(name)}]")
        for key, value in table.items():
            lines.append(f"{toml_key(key)} = {toml_value(value)}")
    return "\n".join(lines) + "\n"


def task_document(draft: TaskDraft) -> dict[str, Any]:
    doc: dict[str, Any] = {"schema_version": 1, "id": draft.id}
    if draft.title:
        doc["title"] = draft.title
    doc.update({"domain": draft.domain, "language": draft.language})
    if draft.tags:
        doc["tags"] = list(dict.fromkeys(draft.tags))
    doc["kind"] = draft.kind.value
    doc["editable"] = draft.editable
    doc["environment"] = {"image": PYTHON_IMAGE, "runtime": "python"}
    if draft.kind is TaskKind.TESTS:
        raise RowError("importers write 'stdio' and 'calls' tasks only")
    doc["test"] = {"command": RUNNER_COMMANDS[draft.kind], "results": RUNNER_RESULTS}
    doc["scoring"] = {"policy": "all-or-nothing"}
    doc["limits"] = {"wall_seconds": draft.wall_seconds, "memory_mb": 1024}
    doc[draft.kind.value] = draft.table
    return doc


def write_task(draft: TaskDraft, out: Path) -> Path:
    """Write ``draft`` under ``out`` (at ``out/<id>``), replacing a folder already there."""
    for rel in draft.files:
        why = unsafe_relative_path(rel)
        if why:
            raise RowError(f"file path {rel!r} {why}")
    folder = out / draft.id
    if draft.task_toml is not None:
        text = draft.task_toml
    else:
        doc = task_document(draft)
        validate_document(folder / TASK_FILE, doc)
        text = dumps_toml(doc)
    if folder.exists():
        shutil.rmtree(folder)
    folder.mkdir(parents=True)
    (folder / TASK_FILE).write_text(text, encoding="utf-8")
    (folder / PROMPT_FILE).write_text(draft.prompt, encoding="utf-8")
    made: set[Path] = {folder}
    for rel, content in draft.files.items():
        dest = folder / rel
        if dest.parent not in made:
            dest.parent.mkdir(parents=True, exist_ok=True)
            made.add(dest.parent)
        dest.write_text(content, encoding="utf-8")
    if draft.source:
        (folder / SOURCE_FILE).write_text(json.dumps(draft.source, indent=1, sort_keys=True, default=str) + "\n",
                                          encoding="utf-8")
    return folder
