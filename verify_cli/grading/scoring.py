"""Scores under the task's policy. Anything not passed (failed, error, skipped, missing) earns 0."""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass

from verify_cli.grading.junit import TestOutcome, junit_id_of_node_id
from verify_cli.tasks.model import Scoring, ScoringPolicy, TestSpec


@dataclass(frozen=True)
class TestLists:
    """A task's FAIL_TO_PASS and PASS_TO_PASS tests, as the grader's (JUnit) ids."""

    __test__ = False

    fail_to_pass: tuple[str, ...]
    pass_to_pass: tuple[str, ...]

    @classmethod
    def of(cls, test: TestSpec) -> TestLists | None:
        """The lists of a task's ``[test]`` table, or None when it names none."""
        if not test.has_test_lists:
            return None
        return cls(tuple(junit_id_of_node_id(t) for t in test.fail_to_pass),
                   tuple(junit_id_of_node_id(t) for t in test.pass_to_pass))

    def outcomes(self, tests: Sequence[TestOutcome]) -> tuple[list[bool], list[bool]]:
        """Whether each FAIL_TO_PASS test passed and each PASS_TO_PASS test did not fail, as
        SWE-bench counts them (an XFAIL passes; a skipped PASS_TO_PASS test does not fail; one
        absent from the results fails)."""
        by_id = {t.id: t.outcome for t in tests}
        return ([t in by_id and by_id[t].listed_pass for t in self.fail_to_pass],
                [t in by_id and not by_id[t].listed_failure for t in self.pass_to_pass])

    def all_pass(self, tests: Sequence[TestOutcome]) -> bool:
        f2p, p2p = self.outcomes(tests)
        return all(f2p) and all(p2p)


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


def score(scoring: Scoring, tests: Sequence[TestOutcome], lists: TestLists | None = None) -> float:
    """A score in [0, 1]. No tests at all scores 0: an empty run proves nothing.

    The list policies (``swebench``, ``fail-to-pass-fraction``) count only the task's listed
    tests; a listed test absent from the results counts as failed.
    """
    if not tests:
        return 0.0
    if scoring.policy.uses_test_lists:
        if lists is None or not lists.fail_to_pass:
            return 0.0
        f2p, p2p = lists.outcomes(tests)
        if not all(p2p):
            return 0.0
        if scoring.policy is ScoringPolicy.SWEBENCH:
            return 1.0 if all(f2p) else 0.0
        return sum(f2p) / len(f2p)
    if scoring.policy is ScoringPolicy.ALL_OR_NOTHING:
        return 1.0 if all(t.outcome.ok for t in tests) else 0.0
    if scoring.policy is ScoringPolicy.FRACTION:
        return sum(t.outcome.ok for t in tests) / len(tests)
    weights = [test_weight(scoring, t.id) for t in tests]
    total = sum(weights)
    if total <= 0:
        return 0.0
    return sum(w for w, t in zip(weights, tests, strict=True) if t.outcome.ok) / total
