"""How likely a number of independent runs is to catch a flaky test: the promise behind the
default repeat counts of check-tasks and audit.

A test that fails a run with probability ``p`` shows up in ``n`` independent runs with probability
``1 - (1 - p)**n``. The defaults are the fewest runs that catch a test failing one run in four
with at least 95% probability: 11 runs, 95.8%.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

#: The promise: a test that fails one run in four (``FLAKE_RATE``) is caught with at
#: least ``TARGET_POWER`` probability at the default repeat count.
FLAKE_RATE = 0.25
TARGET_POWER = 0.95


def detection_power(repeats: int, flake_rate: float = FLAKE_RATE) -> float:
    """Probability that ``repeats`` independent runs see at least one failure of a test that fails
    a run with probability ``flake_rate``."""
    if repeats <= 0:
        return 0.0
    return 1.0 - (1.0 - flake_rate) ** repeats


def repeats_for_power(power: float = TARGET_POWER, flake_rate: float = FLAKE_RATE) -> int:
    """The fewest runs whose :func:`detection_power` reaches ``power``."""
    if not 0 < flake_rate < 1 or not 0 < power < 1:
        raise ValueError("flake_rate and power must lie strictly between 0 and 1")
    n = math.ceil(math.log1p(-power) / math.log1p(-flake_rate))
    while detection_power(n, flake_rate) < power:  # guard against rounding at the boundary
        n += 1
    return max(1, n)


#: The default repeats of check-tasks and reruns of audit.
DEFAULT_REPEATS = repeats_for_power()


@dataclass(frozen=True)
class FlakinessPower:
    """What ``repeats`` reference runs can promise about a flaky test."""

    repeats: int
    flake_rate: float = FLAKE_RATE
    target: float = TARGET_POWER

    @property
    def probability(self) -> float:
        return detection_power(self.repeats, self.flake_rate)

    @property
    def meets_target(self) -> bool:
        return self.probability >= self.target

    def describe(self) -> str:
        one_in = round(1 / self.flake_rate)
        return (f"{self.repeats} run(s) detect a 1-in-{one_in} flaky test with "
                f"{self.probability:.0%} probability")

    def to_dict(self) -> dict[str, Any]:
        return {"repeats": self.repeats, "flake_rate": self.flake_rate,
                "detection_probability": round(self.probability, 4), "target": self.target,
                "meets_target": self.meets_target}
