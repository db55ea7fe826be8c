"""Help texts in click's conventions: ``PATH`` for a required argument, ``[PATH]`` for an optional
one, ``TEXT``/``INTEGER``/``PATH`` for an option's value and nothing for a flag.

Typer 0.29 renders ``{path}``, ``<str>``, ``<bool>`` and ``<list[str]>`` instead and has no setting
to change it, so this module replaces the three display methods of its parameter classes (kept
here, in one place, because they are typer internals: pyproject bounds typer's version).
"""

from __future__ import annotations

import re
from typing import Any

from typer import core

_NAMES = {"str": "TEXT", "int": "INTEGER", "float": "FLOAT", "bool": "BOOLEAN", "path": "PATH",
          "file": "FILE", "directory": "DIRECTORY", "int range": "INTEGER RANGE",
          "float range": "FLOAT RANGE", "datetime": "DATETIME"}
_LIST = re.compile(r"^list\[(.*)\]$")


def _click_type(label: str | None) -> str | None:
    """``<list[str]>`` → ``TEXT``, ``<int range>`` → ``INTEGER RANGE``, ``<a|b>`` → ``[a|b]``."""
    if label is None:
        return None
    inner = label[1:-1] if label.startswith("<") and label.endswith(">") else label
    inner = _LIST.sub(r"\1", inner)
    if inner in _NAMES:
        return _NAMES[inner]
    if "|" in inner:
        return f"[{inner}]"
    return inner.upper()


_argument_type = getattr(core.TyperArgument, "display_type_rich", None)
_option_type = getattr(core.TyperOption, "display_type_rich", None)


def _argument_display_type(self: core.TyperArgument, ctx: Any) -> str | None:
    return _click_type(_argument_type(self, ctx)) if _argument_type else None


def _option_display_type(self: core.TyperOption, ctx: Any) -> str | None:
    if self.metavar is not None:
        return self.metavar
    if self.is_flag or self.count:
        return None
    shown = _click_type(_option_type(self, ctx)) if _option_type else None
    return shown[:-3] if shown and shown.endswith("...") else shown


def _argument_usage_name(self: core.TyperArgument) -> str:
    name = self.metavar if self.metavar is not None else (self.name or "").upper()
    if not self.required and not name.startswith("["):
        name = f"[{name}]"
    return name + ("..." if self.nargs != 1 else "")


def _argument_rich_name(self: core.TyperArgument) -> str:
    name = self.metavar if self.metavar is not None else (self.name or "").upper()
    return name.strip("[]") + ("..." if self.metavar is None and self.nargs != 1 else "")


def install() -> None:
    """Switch typer's help rendering to click's conventions (idempotent; a no-op on a typer
    without these methods, whose help is then typer's own)."""
    if _argument_type is None or _option_type is None:
        return
    core.TyperArgument.display_type_rich = _argument_display_type  # type: ignore[method-assign,assignment]
    core.TyperOption.display_type_rich = _option_display_type  # type: ignore[method-assign]
    core.TyperArgument._usage_display_name = _argument_usage_name  # type: ignore[method-assign]
    core.TyperArgument._rich_display_name = _argument_rich_name  # type: ignore[method-assign]
