"""The price of an order: each line at its unit price less its bulk discount, then tax."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from decimal import Decimal

from inventory.errors import UnknownItem
from inventory.models import Item, Line
from inventory.pricing.discounts import bulk_rate
from inventory.pricing.tax import to_cents, with_tax


def line_total(item: Item, line: Line) -> Decimal:
    gross = item.unit_price * line.quantity
    return to_cents(gross * (1 - bulk_rate(line.quantity)))


def quote(lines: Iterable[Line], catalog: Mapping[str, Item], tax_rate: Decimal = Decimal("0")) -> Decimal:
    """The total of ``lines`` priced from ``catalog``, tax included."""
    net = Decimal("0")
    for line in lines:
        if line.sku not in catalog:
            raise UnknownItem(line.sku)
        net += line_total(catalog[line.sku], line)
    return with_tax(net, tax_rate)
