"""Sum orders per day (in a configured UTC offset) or per customer."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import timedelta, timezone
from decimal import Decimal

from orders_etl.transform.clean import Order


def group_key(order: Order, by: str, offset_hours: int) -> str:
    if by == "customer":
        return order.customer
    local = order.placed_at.astimezone(timezone(timedelta(hours=offset_hours)))
    return local.date().isoformat()


def aggregate(orders: Iterable[Order], by: str = "day", offset_hours: int = 0) -> dict[str, dict[str, str]]:
    """{key: {"orders": n, "total": "12.34"}} sorted by key (totals as strings: exact)."""
    totals: dict[str, tuple[int, Decimal]] = {}
    for order in orders:
        key = group_key(order, by, offset_hours)
        n, total = totals.get(key, (0, Decimal("0")))
        totals[key] = (n + 1, total + order.amount)
    return {key: {"orders": str(n), "total": str(total)} for key, (n, total) in sorted(totals.items())}
