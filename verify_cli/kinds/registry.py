"""The registry of task kinds, by name (no kind module is imported until its name is asked for)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from verify_cli.registry import Registry

if TYPE_CHECKING:
    from verify_cli.kinds.base import Kind
    from verify_cli.tasks.model import Task

#: The built-in kinds and the module that registers each.
BUILTIN_KINDS: dict[str, str] = {
    "pytest": "verify_cli.kinds.pytest",
    "node": "verify_cli.kinds.node",
    "calls": "verify_cli.kinds.calls",
    "stdio": "verify_cli.kinds.stdio",
    "command": "verify_cli.kinds.command",
    "log": "verify_cli.kinds.log",
    "harbor": "verify_cli.kinds.harbor",
}

#: Third-party kinds declare an entry point in this group (naming a Kind instance, or a module
#: that registers one on import).
ENTRY_POINT_GROUP = "verify_cli.task_kinds"


def _accept(obj: object) -> str | None:
    from verify_cli.kinds.base import Kind

    if isinstance(obj, type) and issubclass(obj, Kind):
        return "names a Kind class: name an instance of it"
    return None if isinstance(obj, Kind) else f"{obj!r} is not a verify_cli.kinds.Kind"


KINDS: Registry[Kind] = Registry("task kind", builtin=BUILTIN_KINDS, entry_point_group=ENTRY_POINT_GROUP,
                                 accept=_accept)


def register_kind(kind: Kind) -> Kind:
    """Register ``kind`` under its own name (what a kind's module does once, on import)."""
    if not kind.name:
        raise ValueError(f"{type(kind).__name__} has no name")
    return KINDS.add(kind.name, kind)


def kind_of(task: Task) -> Kind:
    """The kind ``task`` is graded as (an unknown name is a UsageError listing the kinds)."""
    return KINDS.get(task.kind)


def kind_names() -> list[str]:
    """Every kind name a task.toml may use (built-ins and plugins), sorted."""
    return KINDS.names()


__all__ = ["BUILTIN_KINDS", "ENTRY_POINT_GROUP", "KINDS", "kind_names", "kind_of", "register_kind"]
