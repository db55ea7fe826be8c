"""Bulk discounts by quantity per line."""

from __future__ import annotations

from decimal import Decimal

#: (minimum quantity, discount rate), highest threshold first.
TIERS: tuple[tuple[int, Decimal], ...] = ((50, Decimal("0.15")), (10, Decimal("0.10")))


def bulk_rate(quantity: int) -> Decimal:
    """The discount rate of a line of ``quantity`` units: 10% from 10 units, 15% from 50."""
    for minimum, rate in TIERS:
        if quantity > minimum:
            return rate
    return Decimal("0")
