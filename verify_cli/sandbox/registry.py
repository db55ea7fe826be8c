"""Backends by name. An unknown or unavailable name says what to install."""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from verify_cli.errors import SandboxUnavailableError, UsageError
from verify_cli.sandbox.base import Sandbox

_REGISTRY: dict[str, type[Sandbox]] = {}
#: Preference order for ``auto``: the first available backend wins, ``process`` last.
AUTO_ORDER = ("bwrap", "process")

S = TypeVar("S", bound=type[Sandbox])


def register_sandbox(name: str) -> Callable[[S], S]:
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


def sandbox_names() -> list[str]:
    _load_builtin()
    return sorted(_REGISTRY)


def sandbox_class(name: str) -> type[Sandbox]:
    _load_builtin()
    try:
        return _REGISTRY[name]
    except KeyError:
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
