from decimal import Decimal

import pytest

from inventory import Item, Line, UnknownItem
from inventory.pricing import quote
from inventory.pricing.discounts import bulk_rate
from inventory.pricing.tax import with_tax

CATALOG = {"bolt": Item("bolt", "Bolt M6", Decimal("0.40")), "nut": Item("nut", "Nut M6", Decimal("0.15"))}


@pytest.mark.parametrize("quantity, rate", [(1, "0"), (9, "0"), (11, "0.10"), (49, "0.10"), (51, "0.15")])
def test_bulk_rate_between_thresholds(quantity, rate):
    assert bulk_rate(quantity) == Decimal(rate)


@pytest.mark.parametrize("quantity, rate", [(10, "0.10"), (50, "0.15")])
def test_bulk_rate_at_threshold(quantity, rate):
    assert bulk_rate(quantity) == Decimal(rate)


def test_tax_rounds_half_up():
    assert with_tax(Decimal("0.125"), Decimal("0")) == Decimal("0.13")
    assert with_tax(Decimal("10.00"), Decimal("0.2")) == Decimal("12.00")


def test_negative_tax_rate_is_refused():
    with pytest.raises(ValueError):
        with_tax(Decimal("1"), Decimal("-0.1"))


def test_quote_small_order():
    assert quote([Line("bolt", 3), Line("nut", 2)], CATALOG) == Decimal("1.50")


def test_quote_ten_units_gets_the_bulk_discount():
    assert quote([Line("bolt", 10)], CATALOG, Decimal("0.2")) == Decimal("4.32")


def test_quote_unknown_sku():
    with pytest.raises(UnknownItem):
        quote([Line("washer", 1)], CATALOG)
