"""Difficulty buckets from pass rates, and when an adaptive run may stop sampling a task.

With thresholds (t1, t2): ``unsolved`` p = 0, ``hard`` 0 < p <= t1, ``medium`` t1 < p <= t2,
``easy`` t2 < p < 1, ``solved`` p = 1. A task check-tasks found defective is ``defective``,
never ``unsolved`` (its tests, not the model, decide its pass rate); a task whose prompt does not
fit the model's context is ``prompt_too_long`` (never sampled: the model cannot read it).
"""

from __future__ import annotations

from dataclasses import dataclass

from verify_cli.difficulty.stats import wilson_interval
from verify_cli.errors import UsageError

UNSOLVED, HARD, MEDIUM, EASY, SOLVED, DEFECTIVE, UNSAMPLED, PROMPT_TOO_LONG = (
    "unsolved", "hard", "medium", "easy", "solved", "defective", "unsampled", "prompt_too_long")
#: Every bucket, from hardest to easiest, then the three that say no pass rate was measured.
BUCKETS = (UNSOLVED, HARD, MEDIUM, EASY, SOLVED, DEFECTIVE, UNSAMPLED, PROMPT_TOO_LONG)


@dataclass(frozen=True)
class BucketScheme:
    """The pass-rate edges between hard and medium and between medium and easy."""

    hard_max: float = 0.3
    medium_max: float = 0.7

    def __post_init__(self) -> None:
        if not 0 < self.hard_max < self.medium_max < 1:
            raise UsageError(f"bucket thresholds must satisfy 0 < hard < medium < 1, got "
                             f"{self.hard_max}, {self.medium_max}", hint="e.g. --thresholds 0.3,0.7")

    @classmethod
    def parse(cls, text: str) -> BucketScheme:
        """``"0.3,0.7"`` -> BucketScheme(0.3, 0.7)."""
        try:
            hard, medium = (float(x) for x in text.split(","))
        except ValueError:
            raise UsageError(f"--thresholds {text!r}: give two pass rates, e.g. 0.3,0.7") from None
        return cls(hard, medium)

    def bucket(self, correct: int, n: int) -> str:
        if n == 0:
            return UNSAMPLED
        if correct == 0:
            return UNSOLVED
        if correct == n:
            return SOLVED
        p = correct / n
        if p <= self.hard_max:
            return HARD
        return MEDIUM if p <= self.medium_max else EASY

    def region(self, p: float) -> int:
        """0 for [0, hard], 1 for (hard, medium], 2 for (medium, 1]: the ranges an interval must
        fall in for a bucket to be decided (unsolved and solved are the ends of the outer two)."""
        return 0 if p <= self.hard_max else 1 if p <= self.medium_max else 2

    def decided(self, correct: int, n: int, *, confidence: float, looks: int) -> bool:
        """Whether sampling may stop: the Wilson interval at ``confidence``, split over the
        ``looks`` planned interim looks (Bonferroni), lies in one region."""
        if n == 0:
            return False
        alpha = (1 - confidence) / max(1, looks)
        low, high = wilson_interval(correct, n, 1 - alpha)
        return self.region(low) == self.region(high)
