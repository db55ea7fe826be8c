"""Group-relative advantages (GRPO): each sample's reward against its group's mean.

Masked samples (sandbox errors) take no part: they get no advantage and do not move the mean.
A group whose unmasked rewards are all equal carries no learning signal: its advantages are 0
and it is reported (and, with dynamic sampling, replaced by a fresh task).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class GroupAdvantages:
    advantages: tuple[float | None, ...]
    mean: float | None
    std: float | None  # Bessel-corrected; None below two unmasked samples
    valid: int  # unmasked samples
    all_equal: bool  # no learning signal (includes fewer than two unmasked samples)


def group_advantages(rewards: Sequence[float | None], *, normalize_std: bool = True,
                     eps: float = 1e-6) -> GroupAdvantages:
    """``A_i = r_i - mean`` (divided by ``std + eps`` when ``normalize_std``); None where r_i is None."""
    vals = [r for r in rewards if r is not None]
    if not vals:
        return GroupAdvantages(tuple(None for _ in rewards), None, None, 0, True)
    mean = math.fsum(vals) / len(vals)
    std = math.sqrt(math.fsum((v - mean) ** 2 for v in vals) / (len(vals) - 1)) if len(vals) > 1 else None
    all_equal = len(vals) < 2 or max(vals) - min(vals) <= 1e-12
    out: list[float | None] = []
    for r in rewards:
        if r is None:
            out.append(None)
        elif all_equal:
            out.append(0.0)
        else:
            a = r - mean
            out.append(a / ((std or 0.0) + eps) if normalize_std else a)
    return GroupAdvantages(tuple(out), mean, std, len(vals), all_equal)
