"""A plain-text stock report."""

from __future__ import annotations

from collections.abc import Iterable

from inventory.stock import Stock


def stock_report(stock: Stock, skus: Iterable[str]) -> str:
    """One line per SKU, sorted: ``SKU on-hand reserved available``."""
    rows = [f"{sku} {stock.on_hand(sku)} {stock.reserved(sku)} {stock.available(sku)}" for sku in sorted(skus)]
    return "\n".join(rows)
