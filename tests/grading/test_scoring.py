"""Scoring policies: all-or-nothing, fraction, weighted; anything not passed earns nothing."""

from __future__ import annotations

import pytest

from verify_cli.grading.junit import Outcome, TestOutcome
from verify_cli.grading.scoring import TestLists, score
from verify_cli.grading.scoring import test_weight as weight_of
from verify_cli.tasks.model import Scoring, ScoringPolicy

ALL_OR_NOTHING = Scoring(ScoringPolicy.ALL_OR_NOTHING)
FRACTION = Scoring(ScoringPolicy.FRACTION)


def outcomes(**by_id: Outcome) -> list[TestOutcome]:
    return [TestOutcome(tid.replace("__", "::"), o) for tid, o in by_id.items()]


P, F = Outcome.PASSED, Outcome.FAILED


def test_all_or_nothing() -> None:
    assert score(ALL_OR_NOTHING, outcomes(a=P, b=P)) == 1.0
    assert score(ALL_OR_NOTHING, outcomes(a=P, b=F)) == 0.0


def test_fraction() -> None:
    assert score(FRACTION, outcomes(a=P, b=F, c=P, d=F)) == 0.5
    assert score(FRACTION, outcomes(a=P, b=P, c=P)) == 1.0


@pytest.mark.parametrize(
    "not_passed", [Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED, Outcome.MISSING]
)
@pytest.mark.parametrize("policy", list(ScoringPolicy))
def test_anything_not_passed_counts_as_not_passed(
    policy: ScoringPolicy, not_passed: Outcome
) -> None:
    scoring = Scoring(policy, weights={"nothing::matches": 1.0})
    tests = outcomes(a=P, b=not_passed)
    lists = TestLists(fail_to_pass=("a", "b"), pass_to_pass=())
    expected = {
        ScoringPolicy.ALL_OR_NOTHING: 0.0,
        ScoringPolicy.FRACTION: 0.5,
        ScoringPolicy.WEIGHTED: 0.5,
        ScoringPolicy.SWEBENCH: 0.0,
        ScoringPolicy.FAIL_TO_PASS_FRACTION: 0.5,
    }[policy]
    assert score(scoring, tests, lists) == expected
    assert score(scoring, outcomes(b=not_passed), lists) == 0.0


@pytest.mark.parametrize("policy", list(ScoringPolicy))
def test_no_tests_scores_zero(policy: ScoringPolicy) -> None:
    assert score(Scoring(policy, weights={"x": 1.0}), []) == 0.0


def test_weighted_exact_keys() -> None:
    scoring = Scoring(ScoringPolicy.WEIGHTED, weights={"tests.t::big": 3.0})
    tests = [TestOutcome("tests.t::big", P), TestOutcome("tests.t::small", F)]
    assert weight_of(scoring, "tests.t::big") == 3.0
    assert weight_of(scoring, "tests.t::small") == 1.0
    assert score(scoring, tests) == pytest.approx(3 / 4)


def test_weighted_fnmatch_patterns_cross_dots_and_colons() -> None:
    scoring = Scoring(ScoringPolicy.WEIGHTED, weights={"hidden_tests.*": 3.0}, default_weight=1.0)
    tests = [
        TestOutcome("hidden_tests.test_edge::test_big", P),
        TestOutcome("hidden_tests.test_edge::test_neg", F),
        TestOutcome("tests.test_basic::test_one", P),
    ]
    assert weight_of(scoring, "hidden_tests.test_edge::test_big") == 3.0
    assert score(scoring, tests) == pytest.approx(4 / 7)


def test_exact_key_wins_over_pattern() -> None:
    scoring = Scoring(ScoringPolicy.WEIGHTED, weights={"t::*": 2.0, "t::special": 5.0})
    assert weight_of(scoring, "t::special") == 5.0
    assert weight_of(scoring, "t::other") == 2.0


def test_first_matching_pattern_wins() -> None:
    scoring = Scoring(ScoringPolicy.WEIGHTED, weights={"t::a*": 4.0, "t::*": 2.0})
    assert weight_of(scoring, "t::abc") == 4.0
    assert weight_of(scoring, "t::xyz") == 2.0


def test_duplicate_suffix_keeps_pattern_weight() -> None:
    scoring = Scoring(ScoringPolicy.WEIGHTED, weights={"t::case": 2.0, "u::*x": 3.0})
    assert weight_of(scoring, "t::case #2") == 2.0
    assert weight_of(scoring, "u::ax #2") == 3.0


def test_default_weight_applies_to_unmatched() -> None:
    scoring = Scoring(ScoringPolicy.WEIGHTED, weights={"a": 1.0}, default_weight=0.0)
    assert score(scoring, outcomes(a=F, b=P)) == 0.0
    assert score(scoring, outcomes(a=P, b=F)) == 1.0


def test_all_zero_weights_score_zero() -> None:
    scoring = Scoring(ScoringPolicy.WEIGHTED, weights={"x": 1.0}, default_weight=0.0)
    assert score(scoring, outcomes(a=P, b=P)) == 0.0


LISTS = TestLists(fail_to_pass=("t::f1", "t::f2"), pass_to_pass=("t::p1",))


def test_swebench_counts_only_the_listed_tests() -> None:
    swebench = Scoring(ScoringPolicy.SWEBENCH)
    listed_pass = [TestOutcome("t::f1", P), TestOutcome("t::f2", P), TestOutcome("t::p1", P)]
    assert score(swebench, [*listed_pass, TestOutcome("t::other", F)], LISTS) == 1.0
    assert score(swebench, [TestOutcome("t::f1", P), TestOutcome("t::p1", P)], LISTS) == 0.0  # f2 absent
    assert score(swebench, [*listed_pass[:2], TestOutcome("t::p1", F)], LISTS) == 0.0


def test_fail_to_pass_fraction_is_gated_by_pass_to_pass() -> None:
    partial = Scoring(ScoringPolicy.FAIL_TO_PASS_FRACTION)
    assert score(partial, [TestOutcome("t::f1", P), TestOutcome("t::f2", F), TestOutcome("t::p1", P)],
                 LISTS) == 0.5
    assert score(partial, [TestOutcome("t::f1", P), TestOutcome("t::f2", P), TestOutcome("t::p1", F)],
                 LISTS) == 0.0
    assert score(partial, [TestOutcome("t::f1", P)], None) == 0.0  # no lists: nothing to count
