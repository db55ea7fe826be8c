"""Rewards from grading: the task's partial-credit score, shaping terms kept apart, and a status.

The rule of DESIGN.md holds here: a sandbox or infrastructure failure is never a score. Such a
sample gets status ``sandbox_error``, no reward and ``masked=True`` (after the caller's retries),
so a trainer leaves it out rather than learning from a 0 it did not earn.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from verify_cli.grading.grader import GradeResult, GradeStatus
from verify_cli.sandbox.base import Verdict


class RewardStatus(StrEnum):
    OK = "ok"  # every test passed
    WRONG = "wrong"  # graded: some test did not pass
    TIMEOUT = "timeout"  # graded: the tests ran past the task's wall limit (the candidate's fault)
    PARSE_ERROR = "parse_error"  # no files could be taken from the completion
    SANDBOX_ERROR = "sandbox_error"  # the sandbox failed, after retries: masked, never scored


@dataclass(frozen=True)
class RewardConfig:
    """Shaping. Penalties are magnitudes (>= 0) subtracted from the score."""

    format_penalty: float = 0.0
    length_penalty: float = 0.0
    #: Response length (model tokens, all turns) from which the length penalty ramps up linearly,
    #: reaching ``length_penalty`` at ``max_tokens``. None: no soft zone, only truncation counts.
    soft_length: int | None = None
    #: Sandbox runs of one completion before an infrastructure failure is final.
    grade_attempts: int = 3


@dataclass(frozen=True)
class Reward:
    status: RewardStatus
    total: float | None
    score: float | None
    format_penalty: float
    length_penalty: float
    tests_passed: int
    tests_total: int
    problems: tuple[str, ...] = ()

    @property
    def masked(self) -> bool:
        return self.status is RewardStatus.SANDBOX_ERROR

    def components(self) -> dict[str, float | None]:
        return {"score": self.score, "format_penalty": self.format_penalty,
                "length_penalty": self.length_penalty}


def length_penalty(response_tokens: int, max_tokens: int, truncated: bool, config: RewardConfig) -> float:
    """A penalty in [-length_penalty, 0]: full for a truncated response, linear in the soft zone."""
    if config.length_penalty <= 0:
        return 0.0
    if truncated:
        return -config.length_penalty
    soft = config.soft_length
    if soft is None or response_tokens <= soft:
        return 0.0
    span = max(1, max_tokens - soft)
    return -config.length_penalty * min(1.0, (response_tokens - soft) / span)


def reward_from_grade(grade: GradeResult | None, *, parse_error: str | None, response_tokens: int,
                      max_tokens: int, truncated: bool, config: RewardConfig) -> Reward:
    """The reward of one graded completion (``grade`` None only with ``parse_error``)."""
    lp = length_penalty(response_tokens, max_tokens, truncated, config)
    if parse_error is not None or grade is None:
        fp = -config.format_penalty
        return Reward(RewardStatus.PARSE_ERROR, 0.0 + fp + lp, 0.0, fp, lp, 0, 0,
                      (parse_error or "no completion to grade",))
    passed = sum(t.outcome.ok for t in grade.tests)
    if grade.status is GradeStatus.INFRA_ERROR or grade.score is None:
        return Reward(RewardStatus.SANDBOX_ERROR, None, None, 0.0, 0.0, 0, 0, grade.problems)
    if grade.passed:
        status = RewardStatus.OK
    elif grade.run.verdict is Verdict.TIMEOUT:
        status = RewardStatus.TIMEOUT
    else:
        status = RewardStatus.WRONG
    return Reward(status, grade.score + lp, grade.score, 0.0, lp, passed, len(grade.tests), grade.problems)
