"""Turn raw rows into typed orders in one currency; drop what is not an order."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation


@dataclass(frozen=True)
class Order:
    order_id: str
    customer: str
    placed_at: datetime  # timezone-aware
    amount: Decimal  # in the target currency, to the cent


def clean_orders(rows: Iterable[Mapping[str, str]], currency: str, rates: Mapping[str, str],
                 drop_cancelled: bool = True) -> tuple[list[Order], list[str]]:
    """(orders, rejected order ids): amounts converted with ``rates`` (units of ``currency``
    per unit of the row's currency), duplicates of an order id keep the first row."""
    orders: list[Order] = []
    rejected: list[str] = []
    seen: set[str] = set()
    target = Decimal(rates[currency])
    for row in rows:
        oid = row["order_id"].strip()
        if drop_cancelled and row["status"].strip().lower() == "cancelled":
            continue
        try:
            rate = Decimal(rates[row["currency"].strip().upper()]) / target
            amount = (Decimal(row["amount"]) * rate).quantize(Decimal("0.01"), rounding=ROUND_HALF_UP)
            placed = datetime.fromisoformat(row["placed_at"].strip())
        except (KeyError, InvalidOperation, ValueError):
            rejected.append(oid)
            continue
        if placed.tzinfo is None:
            rejected.append(oid)
            continue
        if oid in seen:
            continue
        seen.add(oid)
        orders.append(Order(oid, row["customer"].strip(), placed, amount))
    return orders, rejected
