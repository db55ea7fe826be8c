"""Backends by name. An unknown or unavailable name says what to install."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from importlib.metadata import entry_points
from typing import Any, TypeVar

from verify_cli.errors import SandboxUnavailableError, UsageError
from verify_cli.sandbox.base import Sandbox

_REGISTRY: dict[str, type[Sandbox]] = {}
#: Preference order for ``auto``: the first available backend wins, ``process`` last.
AUTO_ORDER = ("bwrap", "process")

S = TypeVar("S", bound=type[Sandbox])


#: Third-party backends: an entry point in this group names a Sandbox subclass (registered under
#: the entry point's name) or a module that registers itself with ``@register_sandbox``.
ENTRY_POINT_GROUP = "verify_cli.sandboxes"
#: entry point name -> why it could not be loaded (said when that name is asked for)
_PLUGIN_ERRORS: dict[str, str] = {}
_plugins_loaded = False


def register_sandbox(name: str) -> Callable[[S], S]:
    """Class decorator: make a :class:`Sandbox` subclass available as backend ``name``.

    Public: a third-party backend decorates its class and is found through the
    ``verify_cli.sandboxes`` entry-point group.
    """

    def deco(cls: S) -> S:
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def _load_builtin() -> None:
    # Importing the modules registers them; docker is optional at import time.
    from verify_cli.sandbox import bwrap, process  # noqa: F401

    with contextlib.suppress(ImportError):  # the docker SDK is a core dependency, but be lenient
        from verify_cli.sandbox import docker  # noqa: F401
    _load_plugins()


def _load_plugins() -> None:
    """Load the backends other packages declare in the ``verify_cli.sandboxes`` entry-point group."""
    global _plugins_loaded
    if _plugins_loaded:
        return
    _plugins_loaded = True
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name in _REGISTRY:
            continue  # a built-in name is never replaced by a plugin
        try:
            loaded = ep.load()
        except Exception as e:  # a broken plugin must not break the built-in backends
            _PLUGIN_ERRORS[ep.name] = f"{ep.value}: {type(e).__name__}: {e}"
            continue
        if isinstance(loaded, type) and issubclass(loaded, Sandbox) and ep.name not in _REGISTRY:
            register_sandbox(ep.name)(loaded)
        elif ep.name not in _REGISTRY:
            _PLUGIN_ERRORS[ep.name] = f"{ep.value} is not a Sandbox subclass and registered no backend"


def sandbox_names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def sandbox_class(name: str) -> type[Sandbox]:
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
        if name in _PLUGIN_ERRORS:
            raise SandboxUnavailableError(
                f"sandbox backend {name!r} (a plugin) could not be loaded: {_PLUGIN_ERRORS[name]}",
                hint=f"reinstall the package that provides it ({ENTRY_POINT_GROUP} entry point)") from None
        raise UsageError(f"unknown sandbox backend {name!r}",
                         hint=f"choose one of: auto, {', '.join(sorted(_REGISTRY))}") from None


def resolve_backend_name(name: str) -> tuple[str, str | None]:
    """The backend to use for ``name`` and, for ``auto`` falling back to ``process``, a warning."""
    if name != "auto":
        return name, None
    for candidate in AUTO_ORDER:
        cls = sandbox_class(candidate)
        avail = cls.availability()
        if avail.available:
            if candidate == "process":
                bw = sandbox_class("bwrap").availability()
                return candidate, (
                    "WARNING: no isolating sandbox available, falling back to 'process' "
                    f"(no file system or network isolation). bwrap: {bw.reason}. {bw.install_hint}")
            return candidate, None
    raise SandboxUnavailableError("no sandbox backend is available")  # pragma: no cover


def create_sandbox(name: str, **options: Any) -> Sandbox:
    """An instance of backend ``name`` (not ``auto``), or SandboxUnavailableError saying what to do.

    ``options`` a backend does not take (``pool_size`` for a backend without pools) are dropped,
    so a caller can pass the same options whatever the backend.
    """
    cls = sandbox_class(name)
    avail = cls.availability()
    if not avail.available:
        raise SandboxUnavailableError(f"sandbox backend {name!r} is not available here: {avail.reason}",
                                      hint=avail.install_hint or None)
    try:
        params = inspect.signature(cls).parameters
    except ValueError:  # no introspectable constructor: it takes no options
        params = {}  # type: ignore[assignment]
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        options = {k: v for k, v in options.items() if k in params}
    return cls(**options)
