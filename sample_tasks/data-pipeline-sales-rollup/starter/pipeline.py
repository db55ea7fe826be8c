"""Monthly sales roll-up per region. See prompt.md for the specification."""

import csv
import sys


def rollup(in_path, out_path):
    with open(in_path, newline="") as f:
        reader = csv.DictReader(f)
        next(reader)  # skip the header
        groups = {}
        for row in reader:
            region = row["region"].strip()
            month = row["date"][:7]
            try:
                qty = int(row["quantity"])
                price = float(row["unit_price"])
            except ValueError:
                continue
            g = groups.setdefault((region, month), {"orders": 0, "units": 0, "revenue": 0.0})
            g["orders"] += 1
            g["units"] += qty
            g["revenue"] += qty * price

    rows = sorted(groups.items(), key=lambda kv: kv[1]["revenue"], reverse=True)
    with open(out_path, "w") as f:
        f.write("region,month,orders,units,revenue\n")
        for (region, month), g in rows:
            f.write(f"{region},{month},{g['orders']},{g['units']},{round(g['revenue'], 2)}\n")


if __name__ == "__main__":
    rollup(sys.argv[1], sys.argv[2])
