"""Whether a backend with a fixed supply of samples (replayed rows) can serve a run, said up front.

A model samples any task as often as asked; a file of replayed completions holds so many rows per
task id. A run asking for more samples of a task than there are, or a file whose task ids match
none of the tasks, is a usage error (exit 2) before anything is graded; rows naming no task and
tasks with no rows are warnings, so that a subset of a task set can be measured with the whole
set's file.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from verify_cli.errors import UsageError
from verify_cli.models.base import ModelBackend
from verify_cli.tasks.model import Task

#: Task ids named in one message.
SHOWN_IDS = 5


def _some(ids: Sequence[str]) -> str:
    shown = ", ".join(repr(i) for i in ids[:SHOWN_IDS])
    return shown + (f" and {len(ids) - SHOWN_IDS} more" if len(ids) > SHOWN_IDS else "")


def check_supply(backend: ModelBackend, tasks: Sequence[Task], wanted: int, *, option: str,
                 other_task_ids: Iterable[str] = ()) -> list[str]:
    """Warnings about ``backend``'s supply for ``wanted`` samples of each of ``tasks`` (the ones to
    sample; ``other_task_ids`` are tasks that exist but are not sampled, e.g. defective ones);
    raises :class:`UsageError` naming ``option`` when the supply cannot serve the run."""
    supplied = backend.task_ids()
    if supplied is None:
        return []
    source = backend.model_id
    known = {t.id for t in tasks} | set(other_task_ids)
    unmatched = [i for i in supplied if i not in known]
    if tasks and supplied and len(unmatched) == len(supplied):
        raise UsageError(f"{source}: none of its {len(supplied)} task id(s) names one of the {len(known)} task(s) "
                         f"given ({_some(unmatched)}; the tasks are e.g. {sorted(known)[0]!r})",
                         hint="the rows' task_id must be the id in task.toml; check the file and the task folder")
    warnings = []
    if unmatched:
        warnings.append(f"{source}: {len(unmatched)} task id(s) match no task and their rows are ignored: "
                        f"{_some(unmatched)}")
    have = {t.id: backend.samples_available(t.id) or 0 for t in tasks}
    empty = sorted(i for i, n in have.items() if n == 0)
    if empty:
        warnings.append(f"{source}: {len(empty)} task(s) have no rows and get no samples: {_some(empty)}")
    short = sorted((n, i) for i, n in have.items() if 0 < n < wanted)
    if short:
        fewest, task_id = short[0]
        more = f" ({len(short) - 1} more task(s) have fewer than {wanted})" if len(short) > 1 else ""
        raise UsageError(f"{option} {wanted}: {source} has only {fewest} row(s) for task {task_id!r}{more}",
                         hint=f"pass {option} {fewest} or fewer, or add rows for those tasks")
    return warnings
