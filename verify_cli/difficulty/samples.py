"""One sample of a task as difficulty records it: the completion, the files taken from it, and
how it graded.

Sampling, extraction, grading, retries and statuses are the pipeline's
(:mod:`verify_cli.sampling`); this module turns its :class:`~verify_cli.sampling.step.GradedSample`
into the record that is cached and written to samples.parquet. An ``infra_error`` record (a
sandbox failure that persisted after retries) is never counted as a sample.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from verify_cli.difficulty.stats import SampleOutcome, SampleStatus
from verify_cli.grading.batch import BatchGrader
from verify_cli.grading.grader import GradeResult
from verify_cli.models.base import Completion
from verify_cli.sampling.step import AnswerStep, GradedSample, RetryPolicy
from verify_cli.tasks.model import HIDDEN_TESTS_DIR, TESTS_DIR, Task


@dataclass(frozen=True)
class SampleRecord:
    """One graded sample, as cached and as written to samples.parquet."""

    task_id: str
    sample_index: int
    completion: str
    files: dict[str, str]
    status: str
    score: float | None
    passed: bool
    visible_passed: bool | None
    tests: list[dict[str, str]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    finish_reason: str = ""
    token_ids: list[int] = field(default_factory=list)
    gen_seconds: float = 0.0
    grade_seconds: float = 0.0
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> SampleRecord:
        return cls(**{k: d[k] for k in cls.__dataclass_fields__ if k in d})

    def to_line(self) -> str:
        """The record as one JSON line, as the sample cache and a run's spill file hold it."""
        return json.dumps(self.to_dict(), ensure_ascii=False) + "\n"

    @classmethod
    def from_line(cls, line: str | bytes) -> SampleRecord:
        return cls.from_dict(json.loads(line))

    @property
    def outcome(self) -> SampleOutcome:
        return SampleOutcome(SampleStatus(self.status), self.score or 0.0, self.visible_passed)


def origin_of_test(test_id: str) -> str | None:
    """``visible`` or ``hidden`` for a test id that says where its file lives, else None.
    (pytest ids begin with the dotted module path: ``hidden_tests.test_x::test_y``.)"""
    for folder, origin in ((HIDDEN_TESTS_DIR, "hidden"), (TESTS_DIR, "visible")):
        if test_id.startswith((f"{folder}.", f"{folder}/", f"{folder}::")):
            return origin
    return None


def has_visible_tests(task: Task) -> bool:
    """Whether the task has visible tests (files under ``tests/``) at all."""
    folder = task.root / TESTS_DIR if task.root else None
    return folder is not None and folder.is_dir() and any(p.is_file() for p in folder.rglob("*"))


def visible_tests_passed(task: Task, result: GradeResult, has_hidden: bool) -> bool | None:
    """Whether every visible test passed; None when the task has no visible tests or the ids
    do not say which tests are visible."""
    if has_hidden and not has_visible_tests(task):
        return None  # nothing visible to pass: not 0 of them
    if not result.tests:
        return False
    if not has_hidden:
        return result.passed
    visible = []
    for t in result.tests:
        origin = origin_of_test(t.id)
        if origin is None:
            return None
        if origin == "visible":
            visible.append(t)
    return bool(visible) and all(t.outcome.ok for t in visible)


def has_hidden_tests(task: Task) -> bool:
    return bool(task.root and (task.root / HIDDEN_TESTS_DIR).is_dir())


def sample_record(graded: GradedSample, index: int, completion: Completion, *, gen_seconds: float = 0.0,
                  has_hidden: bool | None = None) -> SampleRecord:
    """The record of sample ``index`` of ``graded.task``."""
    task = graded.task
    common: dict[str, Any] = dict(task_id=task.id, sample_index=index, completion=completion.text,
                                  finish_reason=completion.finish_reason, token_ids=list(completion.token_ids),
                                  gen_seconds=round(gen_seconds, 4))
    status, result = graded.status, graded.grade
    if result is None:  # a parse error, or an episode the machinery lost: nothing was graded
        return SampleRecord(files={}, status=status.value, score=graded.score, passed=False,
                            visible_passed=False if has_visible_tests(task) else None,
                            problems=list(graded.problems), attempts=0, **common)
    if has_hidden is None:
        has_hidden = has_hidden_tests(task)
    infra = status is SampleStatus.INFRA_ERROR
    return SampleRecord(
        files=dict(graded.files), status=status.value, score=graded.score, passed=status is SampleStatus.PASSED,
        visible_passed=None if infra else visible_tests_passed(task, result, has_hidden),
        tests=[{"id": t.id, "outcome": t.outcome.value} for t in result.tests],
        problems=list(result.problems), grade_seconds=round(graded.seconds, 4), attempts=graded.attempts,
        **common)


async def grade_sample(grader: BatchGrader, task: Task, index: int, completion: Completion, *,
                       gen_seconds: float = 0.0, retry: RetryPolicy | None = None,
                       has_hidden: bool | None = None) -> SampleRecord:
    """Extract the candidate's files from ``completion`` and grade them in the sandbox (the
    pipeline's one-shot step, off the event loop)."""
    graded = await asyncio.to_thread(AnswerStep(grader, retry).run, task, completion, label=f"sample {index}")
    return sample_record(graded, index, completion, gen_seconds=gen_seconds, has_hidden=has_hidden)
