"""Labelled solutions: ``labelled/correct/<name>/`` and ``labelled/incorrect/<name>/`` folders
beside a task's files, each a candidate (its files laid out under the editable rule). The tests'
true-positive rate is the share of correct ones they pass, the true-negative rate the share of
incorrect ones they fail."""

from __future__ import annotations

from pathlib import Path

from verify_cli.checks.audit.model import LabelledRun
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import list_files

LABELLED_DIR = "labelled"
LABELS = ("correct", "incorrect")


def labelled_candidates(task: Task) -> list[tuple[str, str, dict[str, bytes]]]:
    """(label, name, files) of every labelled candidate folder of the task, sorted."""
    out: list[tuple[str, str, dict[str, bytes]]] = []
    for label in LABELS:
        folder = task.root / LABELLED_DIR / label
        if not folder.is_dir():
            continue
        for entry in sorted(folder.iterdir()):
            if entry.is_dir():
                files = {rel: p.read_bytes() for rel, p in list_files(entry).items()}
                out.append((label, entry.name, files))
    return out


def labelled_requests(task: Task, label: str) -> list[tuple[str, str, GradeRequest]]:
    return [(kind, name, GradeRequest(task, Phase.CANDIDATE, candidate=files,
                                      label=f"{label}{kind}/{name}"))
            for kind, name, files in labelled_candidates(task)]


def judge_labelled(kind: str, name: str, result: GradeResult) -> LabelledRun:
    if result.status is GradeStatus.INFRA_ERROR:
        return LabelledRun(name, kind, None, None)
    return LabelledRun(name, kind, result.passed, result.score)


def has_labelled(task: Task) -> bool:
    return any((Path(task.root) / LABELLED_DIR / label).is_dir() for label in LABELS)
