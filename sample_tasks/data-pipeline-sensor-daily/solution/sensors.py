"""Per-sensor daily statistics. See prompt.md for the specification."""

import csv
import math
import sys
from collections import defaultdict
from datetime import datetime, timezone


def read_rows(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def _value(text):
    """The reading as a float, or None for a gap."""
    try:
        value = float((text or "").strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def clean(rows):
    """[(sensor, utc_datetime, value)] with duplicates resolved (last wins) and gaps dropped."""
    latest = {}
    for row in rows:
        instant = datetime.fromisoformat(row["timestamp"].strip()).astimezone(timezone.utc)
        key = (row["sensor_id"], instant)
        latest.pop(key, None)  # keep file order of the last occurrence
        latest[key] = _value(row["value"])
    return [(sensor, instant, value) for (sensor, instant), value in latest.items() if value is not None]


def aggregate(readings):
    days = defaultdict(list)
    for sensor, instant, value in readings:
        days[(sensor, instant.date().isoformat())].append(value)
    return {key: (len(v), min(v), max(v), sum(v) / len(v)) for key, v in days.items()}


def write_stats(stats, path):
    with open(path, "w", newline="", encoding="utf-8") as f:
        f.write("sensor_id,date,count,min,max,mean\n")
        for (sensor, day), (count, lo, hi, mean) in sorted(stats.items()):
            f.write(f"{sensor},{day},{count},{lo:.2f},{hi:.2f},{mean:.2f}\n")


def summarise(in_path, out_path):
    write_stats(aggregate(clean(read_rows(in_path))), out_path)


if __name__ == "__main__":
    summarise(sys.argv[1], sys.argv[2])
