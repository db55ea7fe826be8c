"""Cleaning and aggregation steps."""

from orders_etl.transform.aggregate import aggregate
from orders_etl.transform.clean import Order, clean_orders

__all__ = ["Order", "aggregate", "clean_orders"]
