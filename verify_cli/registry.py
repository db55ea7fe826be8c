"""One registry by name for every pluggable kind of thing: sandboxes, model backends, task kinds.

A :class:`Registry` holds objects (usually classes) under names. Built-ins are listed by the
module that registers each, so every name is known (and listed in errors and ``--help``) before
its module is imported; third-party packages add names through an entry-point group. The rules
are the same for every registry:

- an unknown name is a :class:`~verify_cli.errors.UsageError` that lists the choices;
- a name is registered once: a second, different object under the same name is refused
  (:class:`DuplicateNameError`, a programming error), and a plugin never replaces a built-in;
- a plugin that fails to load breaks only its own name, which then says why and what to install.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterator, Mapping
from importlib.metadata import entry_points
from threading import RLock
from typing import Generic, TypeVar

from verify_cli.errors import UsageError, VerifyError

T = TypeVar("T")
R = TypeVar("R")


class DuplicateNameError(ValueError):
    """Two different objects were registered under one name (a bug in the registering code)."""


class Registry(Generic[T]):
    """Named objects of one kind (``what``: "sandbox backend", "model backend", "task kind").

    ``builtin`` maps each built-in name to the module whose import registers it; ``entry_point_group``
    names the group third-party packages declare theirs in (an entry point names the object
    itself, or a module that registers it on import). ``accept`` checks a plugin's object (say,
    a subclass test) and returns why it is refused, or None. ``unavailable_error`` builds the
    error raised for a plugin that could not be loaded.
    """

    def __init__(self, what: str, *, builtin: Mapping[str, str] | None = None,
                 entry_point_group: str | None = None,
                 accept: Callable[[object], str | None] | None = None,
                 unavailable_error: Callable[[str, str], VerifyError] | None = None,
                 on_register: Callable[[str, T], None] | None = None) -> None:
        self.what = what
        self.entry_point_group = entry_point_group
        self._builtin = dict(builtin or {})
        self._accept = accept
        self._unavailable = unavailable_error
        self._on_register = on_register
        self._items: dict[str, T] = {}
        self._plugin_errors: dict[str, str] = {}
        self._plugins_loaded = False
        self._lock = RLock()

    # -- registering -------------------------------------------------------------------------

    def add(self, name: str, obj: T) -> T:
        """Register ``obj`` under ``name``; the same object again is a no-op, another one is refused."""
        with self._lock:
            have = self._items.get(name)
            if have is not None and have is not obj:
                raise DuplicateNameError(f"{self.what} {name!r} is already registered ({have!r})")
            self._items[name] = obj
        if self._on_register is not None:
            self._on_register(name, obj)
        return obj

    def register(self, name: str) -> Callable[[R], R]:
        """Decorator form of :meth:`add`."""

        def deco(obj: R) -> R:
            self.add(name, obj)  # type: ignore[arg-type]
            return obj

        return deco

    # -- looking up --------------------------------------------------------------------------

    def _load_builtin(self, name: str) -> None:
        module = self._builtin.get(name)
        if module is not None and name not in self._items:
            importlib.import_module(module)

    def load_all(self) -> None:
        """Import every built-in module and every plugin (what listing all names needs)."""
        for name in list(self._builtin):
            self._load_builtin(name)
        self._load_plugins()

    def _load_plugins(self) -> None:
        with self._lock:
            if self._plugins_loaded or not self.entry_point_group:
                self._plugins_loaded = True
                return
            self._plugins_loaded = True
        for ep in entry_points(group=self.entry_point_group):
            if ep.name in self._builtin or ep.name in self._items:
                continue  # a built-in name is never replaced by a plugin
            try:
                loaded = ep.load()
            except Exception as e:  # a broken plugin must not break the built-ins
                self._plugin_errors[ep.name] = f"{ep.value}: {type(e).__name__}: {e}"
                continue
            if ep.name in self._items:
                continue  # the module registered itself on import
            why = self._accept(loaded) if self._accept is not None else None
            if why is not None:
                self._plugin_errors[ep.name] = f"{ep.value}: {why}"
                continue
            try:
                self.add(ep.name, loaded)
            except DuplicateNameError as e:
                self._plugin_errors[ep.name] = str(e)

    def names(self) -> list[str]:
        """Every name, built-in and plugin, sorted (built-ins listed even if they cannot load)."""
        self._load_plugins()
        return sorted(set(self._builtin) | set(self._items))

    def get(self, name: str) -> T:
        """The object registered as ``name``; an unknown name is a UsageError listing the choices."""
        self._load_builtin(name)
        if name not in self._items:
            self._load_plugins()
        try:
            return self._items[name]
        except KeyError:
            pass
        if name in self._plugin_errors:
            reason = self._plugin_errors[name]
            if self._unavailable is not None:
                raise self._unavailable(name, reason) from None
            raise UsageError(f"{self.what} {name!r} (a plugin) could not be loaded: {reason}",
                             hint=f"reinstall the package that provides it ({self.entry_point_group} entry point)")
        raise UsageError(f"unknown {self.what} {name!r}", hint=f"choose one of: {', '.join(self.names())}")

    def plugin_error(self, name: str) -> str | None:
        """Why the plugin ``name`` could not be loaded, if it could not."""
        self._load_plugins()
        return self._plugin_errors.get(name)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def items(self) -> list[tuple[str, T]]:
        """Every registered (name, object), loading the built-ins first."""
        self.load_all()
        return sorted(self._items.items())


__all__ = ["DuplicateNameError", "Registry"]
