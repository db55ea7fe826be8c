"""Exact statistics: Wilson intervals, the unbiased pass@k estimator, buckets and stopping."""

from __future__ import annotations

import math

import pytest

from verify_cli.difficulty.buckets import BucketScheme
from verify_cli.difficulty.stats import SampleOutcome, SampleStatus, pass_at_k, task_stats, wilson_interval, z_value
from verify_cli.errors import UsageError


def test_wilson_interval_known_values() -> None:
    assert z_value(0.95) == pytest.approx(1.959964, abs=1e-6)
    # Published four-decimal values (Newcombe 1998, table I style): 5/10 and 1/10.
    assert wilson_interval(5, 10) == pytest.approx((0.2366, 0.7634), abs=5e-5)
    assert wilson_interval(1, 10) == pytest.approx((0.0179, 0.4042), abs=5e-5)
    z2 = z_value(0.95) ** 2
    assert wilson_interval(0, 10) == (0.0, pytest.approx(z2 / (10 + z2)))
    assert wilson_interval(10, 10) == (pytest.approx(10 / (10 + z2)), 1.0)
    assert wilson_interval(0, 0) == (0.0, 1.0)


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)
    assert pass_at_k(10, 3, 5) == pytest.approx(1 - math.comb(7, 5) / math.comb(10, 5))
    assert pass_at_k(4, 0, 2) == 0.0
    assert pass_at_k(5, 4, 2) == 1.0  # fewer than k failures: every k-subset holds a pass
    assert pass_at_k(3, 1, 5) is None


def test_infra_errors_are_not_samples_and_partial_credit_is_averaged() -> None:
    outcomes = [SampleOutcome(SampleStatus.PASSED, 1.0, True), SampleOutcome(SampleStatus.FAILED, 0.5, True),
                SampleOutcome(SampleStatus.TIMEOUT, 0.0, False), SampleOutcome(SampleStatus.PARSE_ERROR, 0.0, False),
                SampleOutcome(SampleStatus.INFRA_ERROR, 0.0, None)]
    s = task_stats(outcomes, ks=(1, 2))
    assert (s.n, s.correct, s.pass_rate) == (4, 1, 0.25)
    assert s.mean_score == pytest.approx(1.5 / 4)
    assert s.pass_at == {1: pytest.approx(0.25), 2: pytest.approx(0.5)}
    assert s.status_counts == {"passed": 1, "failed": 1, "timeout": 1, "parse_error": 1, "infra_error": 1,
                               "prompt_too_long": 0}
    assert s.visible_pass_rate == 0.5
    assert s.visible_pass_hidden_fail == 1
    assert task_stats([SampleOutcome(SampleStatus.PASSED, 1.0, None)]).visible_pass_rate is None


def test_buckets_default_and_configured() -> None:
    scheme = BucketScheme()
    assert [scheme.bucket(c, 10) for c in (0, 1, 3, 4, 7, 8, 9, 10)] == [
        "unsolved", "hard", "hard", "medium", "medium", "easy", "easy", "solved"]
    assert scheme.bucket(0, 0) == "unsampled"
    assert BucketScheme.parse("0.2,0.5").bucket(3, 10) == "medium"
    with pytest.raises(UsageError):
        BucketScheme.parse("0.7,0.3")
    with pytest.raises(UsageError):
        BucketScheme.parse("half")


def test_adaptive_stopping_needs_an_interval_inside_one_region() -> None:
    scheme = BucketScheme()
    # Never solved: decided once the upper bound (Bonferroni over 4 looks) falls to 0.3.
    assert not scheme.decided(0, 4, confidence=0.95, looks=4)
    first = next(n for n in range(1, 100) if scheme.decided(0, n, confidence=0.95, looks=4))
    z2 = z_value(1 - 0.05 / 4) ** 2
    assert first == math.ceil(z2 / 0.3 - z2)  # z^2 / (n + z^2) <= 0.3
    assert scheme.decided(16, 16, confidence=0.95, looks=4)
    assert not scheme.decided(8, 16, confidence=0.95, looks=4)  # straddles medium and its neighbours
