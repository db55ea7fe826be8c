"""Model backends by name. An unknown name lists the choices; a backend whose optional packages
are missing says which extra to install."""

from __future__ import annotations

import importlib
import importlib.util
import inspect
from collections.abc import Callable
from typing import Any, TypeVar

from verify_cli.errors import UsageError
from verify_cli.models.base import ModelBackend, ModelBackendUnavailableError

_REGISTRY: dict[str, type[ModelBackend]] = {}

#: Built-in backends and the module that registers each. Modules import their optional
#: packages lazily, so every backend is listed even where it cannot run.
_BUILTIN = {
    "hf": "verify_cli.models.hf",
    "openai": "verify_cli.models.openai_backend",
    "replay": "verify_cli.models.replay",
    "vllm": "verify_cli.models.vllm_backend",
}

M = TypeVar("M", bound=type[ModelBackend])


def register_model_backend(name: str) -> Callable[[M], M]:
    def deco(cls: M) -> M:
        cls.name = name
        _REGISTRY[name] = cls
        return cls

    return deco


def _load(name: str) -> None:
    module = _BUILTIN.get(name)
    if module is not None and name not in _REGISTRY:
        importlib.import_module(module)


def model_backend_names() -> list[str]:
    return sorted(set(_BUILTIN) | set(_REGISTRY))


def model_backend_class(name: str) -> type[ModelBackend]:
    _load(name)
    try:
        return _REGISTRY[name]
    except KeyError:
        raise UsageError(f"unknown model backend {name!r}",
                         hint=f"choose one of: {', '.join(model_backend_names())}") from None


def missing_requirements(cls: type[ModelBackend]) -> list[str]:
    """The modules ``cls`` needs that are not installed here."""
    return [m for m in cls.requires if importlib.util.find_spec(m) is None]


def create_model_backend(name: str, **options: Any) -> ModelBackend:
    """An instance of backend ``name``, or an error saying what to install.

    ``options`` the backend does not take are dropped, so a caller can pass the same options
    whatever the backend (as :func:`verify_cli.sandbox.registry.create_sandbox` does).
    """
    cls = model_backend_class(name)
    missing = missing_requirements(cls)
    if missing:
        how = f"pip install 'verify-cli[{cls.extra}]'" if cls.extra else f"pip install {' '.join(missing)}"
        raise ModelBackendUnavailableError(
            f"model backend {name!r} needs {', '.join(missing)}, which is not installed", hint=how)
    params = inspect.signature(cls).parameters
    if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
        options = {k: v for k, v in options.items() if k in params}
    return cls(**options)
