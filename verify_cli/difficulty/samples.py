"""One sample of a task: the completion, the files taken from it, and how it graded.

:func:`grade_sample` is the one place a sample is graded, so that an executor (Ray) can take it
over. Infrastructure errors are retried; one that persists is an ``infra_error`` record, which
the statistics never count as a sample.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from verify_cli.difficulty.stats import SampleOutcome, SampleStatus
from verify_cli.grading.batch import BatchGrader
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.models.base import Completion
from verify_cli.models.prompts import extract_for_task, files_to_candidate
from verify_cli.sandbox.base import Verdict
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


def status_of(result: GradeResult) -> SampleStatus:
    if result.status is GradeStatus.INFRA_ERROR:
        return SampleStatus.INFRA_ERROR
    if result.passed:
        return SampleStatus.PASSED
    if result.run.verdict is Verdict.TIMEOUT:
        return SampleStatus.TIMEOUT
    return SampleStatus.FAILED


async def grade_sample(grader: BatchGrader, task: Task, index: int, completion: Completion, *,
                       gen_seconds: float = 0.0, infra_retries: int = 2,
                       has_hidden: bool | None = None) -> SampleRecord:
    """Extract the candidate's files from ``completion`` and grade them in the sandbox."""
    common: dict[str, Any] = dict(task_id=task.id, sample_index=index, completion=completion.text,
                                  finish_reason=completion.finish_reason, token_ids=list(completion.token_ids),
                                  gen_seconds=round(gen_seconds, 4))
    if completion.files is not None:
        files = dict(completion.files)
    else:
        extraction = extract_for_task(task, completion.text)
        if not extraction.ok:
            return SampleRecord(files={}, status=SampleStatus.PARSE_ERROR.value, score=0.0, passed=False,
                                visible_passed=False if has_visible_tests(task) else None,
                                problems=[extraction.error or "parse error"],
                                attempts=0, **common)
        files = extraction.files
    if has_hidden is None:
        has_hidden = bool(task.root and (task.root / HIDDEN_TESTS_DIR).is_dir())
    request = GradeRequest(task=task, phase=Phase.CANDIDATE, candidate=files_to_candidate(files),
                           label=f"sample {index}")
    started = time.monotonic()
    attempts = 0
    while True:
        attempts += 1
        result = await grader.agrade(request)
        if result.status is not GradeStatus.INFRA_ERROR or attempts > infra_retries:
            break
    status = status_of(result)
    return SampleRecord(
        files=files, status=status.value,
        score=None if status is SampleStatus.INFRA_ERROR else (result.score or 0.0),
        passed=status is SampleStatus.PASSED,
        visible_passed=None if status is SampleStatus.INFRA_ERROR else visible_tests_passed(task, result, has_hidden),
        tests=[{"id": t.id, "outcome": t.outcome.value} for t in result.tests],
        problems=list(result.problems), grade_seconds=round(time.monotonic() - started, 4), attempts=attempts,
        **common)
