"""The per-sample step: what the model produced for a task, in; a graded sample with its status, out.

:class:`SampleStep` is the interface; :class:`AnswerStep` is the one-shot step both ``difficulty``
and ``train`` use (take the answer's files, grade them, name the status). An agent episode
sampler implements the same interface: it drives a session from the model's first turn to the
episode's final files and grades those with :func:`grade_files`, so that everything downstream
(statistics, rewards, Parquet rows) takes its samples unchanged.

:func:`grade_with_retries` is the one place a sample's grading is handed over to whatever
grades (a :class:`~verify_cli.grading.Grader`, the local executor or the Ray executor: any
:class:`~verify_cli.grading.batch.BatchGrader`), under the one :class:`RetryPolicy`.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field

from verify_cli.errors import UsageError
from verify_cli.grading.batch import BatchGrader
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.models.base import Completion
from verify_cli.models.context import is_too_long
from verify_cli.models.prompts import Extraction, extract_for_task, files_to_candidate
from verify_cli.sampling.status import SampleStatus, status_of
from verify_cli.tasks.model import Task


@dataclass(frozen=True)
class RetryPolicy:
    """How often one answer is graded before a sandbox failure is final (then ``infra_error``).

    Only infrastructure errors are retried: a graded answer, right or wrong, is final at once.
    The Ray executor re-delivers a run lost with its node or actor on its own, before the
    result reaches this policy; what it gives up on comes back as an infrastructure error and is
    retried here like any other.
    """

    attempts: int = 3

    def __post_init__(self) -> None:
        if self.attempts < 1:
            raise UsageError(f"grading attempts must be at least 1, got {self.attempts}")


@dataclass(frozen=True)
class GradedSample:
    """One answer taken from what the model produced and graded (or found unreadable)."""

    task: Task
    status: SampleStatus
    #: The files taken from the answer (empty for a parse error).
    files: dict[str, str] = field(default_factory=dict)
    #: The last grading (None for a parse error: nothing was graded).
    grade: GradeResult | None = None
    #: Why no file could be taken from the answer, for a parse error.
    parse_error: str | None = None
    #: Gradings run (0 for a parse error).
    attempts: int = 0
    #: Time spent grading, retries included.
    seconds: float = 0.0

    @property
    def score(self) -> float | None:
        """The task's partial-credit score: 0 for a parse error, None for an infrastructure error."""
        if not self.status.counts:  # an infrastructure error, a prompt never generated
            return None
        if self.grade is None:
            return 0.0
        return self.grade.score or 0.0

    @property
    def problems(self) -> tuple[str, ...]:
        if self.parse_error is not None:
            return (self.parse_error,)
        return self.grade.problems if self.grade is not None else ()


def grade_with_retries(grader: BatchGrader, request: GradeRequest, retry: RetryPolicy) -> tuple[GradeResult, int]:
    """Grade ``request``, again after an infrastructure error, at most ``retry.attempts`` times;
    returns the last result and the number of gradings."""
    attempts = 0
    while True:
        attempts += 1
        result = grader.grade(request)
        if result.status is not GradeStatus.INFRA_ERROR or attempts >= retry.attempts:
            return result, attempts


def grade_files(grader: BatchGrader, task: Task, files: Mapping[str, str], *, retry: RetryPolicy,
                label: str = "") -> GradedSample:
    """Grade a candidate's files (the editable ones are taken, the rest reported) and name the status."""
    started = time.monotonic()
    request = GradeRequest(task=task, phase=Phase.CANDIDATE, candidate=files_to_candidate(files), label=label)
    result, attempts = grade_with_retries(grader, request, retry)
    return GradedSample(task=task, status=status_of(result), files=dict(files), grade=result, attempts=attempts,
                        seconds=time.monotonic() - started)


def answer_files(task: Task, completion: Completion) -> Extraction:
    """The files of ``completion``: those a backend already extracted (replayed rows), else the
    ones extraction takes from its text."""
    if completion.files is not None:
        return Extraction(dict(completion.files))
    return extract_for_task(task, completion.text)


def too_long_sample(task: Task) -> GradedSample:
    """The sample of a prompt that did not fit the model's context (never generated, never graded)."""
    return GradedSample(task=task, status=SampleStatus.PROMPT_TOO_LONG,
                        parse_error="the prompt does not fit the model's context")


class SampleStep(ABC):
    """Turns what the model produced for a task into one :class:`GradedSample`.

    Called from grading threads, several at once: an implementation must be safe to share.
    """

    @abstractmethod
    def run(self, task: Task, completion: Completion, *, label: str = "") -> GradedSample:
        """The graded sample of ``completion``; never raises for a bad answer or a failed sandbox."""


class AnswerStep(SampleStep):
    """The one-shot step: extract the answer's files, grade them, name the status."""

    def __init__(self, grader: BatchGrader, retry: RetryPolicy | None = None) -> None:
        self.grader = grader
        self.retry = retry or RetryPolicy()

    def run(self, task: Task, completion: Completion, *, label: str = "") -> GradedSample:
        if is_too_long(completion):  # never generated: nothing to grade
            return too_long_sample(task)
        extraction = answer_files(task, completion)
        if not extraction.ok:
            return GradedSample(task=task, status=SampleStatus.PARSE_ERROR,
                                parse_error=extraction.error or "parse error")
        return grade_files(self.grader, task, extraction.files, retry=self.retry, label=label)
