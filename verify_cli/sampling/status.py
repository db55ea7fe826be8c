"""The one status vocabulary of a graded sample, shared by ``difficulty`` and ``train``.

``passed``, ``failed`` and ``timeout`` are graded answers; ``parse_error`` is a format failure (no
file could be taken from the completion: a failed sample that RL users may reward apart);
``infra_error`` is the sandbox's failure after every retry: never a score, never one of the ``n``
samples, masked in training. ``prompt_too_long`` is a sample never generated because the task's
prompt leaves the model no room (:mod:`verify_cli.models.context`): like an infrastructure error
it is never a score, never counted, masked in training, and nothing is graded.

Trajectory shards spell the same statuses as they always have (``ok``, ``wrong``, ``timeout``,
``parse_error``, ``sandbox_error``): :attr:`SampleStatus.trajectory_label` is that spelling,
kept so that shards written before and after read alike.
"""

from __future__ import annotations

from enum import StrEnum

from verify_cli.grading.grader import GradeResult, GradeStatus
from verify_cli.sandbox.base import Verdict


class SampleStatus(StrEnum):
    PASSED = "passed"  # every test passed
    FAILED = "failed"  # graded: some test did not pass
    TIMEOUT = "timeout"  # graded: the tests ran past the task's wall limit (the candidate's fault)
    PARSE_ERROR = "parse_error"  # no file could be taken from the completion: a format failure
    INFRA_ERROR = "infra_error"  # the sandbox failed after every retry: never scored
    PROMPT_TOO_LONG = "prompt_too_long"  # the prompt does not fit the model's context: never generated

    @property
    def counts(self) -> bool:
        """Whether a sample with this status is one of the ``n`` samples of a pass rate."""
        return self not in _UNSCORED

    @property
    def masked(self) -> bool:
        """Whether a trainer must leave the sample out (it was never scored)."""
        return self in _UNSCORED

    @property
    def trajectory_label(self) -> str:
        """The status as the ``status`` column of trajectory shards spells it."""
        return _TRAJECTORY_LABELS[self]


_UNSCORED = frozenset({SampleStatus.INFRA_ERROR, SampleStatus.PROMPT_TOO_LONG})
_TRAJECTORY_LABELS = {SampleStatus.PASSED: "ok", SampleStatus.FAILED: "wrong", SampleStatus.TIMEOUT: "timeout",
                      SampleStatus.PARSE_ERROR: "parse_error", SampleStatus.INFRA_ERROR: "sandbox_error",
                      SampleStatus.PROMPT_TOO_LONG: "prompt_too_long"}

#: The trajectory spellings, in the order of :class:`SampleStatus`.
TRAJECTORY_LABELS: tuple[str, ...] = tuple(s.trajectory_label for s in SampleStatus)


def status_of(result: GradeResult) -> SampleStatus:
    """The status of a graded answer (an extracted one: parse errors never reach grading)."""
    if result.status is GradeStatus.INFRA_ERROR or result.score is None:
        return SampleStatus.INFRA_ERROR
    if result.passed:
        return SampleStatus.PASSED
    if result.run.verdict is Verdict.TIMEOUT:
        return SampleStatus.TIMEOUT
    return SampleStatus.FAILED


def describe(statuses: tuple[str, ...]) -> str:
    """``"a, b or c"``: a list of statuses for a schema's field doc."""
    return f"{', '.join(statuses[:-1])} or {statuses[-1]}"
