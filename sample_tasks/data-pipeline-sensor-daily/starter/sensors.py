"""Per-sensor daily statistics. See prompt.md for the specification."""

import csv
import sys
from collections import defaultdict


def read_rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def clean(rows):
    readings = []
    for row in rows:
        value = float(row["value"] or 0)
        readings.append((row["sensor_id"], row["timestamp"], value))
    return readings


def aggregate(readings):
    days = defaultdict(list)
    for sensor, timestamp, value in readings:
        days[(sensor, timestamp[:10])].append(value)
    stats = {}
    for key, values in days.items():
        stats[key] = (len(values), min(values), max(values), sum(values) / len(values))
    return stats


def write_stats(stats, path):
    with open(path, "w") as f:
        f.write("sensor_id,date,count,min,max,mean\n")
        for (sensor, day), (count, lo, hi, mean) in stats.items():
            f.write(f"{sensor},{day},{count},{lo:.2f},{hi:.2f},{mean:.2f}\n")


def summarise(in_path, out_path):
    write_stats(aggregate(clean(read_rows(in_path))), out_path)


if __name__ == "__main__":
    summarise(sys.argv[1], sys.argv[2])
