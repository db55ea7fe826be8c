"""GRPO advantages on groups computed by hand."""

from __future__ import annotations

import math

import pytest

from verify_cli.rollout.advantages import group_advantages


def test_mean_centred_and_std_normalised() -> None:
    g = group_advantages([1.0, 0.0, 0.0, 0.0])
    # mean 0.25; sample std = sqrt((0.75^2 + 3 * 0.25^2) / 3) = sqrt(0.25) = 0.5
    assert g.mean == pytest.approx(0.25)
    assert g.std == pytest.approx(0.5)
    assert g.advantages == pytest.approx((0.75 / (0.5 + 1e-6), -0.25 / (0.5 + 1e-6),
                                          -0.25 / (0.5 + 1e-6), -0.25 / (0.5 + 1e-6)))
    assert not g.all_equal


def test_without_std_normalisation_is_reward_minus_mean() -> None:
    g = group_advantages([0.5, 1.0, 0.0], normalize_std=False)
    assert g.advantages == pytest.approx((0.0, 0.5, -0.5))
    assert g.std == pytest.approx(0.5)


def test_masked_samples_take_no_part() -> None:
    g = group_advantages([1.0, None, 0.0, None], normalize_std=False)
    assert g.valid == 2 and g.mean == pytest.approx(0.5)
    assert g.advantages == (pytest.approx(0.5), None, pytest.approx(-0.5), None)
    assert g.std == pytest.approx(math.sqrt(0.5))


def test_all_equal_groups_carry_no_signal() -> None:
    for rewards in ([0.0, 0.0, 0.0], [1.0, 1.0], [0.3, None], [None, None]):
        g = group_advantages(rewards)
        assert g.all_equal
        assert all(a in (0.0, None) for a in g.advantages)
    assert group_advantages([None, None]).mean is None
