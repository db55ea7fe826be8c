"""Rewards from graded samples: the task's partial-credit score, shaping terms kept apart, and
the sample's status (the pipeline's :class:`~verify_cli.sampling.status.SampleStatus`, written to
shards in their spelling: ``ok``, ``wrong``, ``timeout``, ``parse_error``, ``sandbox_error``).

The rule of DESIGN.md holds here: a sandbox or infrastructure failure is never a score. Such a
sample gets status ``sandbox_error``, no reward and ``masked=True`` (after the pipeline's
retries), so a trainer leaves it out rather than learning from a 0 it did not earn.
"""

from __future__ import annotations

from dataclasses import dataclass

from verify_cli.sampling.status import SampleStatus
from verify_cli.sampling.step import GradedSample


@dataclass(frozen=True)
class RewardConfig:
    """Shaping. Penalties are magnitudes (>= 0) subtracted from the score."""

    format_penalty: float = 0.0
    length_penalty: float = 0.0
    #: Response length (model tokens, all turns) from which the length penalty ramps up linearly,
    #: reaching ``length_penalty`` at ``max_tokens``. None: no soft zone, only truncation counts.
    soft_length: int | None = None


@dataclass(frozen=True)
class Reward:
    status: SampleStatus
    total: float | None
    score: float | None
    format_penalty: float
    length_penalty: float
    tests_passed: int
    tests_total: int
    problems: tuple[str, ...] = ()
    #: The identity of the task's built environment the grade ran in ("" for none).
    environment: str = ""

    @property
    def masked(self) -> bool:
        return self.status.masked

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


def reward_of(sample: GradedSample, *, response_tokens: int, max_tokens: int, truncated: bool,
              config: RewardConfig) -> Reward:
    """The reward of one graded sample."""
    if sample.status is SampleStatus.PROMPT_TOO_LONG:  # never generated: masked, no reward
        return Reward(SampleStatus.PROMPT_TOO_LONG, None, None, 0.0, 0.0, 0, 0, sample.problems)
    lp = length_penalty(response_tokens, max_tokens, truncated, config)
    if sample.status is SampleStatus.PARSE_ERROR or sample.grade is None:
        fp = -config.format_penalty
        return Reward(SampleStatus.PARSE_ERROR, 0.0 + fp + lp, 0.0, fp, lp, 0, 0,
                      sample.problems or ("no completion to grade",))
    grade = sample.grade
    if sample.status is SampleStatus.INFRA_ERROR or grade.score is None:
        return Reward(SampleStatus.INFRA_ERROR, None, None, 0.0, 0.0, 0, 0, grade.problems, grade.environment)
    passed = sum(t.outcome.ok for t in grade.tests)
    return Reward(sample.status, grade.score + lp, grade.score, 0.0, lp, passed, len(grade.tests), grade.problems,
                  grade.environment)
