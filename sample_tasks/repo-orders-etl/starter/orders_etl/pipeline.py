"""Extract, transform, load, as the configuration says."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from orders_etl.config import load_config
from orders_etl.extract import read_orders
from orders_etl.load import write_summary
from orders_etl.transform import aggregate, clean_orders


def run_pipeline(config_path: str | Path | None, base_dir: str | Path = ".") -> dict[str, Any]:
    """Run the pipeline; relative paths of the configuration are read from ``base_dir``.
    Returns the summary it wrote ({"groups": ..., "rejected": [...], "currency": ...})."""
    config = load_config(config_path)
    base = Path(base_dir)
    rows = read_orders(base / config["input"]["path"], config["input"]["delimiter"])
    clean = config["clean"]
    orders, rejected = clean_orders(rows, clean["currency"], clean["rates"], clean["drop_cancelled"])
    agg = config["aggregate"]
    summary = {"currency": clean["currency"], "rejected": rejected,
               "groups": aggregate(orders, agg["by"], agg["timezone_offset_hours"])}
    write_summary(summary, base / config["output"]["path"], config["output"]["indent"])
    return summary
