"""Read order rows from CSV."""

from __future__ import annotations

import csv
from pathlib import Path

FIELDS = ("order_id", "customer", "placed_at", "amount", "currency", "status")


def read_orders(path: str | Path, delimiter: str = ",") -> list[dict[str, str]]:
    """Every row of the CSV file as a dict of its header's fields (which must include FIELDS)."""
    with open(path, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh, delimiter=delimiter)
        missing = [f for f in FIELDS if f not in (reader.fieldnames or ())]
        if missing:
            raise ValueError(f"{path}: missing column(s) {', '.join(missing)}")
        return [dict(row) for row in reader]
