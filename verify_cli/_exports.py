"""Lazy public names of a package (PEP 562): ``from verify_cli.rollout import Trainer`` imports
the defining module on first use, so importing the package stays cheap and free of cycles."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from typing import Any


def lazy_attribute(package: str, table: Mapping[str, str], name: str) -> Any:
    """``name`` from the module ``table`` says defines it (cached in ``package``), or
    AttributeError as for any missing attribute."""
    module = table.get(name)
    if module is None:
        raise AttributeError(f"module {package!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    setattr(sys.modules[package], name, value)
    return value


__all__ = ["lazy_attribute"]
