"""What an importer makes of one row: a draft task folder, or the reason it could not."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from verify_cli.tasks.model import TaskLimits

#: The task format's output limit where task.toml sets none (an imported task states it only
#: when it needs more).
DEFAULT_OUTPUT_BYTES = TaskLimits(wall_seconds=1.0).output_bytes


class RowError(Exception):
    """A row that cannot become a task; the message says why (the row's index is added later)."""


@dataclass
class TaskDraft:
    """A task folder before it is written: ``files`` maps paths in the folder to their text
    (or bytes, for a file that is not UTF-8)."""

    id: str
    prompt: str
    kind: str  # a task kind's name (TaskKind.CALLS, TaskKind.STDIO for the importers' own rows)
    files: dict[str, str | bytes]
    editable: list[str]
    table: dict[str, Any] = field(default_factory=dict)  # the [stdio] / [calls] table
    title: str = ""
    tags: list[str] = field(default_factory=list)
    domain: str = "coding"
    language: str = "python"
    wall_seconds: float = 30.0
    #: The program's output limit; raised above the default for a task whose expected outputs
    #: are large (a correct program must be able to print them).
    output_bytes: int = DEFAULT_OUTPUT_BYTES
    #: Where the row came from (data source, split, row index, original id) and what was
    #: measured of it (difficulty): written to ``source.json`` beside task.toml.
    source: dict[str, Any] = field(default_factory=dict)
    #: Paths of ``files`` that are executable (a repository's ``100755`` files: ``./runtests.py``).
    executable: frozenset[str] = frozenset()
    #: A task.toml written verbatim (a task exported by verify-cli and imported back).
    task_toml: str | None = None


@dataclass(frozen=True)
class RowFailure:
    index: int
    reason: str
    #: The row's own id (its id column, as written there), where it has one.
    id: str | None = None

    def to_dict(self) -> dict[str, object]:
        return {"index": self.index, "id": self.id, "reason": self.reason}


_ID_BAD = re.compile(r"[^a-z0-9._/-]+")


def task_id(raw: object, prefix: str) -> str:
    """A valid task id from a row's own id (``HumanEval/32`` -> ``humaneval/32``), under
    ``prefix`` when the row's id has no namespace of its own."""
    parts = _id_parts(str(raw))
    if not parts:
        raise RowError("the row's id is empty")
    if len(parts) == 1 and prefix:
        parts[:0] = _id_parts(prefix) or ["task"]
    return "/".join(parts)[:200].rstrip("/-._")


def _id_parts(text: str) -> list[str]:
    """The parts of a task id made of ``text``: lowercase, [a-z0-9._-], none empty or only dots
    (so '../x' is 'x', never a path out of the task set's folder)."""
    parts = [p.strip("-._") for p in _ID_BAD.sub("-", text.strip().lower()).split("/")]
    return [p for p in parts if p]


def missing_column(column: str, what: str) -> RowError:
    """The error for a row without ``column`` (the field ``what`` comes from)."""
    return RowError(f"column {column!r} ({what}) is missing or null; map another with --map {what}=COLUMN")


def required_text(row: dict[str, Any], column: str, what: str) -> str:
    """The text in ``column``, or a RowError naming the column."""
    if column not in row:
        raise missing_column(column, what)
    value = row[column]
    if value is None or (isinstance(value, str) and not value.strip()):
        raise RowError(f"column {column!r} ({what}) is empty")
    if not isinstance(value, str):
        raise RowError(f"column {column!r} ({what}) is {type(value).__name__}, not text")
    return value
