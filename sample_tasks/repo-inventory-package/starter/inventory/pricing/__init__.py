"""Order quotes: unit prices, bulk discounts, tax."""

from inventory.pricing.quote import quote

__all__ = ["quote"]
