from datetime import datetime
from decimal import Decimal

from orders_etl.transform import Order, aggregate, clean_orders

RATES = {"EUR": "1", "USD": "0.9", "GBP": "1.15"}


def row(oid, amount="10.00", currency="EUR", placed="2024-03-01T10:00:00+00:00", status="paid", customer="acme"):
    return {"order_id": oid, "customer": customer, "placed_at": placed, "amount": amount,
            "currency": currency, "status": status}


def test_amounts_are_converted_to_the_target_currency():
    orders, rejected = clean_orders([row("1", "10.00", "USD"), row("2", "2.30", "GBP")], "EUR", RATES)
    assert [o.amount for o in orders] == [Decimal("9.00"), Decimal("2.65")]
    assert rejected == []


def test_cancelled_and_invalid_rows():
    rows = [row("1", status="cancelled"), row("2", amount="ten"), row("3", currency="XYZ"),
            row("4", placed="2024-03-01T10:00:00"), row("5")]
    orders, rejected = clean_orders(rows, "EUR", RATES)
    assert [o.order_id for o in orders] == ["5"]
    assert rejected == ["2", "3", "4"]


def test_duplicate_order_ids_keep_the_first_row():
    orders, _ = clean_orders([row("1", "1.00"), row("1", "2.00")], "EUR", RATES)
    assert [o.amount for o in orders] == [Decimal("1.00")]


def order(oid, placed, amount="1.00", customer="acme"):
    return Order(oid, customer, datetime.fromisoformat(placed), Decimal(amount))


def test_aggregate_by_customer():
    groups = aggregate([order("1", "2024-03-01T10:00:00+00:00", "1.50", "b"),
                        order("2", "2024-03-01T11:00:00+00:00", "2.25", "a"),
                        order("3", "2024-03-02T11:00:00+00:00", "1.00", "b")], by="customer")
    assert groups == {"a": {"orders": "1", "total": "2.25"}, "b": {"orders": "2", "total": "2.50"}}


def test_aggregate_by_utc_day():
    groups = aggregate([order("1", "2024-03-01T23:30:00-02:00"), order("2", "2024-03-02T08:00:00+00:00")])
    assert groups == {"2024-03-02": {"orders": "2", "total": "2.00"}}


def test_aggregate_by_day_in_an_offset():
    groups = aggregate([order("1", "2024-03-01T23:30:00+00:00")], offset_hours=2)
    assert list(groups) == ["2024-03-02"]


def test_aggregate_of_nothing_is_empty():
    assert aggregate([]) == {}
