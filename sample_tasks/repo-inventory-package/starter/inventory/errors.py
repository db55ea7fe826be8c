"""The package's errors."""


class InventoryError(Exception):
    """Base of every inventory error."""


class UnknownItem(InventoryError):
    """A SKU the catalog or the stock does not know."""


class OutOfStock(InventoryError):
    """A reservation asked for more units than are free."""
