"""The pipeline's configuration: a TOML file layered over the defaults."""

from __future__ import annotations

import copy
import tomllib
from pathlib import Path
from typing import Any

DEFAULTS: dict[str, Any] = {
    "input": {"path": "orders.csv", "delimiter": ","},
    "clean": {"currency": "EUR", "drop_cancelled": True, "rates": {"EUR": "1", "USD": "0.9", "GBP": "1.15"}},
    "aggregate": {"by": "day", "timezone_offset_hours": 0},
    "output": {"path": "summary.json", "indent": 2},
}


class ConfigError(ValueError):
    """A configuration file that cannot be used; the message names the key."""


def merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    """``override`` layered over ``base``: a table in both is merged key by key, at any depth;
    any other value in ``override`` replaces the base's. Neither argument is changed."""
    out = copy.deepcopy(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_config(path: str | Path | None) -> dict[str, Any]:
    """The defaults, with the TOML file at ``path`` (if any) layered over them, validated."""
    data: dict[str, Any] = {}
    if path is not None:
        data = tomllib.loads(Path(path).read_text(encoding="utf-8"))
    unknown = sorted(set(data) - set(DEFAULTS))
    if unknown:
        raise ConfigError(f"unknown section [{unknown[0]}]")
    config = merge(DEFAULTS, data)
    if config["aggregate"]["by"] not in ("day", "customer"):
        raise ConfigError(f"aggregate.by must be 'day' or 'customer', not {config['aggregate']['by']!r}")
    if config["clean"]["currency"] not in config["clean"]["rates"]:
        raise ConfigError(f"clean.currency {config['clean']['currency']!r} has no rate in clean.rates")
    return config
