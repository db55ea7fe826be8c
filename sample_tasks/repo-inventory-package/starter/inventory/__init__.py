"""A small inventory and pricing package: stock levels, reservations and order quotes."""

from inventory.errors import InventoryError, OutOfStock, UnknownItem
from inventory.models import Item, Line
from inventory.stock import Stock

__all__ = ["InventoryError", "Item", "Line", "OutOfStock", "Stock", "UnknownItem"]
