"""Write a TaskDraft as a task folder: task.toml (validated against the schema), prompt.md,
the files, and ``source.json`` (where the row came from)."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
from pathlib import Path
from typing import Any

from verify_cli.importers.model import DEFAULT_OUTPUT_BYTES, RowError, TaskDraft
from verify_cli.tasks.loader import validate_document
from verify_cli.tasks.metadata import SOURCE_FILE
from verify_cli.tasks.model import PROMPT_FILE, RUNNER_COMMANDS, RUNNER_RESULTS, TASK_FILE, TaskKind
from verify_cli.tasks.paths import unsafe_relative_path

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
    if draft.kind not in RUNNER_COMMANDS:  # the kinds graded by a built-in runner
        raise RowError("importers write 'stdio' and 'calls' tasks only")
    kind = TaskKind(draft.kind)
    doc["kind"] = kind.value
    doc["editable"] = draft.editable
    doc["environment"] = {"image": PYTHON_IMAGE, "runtime": "python"}
    doc["test"] = {"command": RUNNER_COMMANDS[kind], "results": RUNNER_RESULTS}
    doc["scoring"] = {"policy": "all-or-nothing"}
    doc["limits"] = {"wall_seconds": draft.wall_seconds, "memory_mb": 1024}
    if draft.output_bytes != DEFAULT_OUTPUT_BYTES:
        doc["limits"]["output_bytes"] = draft.output_bytes
    doc[kind.value] = draft.table
    return doc


_ID = re.compile(r"^[a-z0-9][a-z0-9._-]*(/[a-z0-9][a-z0-9._-]*)*$")
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?$")  # the schema's entry_point
#: Text fields whose value (an enum) is part of a document's shape.
_FIXED = {"kind", "domain", "language", "runtime", "policy", "compare", "style", "command", "results"}


class DocumentCheck:
    """Schema validation of generated task.toml documents, paid once per document shape.

    The importers build every document of a shape (kind, keys, value types) the same way; only
    text values change from row to row. So the first document of each shape is validated in
    full and later ones only on the constraints their text values must meet (id, entry point),
    which keeps 10,000 rows in seconds.
    """

    def __init__(self) -> None:
        self._shapes: set[str] = set()

    @staticmethod
    def _shape(doc: dict[str, Any]) -> str:
        # Keys of the document and of its tables, and the values the importers fix (not text).
        parts = []
        for key, value in doc.items():
            if isinstance(value, dict):
                inner = ",".join(k if isinstance(v, str) and k not in _FIXED else f"{k}={v!r}"
                                 for k, v in value.items())
                parts.append(f"{key}:{{{inner}}}")
            elif isinstance(value, str) and key not in _FIXED:
                parts.append(key)
            else:
                parts.append(f"{key}={value!r}")
        return ";".join(parts)

    def validate(self, path: Path, doc: dict[str, Any]) -> None:
        shape = self._shape(doc)
        if shape not in self._shapes:
            validate_document(path, doc)
            self._shapes.add(shape)
            return
        if len(doc["id"]) > 200 or not _ID.match(doc["id"]):
            validate_document(path, doc)  # raises with the schema's own message
        calls = doc.get("calls")
        if calls is not None and not _NAME.match(calls["entry_point"]):
            validate_document(path, doc)


def _write(path: str, content: str | bytes) -> None:
    if isinstance(content, bytes):
        with open(path, "wb") as fh:
            fh.write(content)
        return
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(content)


def write_task(draft: TaskDraft, out: Path, check: DocumentCheck | None = None) -> Path:
    """Write ``draft`` under ``out`` (at ``out/<id>``), replacing a folder already there."""
    for rel in draft.files:
        why = unsafe_relative_path(rel)
        if why:
            raise RowError(f"file path {rel!r} {why}")
    if len(draft.id) > 200 or not _ID.match(draft.id):
        # The id names the folder under ``out`` (which is replaced): never a path out of it.
        raise RowError(f"task id {draft.id[:80]!r} is not a valid id (lowercase a-z0-9._- parts joined by '/')")
    folder = out / draft.id
    if draft.task_toml is not None:
        text = draft.task_toml
    else:
        doc = task_document(draft)
        (check or DocumentCheck()).validate(folder / TASK_FILE, doc)
        text = dumps_toml(doc)
    base = str(folder)
    if os.path.lexists(base):
        shutil.rmtree(base)
    os.makedirs(base)
    _write(os.path.join(base, TASK_FILE), text)
    _write(os.path.join(base, PROMPT_FILE), draft.prompt)
    made = {base}
    for rel, content in draft.files.items():
        dest = os.path.join(base, rel)
        parent = os.path.dirname(dest)
        if parent not in made:
            os.makedirs(parent, exist_ok=True)
            made.add(parent)
        _write(dest, content)
        if rel in draft.executable:
            os.chmod(dest, 0o755)
    if draft.source:
        _write(os.path.join(base, SOURCE_FILE), json.dumps(draft.source, indent=1, sort_keys=True, default=str) + "\n")
    return folder
