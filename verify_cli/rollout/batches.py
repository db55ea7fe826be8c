"""Which tasks each step trains on: a seeded, resumable choice over a task set.

Step ``s`` takes positions ``s*B .. s*B+B-1`` of an endless sequence of epochs, each epoch a
permutation of the eligible tasks seeded by (run seed, epoch). The choice is a pure function of
the seed and the step, so a resumed run picks exactly the batches an uninterrupted run picks.
Replacement tasks (dynamic sampling) come from their own stream, seeded by (seed, step, round).
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from verify_cli.errors import UsageError
from verify_cli.sampling.seeds import derive_seed
from verify_cli.tasks.model import Task

#: Difficulty buckets skipped unless asked for: no gradient (solved, unsolved) or broken (defective).
SKIPPED_BUCKETS = frozenset({"solved", "unsolved", "defective"})


def difficulty_bucket(task: Task) -> str | None:
    """The bucket ``verify-cli difficulty --write-back`` recorded in task.toml (``[difficulty]``)."""
    record = task.difficulty
    if record is None:
        return None
    bucket = record.get("bucket")
    return str(bucket) if bucket is not None else None


@dataclass(frozen=True)
class TaskSelection:
    tasks: tuple[Task, ...]
    skipped: dict[str, str]  # task id -> bucket


def select_tasks(tasks: Iterable[Task], *, include_buckets: Iterable[str] = ()) -> TaskSelection:
    """The tasks to train on, sorted by id: those in a skipped bucket are left out unless named."""
    skip = SKIPPED_BUCKETS - set(include_buckets)
    kept: list[Task] = []
    skipped: dict[str, str] = {}
    for task in sorted(tasks, key=lambda t: t.id):
        bucket = difficulty_bucket(task)
        if bucket in skip:
            skipped[task.id] = bucket or ""
        else:
            kept.append(task)
    if not kept:
        raise UsageError(f"no task left to train on ({len(skipped)} skipped by difficulty bucket)",
                         hint="pass --include-bucket solved/unsolved/defective to keep them")
    return TaskSelection(tuple(kept), skipped)


class BatchSchedule:
    """The batch of each step, and replacement tasks for dynamic sampling."""

    def __init__(self, tasks: Sequence[Task], batch_size: int, seed: int) -> None:
        self.tasks = list(tasks)
        self.batch_size = batch_size
        self.seed = seed
        self._epochs: dict[int, list[int]] = {}

    def _epoch(self, epoch: int) -> list[int]:
        if epoch not in self._epochs:
            order = list(range(len(self.tasks)))
            random.Random(derive_seed(self.seed, "epoch", epoch)).shuffle(order)
            self._epochs[epoch] = order
        return self._epochs[epoch]

    def batch(self, step: int) -> list[Task]:
        n = len(self.tasks)
        out = []
        for pos in range(step * self.batch_size, (step + 1) * self.batch_size):
            out.append(self.tasks[self._epoch(pos // n)[pos % n]])
        return out

    def replacements(self, step: int, round_: int, count: int, exclude: Iterable[str],
                     flat: Iterable[str] = ()) -> list[Task]:
        """``count`` tasks for dynamic sampling round ``round_`` of ``step``: tasks not in
        ``exclude`` (the step's batch) first, else tasks not ``flat`` (all-equal this step), else any."""
        rng = random.Random(derive_seed(self.seed, "replace", step, round_))
        excluded, no_signal = set(exclude), set(flat)
        fresh = ([t for t in self.tasks if t.id not in excluded]
                 or [t for t in self.tasks if t.id not in no_signal] or list(self.tasks))
        rng.shuffle(fresh)
        return [fresh[i % len(fresh)] for i in range(count)]
