"""Task kinds: one module per way of grading a task (``pytest``, ``node``, ``calls``, ``stdio``,
``command``), registered by name. See docs/task-kinds.md.

A task names its kind in task.toml (``kind = "pytest"``); grading, warm runs, two-process runs
and audit ask the task's :class:`~verify_cli.kinds.base.Kind` (:func:`kind_of`) for everything
that depends on it, and never name a kind themselves.

This package's own import is light (the names only): :mod:`verify_cli.tasks` reads the names to
validate task.toml without importing grading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from verify_cli.kinds.names import BUILTIN_KINDS, KINDS, kind_names, register_kind

if TYPE_CHECKING:
    from verify_cli.kinds.base import Kind, kind_of


def __getattr__(name: str) -> Any:
    if name in ("Kind", "kind_of"):
        from verify_cli.kinds import base

        return getattr(base, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["BUILTIN_KINDS", "KINDS", "Kind", "kind_names", "kind_of", "register_kind"]
