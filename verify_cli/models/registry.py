"""Model backends by name (on :class:`verify_cli.registry.Registry`). An unknown name lists the
choices; options are checked once against the backend's typed config (an unknown or missing one
is a one-line error naming it); a backend whose optional packages are missing says which extra to
install."""

from __future__ import annotations

import importlib.util
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from verify_cli.backend_config import BackendConfig, build_config
from verify_cli.errors import UsageError
from verify_cli.models.base import ModelBackend, ModelBackendUnavailableError
from verify_cli.registry import Registry

#: Built-in backends and the module that registers each. Modules import their optional
#: packages lazily, so every backend is listed even where it cannot run.
BUILTIN = {
    "hf": "verify_cli.models.hf",
    "openai": "verify_cli.models.openai_backend",
    "replay": "verify_cli.models.replay",
    "vllm": "verify_cli.models.vllm_backend",
}
#: Third-party model backends: an entry point names a ModelBackend subclass.
ENTRY_POINT_GROUP = "verify_cli.model_backends"

M = TypeVar("M", bound=type[ModelBackend])


def _accept(obj: object) -> str | None:
    if isinstance(obj, type) and issubclass(obj, ModelBackend):
        return None
    return "is not a ModelBackend subclass"


def _name_it(name: str, cls: type[ModelBackend]) -> None:
    cls.name = name


def _unavailable(name: str, reason: str) -> ModelBackendUnavailableError:
    return ModelBackendUnavailableError(f"model backend {name!r} (a plugin) could not be loaded: {reason}",
                                        hint=f"reinstall the package that provides it ({ENTRY_POINT_GROUP} "
                                             "entry point)")


#: The model backends.
MODEL_BACKENDS: Registry[type[ModelBackend]] = Registry(
    "model backend", builtin=BUILTIN, entry_point_group=ENTRY_POINT_GROUP, accept=_accept,
    unavailable_error=_unavailable, on_register=_name_it)


def register_model_backend(name: str) -> Callable[[M], M]:
    """Class decorator: make a :class:`ModelBackend` subclass available as backend ``name``
    (a second class under a taken name is refused)."""

    def deco(cls: M) -> M:
        MODEL_BACKENDS.add(name, cls)
        return cls

    return deco


def model_backend_names() -> list[str]:
    return MODEL_BACKENDS.names()


def model_backend_class(name: str) -> type[ModelBackend]:
    return MODEL_BACKENDS.get(name)


def missing_requirements(cls: type[ModelBackend]) -> list[str]:
    """The modules ``cls`` needs that are not installed here."""
    return [m for m in cls.requires if importlib.util.find_spec(m) is None]


#: How the command line spells the model options that have a flag of their own (named in errors).
FLAGS = {"model": "--model", "base_url": "--base-url", "chat": "--chat/--no-chat",
         "concurrency": "--concurrency", "max_retries": "--max-retries", "timeout_seconds": "--request-timeout",
         "tensor_parallel_size": "--tensor-parallel-size",
         "gpu_memory_utilization": "--gpu-memory-utilization", "device": "--device"}


def model_backend_config(name: str, options: Mapping[str, Any] | None = None, *,
                         labels: Mapping[str, str] | None = FLAGS) -> BackendConfig:
    """``options`` checked against backend ``name``'s config (a UsageError naming the option and
    the backend for one it does not take, a missing one, or a bad value)."""
    cls = model_backend_class(name)
    return build_config(cls.config_type, options, owner=f"model backend {name!r}", labels=labels)


def create_model_backend(name: str, config: BackendConfig | None = None, /, **options: Any) -> ModelBackend:
    """An instance of backend ``name`` with ``options`` (or a ``config`` built by
    :func:`model_backend_config`), or an error saying what is wrong or what to install.

    Options are checked, never dropped: one the backend does not take is an error.
    """
    cls = model_backend_class(name)
    if config is None:
        config = model_backend_config(name, options, labels=None)
    elif options:
        raise TypeError("create_model_backend: give the options in the config, not beside it")
    elif type(config) is not cls.config_type:
        raise UsageError(f"model backend {name!r} was given the options of another backend "
                         f"({type(config).__name__})")
    missing = missing_requirements(cls)
    if missing:
        how = f"pip install 'verify-cli[{cls.extra}]'" if cls.extra else f"pip install {' '.join(missing)}"
        raise ModelBackendUnavailableError(
            f"model backend {name!r} needs {', '.join(missing)}, which is not installed", hint=how)
    return cls.from_config(config)


__all__ = ["ENTRY_POINT_GROUP", "MODEL_BACKENDS", "create_model_backend", "missing_requirements",
           "model_backend_class", "model_backend_config", "model_backend_names", "register_model_backend"]
