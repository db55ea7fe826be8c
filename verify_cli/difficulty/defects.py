"""Which tasks are defective (bucketed ``defective``, never sampled): from running check-tasks,
from a saved check-tasks JSON report, and task folders that do not load."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from verify_cli.checks.cache import ResultCache
from verify_cli.checks.report import TaskReport, TaskVerdict
from verify_cli.errors import UsageError
from verify_cli.grading.batch import BatchGrader
from verify_cli.tasks.loader import TaskLoadFailure
from verify_cli.tasks.model import Task

if TYPE_CHECKING:  # check-tasks itself is imported by a --check run only
    from verify_cli.checks.solvability import CacheIdentity, ProgressCallback

#: task id -> (task folder, why it is defective)
Defects = dict[str, tuple[str, str]]


def _reason(report: TaskReport) -> str:
    return "; ".join(f"{c.name}: {c.message}" for c in report.defects)[:500]


def defects_of_load_failures(failures: Sequence[TaskLoadFailure]) -> Defects:
    return {f.id: (str(f.root), f"does not load: {f.error.message}") for f in failures}


#: check-tasks verdicts that take a task out of difficulty's table (with the reason).
UNUSABLE = (TaskVerdict.DEFECTIVE, TaskVerdict.ENVIRONMENT_ERROR)


def defects_from_check_tasks(tasks: Sequence[Task], grader: BatchGrader, *, repeats: int = 3, jobs: int = 2,
                             cache: ResultCache | None = None, backend_id: str | CacheIdentity = "",
                             on_progress: ProgressCallback | None = None) -> Defects:
    """Run check-tasks (cached as check-tasks caches) and return the defective tasks."""
    from verify_cli.checks.solvability import CheckOptions, check_tasks

    reports = check_tasks(tasks, grader, CheckOptions(repeats=repeats, jobs=jobs), cache=cache,
                          backend_id=backend_id, on_progress=on_progress)
    return {r.task_id: (r.path, _reason(r)) for r in reports if r.verdict in UNUSABLE}


def defects_from_report(path: Path) -> Defects:
    """The defective tasks of a ``verify-cli check-tasks --json`` report."""
    try:
        data = json.loads(Path(path).read_text("utf-8"))
        tasks = data["tasks"]
        reports = [TaskReport.from_dict(t) for t in tasks]
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise UsageError(f"{path}: not a check-tasks JSON report ({type(e).__name__}: {e})",
                         hint="write one with: verify-cli check-tasks PATH --json report.json") from None
    return {r.task_id: (r.path, _reason(r)) for r in reports if r.verdict in UNUSABLE}
