"""A task set at a glance: one entry per task folder, with what ``tasks list`` shows."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from verify_cli.tasks.loader import TaskLoadFailure, load_task_set
from verify_cli.tasks.metadata import difficulty_bucket, difficulty_record, task_source
from verify_cli.tasks.model import Task


@dataclass(frozen=True)
class TaskEntry:
    id: str
    path: str
    domain: str
    language: str
    kind: str
    difficulty: str  # bucket, or 'unmeasured'
    data_source: str
    task: Task | None = None  # None: the folder did not load
    problem: str = ""

    def to_dict(self) -> dict[str, str]:
        return {"id": self.id, "path": self.path, "domain": self.domain, "language": self.language,
                "kind": self.kind, "difficulty": self.difficulty, "data_source": self.data_source,
                "problem": self.problem}


def catalog(path: Path) -> list[TaskEntry]:
    """Every task folder under ``path``; folders that do not load are entries with a problem."""
    out: list[TaskEntry] = []
    for item in load_task_set(path):
        if isinstance(item, TaskLoadFailure):
            out.append(TaskEntry(item.id, str(item.root), "?", "?", "?", "unmeasured", "",
                                 problem=item.error.message))
            continue
        out.append(TaskEntry(item.id, str(item.root), item.domain, item.language, str(item.kind),
                             difficulty_bucket(difficulty_record(item)),
                             str(task_source(item).get("data_source", "")), task=item))
    return out
