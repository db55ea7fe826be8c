"""What verify-cli offers callers, and lazy public names of a package (PEP 562):
``from verify_cli.rollout import Trainer`` imports the defining module on first use, so importing
the package stays cheap and free of cycles.

The rule (the package docstring of :mod:`verify_cli` states it for users; tests pin it):

- public: the names in ``verify_cli.__all__``, and the names in the ``__all__`` of each package
  in :data:`PUBLIC_PACKAGES` (``from verify_cli.sandbox import create_sandbox``);
- private: every other module (``verify_cli.sandbox.bwrap.sandbox``, ``verify_cli.checks.mutation``,
  any module or name whose name starts with ``_``), and the whole of each package in
  :data:`INTERNAL_PACKAGES`, whatever it lists.
"""

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


#: The subpackages whose ``__all__`` is public API (each a layer a library user may call).
PUBLIC_PACKAGES: tuple[str, ...] = (
    "verify_cli.tasks", "verify_cli.sandbox", "verify_cli.grading", "verify_cli.checks",
    "verify_cli.models", "verify_cli.executors", "verify_cli.sampling", "verify_cli.rollout",
    "verify_cli.difficulty", "verify_cli.importers", "verify_cli.exporters", "verify_cli.service",
    "verify_cli.client", "verify_cli.adapters", "verify_cli.agents", "verify_cli.kinds", "verify_cli.environments",
)

#: The subpackages that are no library API at all: the command line (its output is the API),
#: the files shipped into sandboxes, the report writers behind the commands.
INTERNAL_PACKAGES: tuple[str, ...] = ("verify_cli.cli", "verify_cli.formats", "verify_cli.harness", "verify_cli.report")

__all__ = ["INTERNAL_PACKAGES", "PUBLIC_PACKAGES", "lazy_attribute"]
