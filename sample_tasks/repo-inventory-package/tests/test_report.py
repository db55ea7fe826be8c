from inventory import Stock
from inventory.report import stock_report


def test_report_is_sorted_by_sku():
    stock = Stock()
    stock.receive("b", 2)
    stock.receive("a", 1)
    assert stock_report(stock, ["b", "a"]).splitlines() == ["a 1 0 1", "b 2 0 2"]


def test_report_shows_reservations():
    stock = Stock()
    stock.receive("a", 5)
    stock.reserve("a", 2)
    assert stock_report(stock, ["a"]) == "a 5 2 3"
