"""Statistics of a task's samples: Wilson intervals, the unbiased pass@k estimator, partial
credit, status counts, and the visible-versus-all-tests gap.

Infrastructure errors are never samples: they are counted apart and excluded from ``n``. The
statuses are the pipeline's (:class:`verify_cli.sampling.status.SampleStatus`, re-exported here).
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from statistics import NormalDist

from verify_cli.sampling.status import SampleStatus


def z_value(confidence: float) -> float:
    """The two-sided normal quantile for ``confidence`` (1.959963... for 0.95)."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence}")
    return NormalDist().inv_cdf(0.5 + confidence / 2)


def wilson_interval(correct: int, n: int, confidence: float = 0.95) -> tuple[float, float]:
    """The Wilson score interval of a binomial proportion; (0, 1) when ``n`` is 0."""
    if n == 0:
        return 0.0, 1.0
    if not 0 <= correct <= n:
        raise ValueError(f"correct must be in 0..{n}, got {correct}")
    z = z_value(confidence)
    p = correct / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    # At the extremes the exact bound is 0 (or 1); rounding must not push it past.
    low = 0.0 if correct == 0 else max(0.0, centre - half)
    high = 1.0 if correct == n else min(1.0, centre + half)
    return low, high


def pass_at_k(n: int, correct: int, k: int) -> float | None:
    """The unbiased estimator of pass@k of Chen et al. (2021): 1 - C(n-c, k) / C(n, k),
    computed as a stable product. None when fewer than ``k`` samples were drawn."""
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if n < k:
        return None
    if n - correct < k:
        return 1.0
    return 1.0 - math.prod(1.0 - k / i for i in range(n - correct + 1, n + 1))


@dataclass(frozen=True)
class SampleOutcome:
    """What the statistics need of one graded sample."""

    status: SampleStatus
    score: float = 0.0
    #: All visible tests passed (None: the task's results do not say which tests are visible).
    visible_passed: bool | None = None


@dataclass(frozen=True)
class TaskStats:
    n: int
    correct: int
    pass_rate: float | None
    wilson_low: float
    wilson_high: float
    mean_score: float | None
    pass_at: dict[int, float | None] = field(default_factory=dict)
    status_counts: dict[str, int] = field(default_factory=dict)
    #: Pass rate on the visible tests alone (None when not known for every sample).
    visible_pass_rate: float | None = None
    #: Samples that passed every visible test and failed a hidden one: a curation finding.
    visible_pass_hidden_fail: int = 0


def task_stats(outcomes: Iterable[SampleOutcome], *, ks: Sequence[int] = (1,),
               confidence: float = 0.95) -> TaskStats:
    """Statistics over one task's samples (infra errors are counted, never sampled)."""
    all_outcomes = list(outcomes)
    counted = [o for o in all_outcomes if o.status.counts]
    n = len(counted)
    correct = sum(o.status is SampleStatus.PASSED for o in counted)
    low, high = wilson_interval(correct, n, confidence)
    counts = Counter(o.status.value for o in all_outcomes)
    visible = [o.visible_passed for o in counted]
    known = n > 0 and all(v is not None for v in visible)
    return TaskStats(
        n=n, correct=correct, pass_rate=correct / n if n else None, wilson_low=low, wilson_high=high,
        mean_score=sum(o.score for o in counted) / n if n else None,
        pass_at={k: pass_at_k(n, correct, k) for k in ks},
        status_counts={s.value: counts.get(s.value, 0) for s in SampleStatus},
        visible_pass_rate=sum(bool(v) for v in visible) / n if known else None,
        visible_pass_hidden_fail=sum(bool(o.visible_passed) and o.status is not SampleStatus.PASSED
                                     for o in counted),
    )
