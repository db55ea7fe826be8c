"""Scores under the task's policy. Anything not passed (failed, error, skipped, missing) earns 0."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence

from verify_cli.grading.junit import TestOutcome
from verify_cli.tasks.model import Scoring, ScoringPolicy


def test_weight(scoring: Scoring, test_id: str) -> float:
    """The weight of ``test_id``: an exact key first, else the first matching fnmatch pattern
    (``*`` matches across dots and ``::``), else the default weight."""
    if test_id in scoring.weights:
        return float(scoring.weights[test_id])
    base = test_id.split(" #", 1)[0]
    for pattern, weight in scoring.weights.items():
        if fnmatch.fnmatchcase(base, pattern):
            return float(weight)
    return scoring.default_weight


def score(scoring: Scoring, tests: Sequence[TestOutcome]) -> float:
    """A score in [0, 1]. No tests at all scores 0: an empty run proves nothing."""
    if not tests:
        return 0.0
    if scoring.policy is ScoringPolicy.ALL_OR_NOTHING:
        return 1.0 if all(t.outcome.ok for t in tests) else 0.0
    if scoring.policy is ScoringPolicy.FRACTION:
        return sum(t.outcome.ok for t in tests) / len(tests)
    weights = [test_weight(scoring, t.id) for t in tests]
    total = sum(weights)
    if total <= 0:
        return 0.0
    return sum(w for w, t in zip(weights, tests, strict=True) if t.outcome.ok) / total
