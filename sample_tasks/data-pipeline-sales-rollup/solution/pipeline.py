"""Monthly sales roll-up per region. See prompt.md for the specification."""

import csv
import sys
from decimal import ROUND_HALF_UP, Decimal, InvalidOperation

CENT = Decimal("0.01")


def _parse_row(row):
    """(region, month, quantity, unit_price) or None for an invalid row."""
    try:
        qty = int(row["quantity"].strip())
        price = Decimal(row["unit_price"].strip())
    except (ValueError, InvalidOperation, AttributeError):
        return None
    if not price.is_finite():
        return None
    return row["region"].strip().lower(), row["date"].strip()[:7], qty, price


def rollup(in_path, out_path):
    groups = {}
    seen_orders = set()
    with open(in_path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            parsed = _parse_row(row)
            if parsed is None:
                continue
            order_id = row["order_id"].strip()
            if order_id in seen_orders:
                continue
            seen_orders.add(order_id)
            region, month, qty, price = parsed
            g = groups.setdefault((region, month), [0, 0, Decimal(0)])
            g[0] += 1
            g[1] += qty
            g[2] += qty * price

    with open(out_path, "w", newline="", encoding="utf-8") as f:
        f.write("region,month,orders,units,revenue\n")
        for (region, month), (orders, units, revenue) in sorted(groups.items()):
            rounded = revenue.quantize(CENT, rounding=ROUND_HALF_UP)
            f.write(f"{region},{month},{orders},{units},{rounded}\n")


if __name__ == "__main__":
    rollup(sys.argv[1], sys.argv[2])
