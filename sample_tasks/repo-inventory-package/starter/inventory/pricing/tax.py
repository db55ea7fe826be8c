"""Sales tax, rounded half-up to the cent."""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def to_cents(amount: Decimal) -> Decimal:
    return amount.quantize(CENT, rounding=ROUND_HALF_UP)


def with_tax(net: Decimal, rate: Decimal) -> Decimal:
    """``net`` plus tax at ``rate`` (0.2 for 20%), rounded to the cent."""
    if rate < 0:
        raise ValueError("tax rate must not be negative")
    return to_cents(net * (1 + rate))
