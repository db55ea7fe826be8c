"""Task kinds: one module per way of grading a task (``pytest``, ``node``, ``calls``, ``stdio``,
``command``), registered by name. See docs/task-kinds.md.

A task names its kind in task.toml (``kind = "pytest"``); grading, warm runs, two-process runs
and audit ask the task's :class:`Kind` (:func:`kind_of`) for everything that depends on it, and
never name a kind themselves. A plugin subclasses :class:`Kind` and registers an instance
(:func:`register_kind`, or an entry point in the group ``verify_cli.task_kinds``).

Importing this package is light (the names only, PEP 562): :mod:`verify_cli.tasks` reads the
names to validate task.toml without importing grading.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from verify_cli._exports import lazy_attribute
from verify_cli.kinds.registry import BUILTIN_KINDS, KINDS, kind_names, kind_of, register_kind

if TYPE_CHECKING:
    from verify_cli.kinds.base import Kind, TwoProcessRuntime

_LAZY = {"Kind": "verify_cli.kinds.base", "TwoProcessRuntime": "verify_cli.kinds.base"}


def __getattr__(name: str) -> Any:
    return lazy_attribute(__name__, _LAZY, name)


__all__ = ["BUILTIN_KINDS", "KINDS", "Kind", "TwoProcessRuntime", "kind_names", "kind_of", "register_kind"]
