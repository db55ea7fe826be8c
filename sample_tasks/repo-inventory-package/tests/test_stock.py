import pytest

from inventory import OutOfStock, Stock, UnknownItem


def stocked(**levels: int) -> Stock:
    stock = Stock()
    for sku, quantity in levels.items():
        stock.receive(sku, quantity)
    return stock


def test_receive_adds_to_on_hand():
    stock = stocked(apple=5)
    stock.receive("apple", 3)
    assert stock.on_hand("apple") == 8
    assert stock.reserved("apple") == 0


def test_unknown_sku_is_an_error():
    with pytest.raises(UnknownItem):
        Stock().available("pear")


def test_reserve_within_free_stock():
    stock = stocked(apple=5)
    stock.reserve("apple", 5)
    assert stock.reserved("apple") == 5


def test_available_excludes_reservations():
    stock = stocked(apple=10)
    stock.reserve("apple", 4)
    assert stock.available("apple") == 6


def test_reservations_cannot_exceed_free_stock():
    stock = stocked(apple=10)
    stock.reserve("apple", 7)
    with pytest.raises(OutOfStock):
        stock.reserve("apple", 4)
    assert stock.reserved("apple") == 7


def test_release_and_ship():
    stock = stocked(apple=10)
    stock.reserve("apple", 6)
    stock.release("apple", 2)
    stock.ship("apple", 4)
    assert (stock.on_hand("apple"), stock.reserved("apple")) == (6, 0)


def test_release_more_than_reserved_is_refused():
    stock = stocked(apple=3)
    stock.reserve("apple", 1)
    with pytest.raises(ValueError):
        stock.release("apple", 2)
