"""How much of a run was masked as ``infra_error``, and why: the share trainers must see.

An ``infra_error`` sample is never scored (masked); a masked share that moves with the policy
is itself a signal (an agent that found a way to make its episode unscored, a host running out
of something). :func:`infra_report` counts them by cause over any run's samples, so that the
summaries of ``difficulty`` and ``train`` show the rate of each, and :data:`WARN_RATE` is the
share past which ``train`` warns.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

#: Past this share of samples masked as infra_error, train warns on stderr.
WARN_RATE = 0.01
_CAUSE_CHARS = 120
_VOLATILE = re.compile(r"0x[0-9a-f]+|\b[0-9a-f]{12,}\b|\d+")


def infra_cause(problems: Sequence[str]) -> str:
    """The cause of one infra_error: the two leading clauses of its first problem (split at
    ``": "``), numbers and ids blanked so that like causes count together; ``unknown`` when
    it says nothing."""
    text = next((p.strip() for p in problems if p and p.strip()), "")
    if not text:
        return "unknown"
    head = ": ".join(text.split(": ", 2)[:2]).strip().rstrip(".")
    return _VOLATILE.sub("N", head)[:_CAUSE_CHARS] or "unknown"


@dataclass
class InfraReport:
    """Samples seen, how many were infra_error, and their causes (by :func:`infra_cause`)."""

    samples: int = 0
    infra_errors: int = 0
    causes: Counter[str] = field(default_factory=Counter)

    @property
    def rate(self) -> float:
        return self.infra_errors / self.samples if self.samples else 0.0

    @property
    def alarming(self) -> bool:
        """More than :data:`WARN_RATE` of the samples were masked."""
        return self.rate > WARN_RATE

    def to_dict(self) -> dict[str, Any]:
        return {"samples": self.samples, "infra_errors": self.infra_errors, "rate": round(self.rate, 6),
                "causes": {cause: {"count": n, "rate": round(n / self.samples, 6) if self.samples else 0.0}
                           for cause, n in self.causes.most_common()}}

    def describe(self) -> str:
        """One line: the rate, then each cause with its count."""
        causes = "; ".join(f"{cause} ({n})" for cause, n in self.causes.most_common(5))
        return (f"{self.infra_errors} of {self.samples} samples ({100 * self.rate:.1f}%) were infra_error, "
                f"never scored" + (f": {causes}" if causes else ""))


def infra_report(samples: Iterable[tuple[bool, Sequence[str]]]) -> InfraReport:
    """The report over ``(is_infra_error, problems)`` of each sample."""
    report = InfraReport()
    for infra, problems in samples:
        report.samples += 1
        if infra:
            report.infra_errors += 1
            report.causes[infra_cause(problems)] += 1
    return report


__all__ = ["WARN_RATE", "InfraReport", "infra_cause", "infra_report"]
