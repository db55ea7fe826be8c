"""Stock levels per SKU: units on hand, units reserved for open orders."""

from __future__ import annotations

from inventory.errors import OutOfStock, UnknownItem


class Stock:
    def __init__(self) -> None:
        self._on_hand: dict[str, int] = {}
        self._reserved: dict[str, int] = {}

    def receive(self, sku: str, quantity: int) -> None:
        """Add ``quantity`` units of ``sku`` to the shelf."""
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        self._on_hand[sku] = self._on_hand.get(sku, 0) + quantity
        self._reserved.setdefault(sku, 0)

    def on_hand(self, sku: str) -> int:
        self._known(sku)
        return self._on_hand[sku]

    def reserved(self, sku: str) -> int:
        self._known(sku)
        return self._reserved[sku]

    def available(self, sku: str) -> int:
        """Units that can still be reserved."""
        self._known(sku)
        return self._on_hand[sku]

    def reserve(self, sku: str, quantity: int) -> None:
        """Hold ``quantity`` units for an order; OutOfStock when fewer are available."""
        if quantity <= 0:
            raise ValueError("quantity must be positive")
        if quantity > self.available(sku):
            raise OutOfStock(f"{sku}: {quantity} asked, {self.available(sku)} available")
        self._reserved[sku] += quantity

    def release(self, sku: str, quantity: int) -> None:
        """Give back ``quantity`` reserved units."""
        self._known(sku)
        if quantity > self._reserved[sku]:
            raise ValueError(f"{sku}: only {self._reserved[sku]} reserved")
        self._reserved[sku] -= quantity

    def ship(self, sku: str, quantity: int) -> None:
        """Ship reserved units: they leave the shelf and the reservation."""
        self.release(sku, quantity)
        self._on_hand[sku] -= quantity

    def _known(self, sku: str) -> None:
        if sku not in self._on_hand:
            raise UnknownItem(sku)
