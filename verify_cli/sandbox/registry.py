"""Sandbox backends by name (on :class:`verify_cli.registry.Registry`), and the one place their
options are checked: :func:`sandbox_spec` builds a :class:`SandboxSpec` (the backend and its typed
config) once, and everything below takes it unchanged. An unknown or unavailable name says what
to install."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from verify_cli.backend_config import BackendConfig, build_config
from verify_cli.errors import SandboxUnavailableError, UsageError
from verify_cli.registry import Registry
from verify_cli.sandbox.base import Sandbox

#: Preference order for ``auto``: the first available backend wins, ``process`` last.
AUTO_ORDER = ("bwrap", "process")
AUTO = "auto"

S = TypeVar("S", bound=type[Sandbox])

#: Third-party backends: an entry point in this group names a Sandbox subclass (registered under
#: the entry point's name) or a module that registers itself with ``@register_sandbox``.
ENTRY_POINT_GROUP = "verify_cli.sandboxes"

#: The built-in backends and the module whose import registers each.
BUILTIN = {
    "bwrap": "verify_cli.sandbox.bwrap.sandbox",
    "docker": "verify_cli.sandbox.docker.sandbox",
    "process": "verify_cli.sandbox.process",
}


def _accept(obj: object) -> str | None:
    if isinstance(obj, type) and issubclass(obj, Sandbox):
        return None
    return "is not a Sandbox subclass and registered no backend"


def _name_it(name: str, cls: type[Sandbox]) -> None:
    cls.name = name


def _unavailable(name: str, reason: str) -> SandboxUnavailableError:
    return SandboxUnavailableError(f"sandbox backend {name!r} (a plugin) could not be loaded: {reason}",
                                   hint=f"reinstall the package that provides it ({ENTRY_POINT_GROUP} entry point)")


def new_registry() -> Registry[type[Sandbox]]:
    """An empty registry of sandbox backends (the built-ins load into it on first use)."""
    return Registry("sandbox backend", builtin=BUILTIN, entry_point_group=ENTRY_POINT_GROUP,
                    accept=_accept, unavailable_error=_unavailable, on_register=_name_it)


#: The sandbox backends.
SANDBOXES: Registry[type[Sandbox]] = new_registry()


def register_sandbox(name: str) -> Callable[[S], S]:
    """Class decorator: make a :class:`Sandbox` subclass available as backend ``name``.

    Public: a third-party backend decorates its class and is found through the
    ``verify_cli.sandboxes`` entry-point group. A second class under a taken name is refused.
    """

    def deco(cls: S) -> S:
        SANDBOXES.add(name, cls)
        return cls

    return deco


def sandbox_names() -> list[str]:
    """Every backend's name (not ``auto``)."""
    return SANDBOXES.names()


def sandbox_class(name: str) -> type[Sandbox]:
    """The class of backend ``name``; an unknown name is a UsageError listing the choices."""
    try:
        return SANDBOXES.get(name)
    except UsageError as e:
        if not e.message.startswith("unknown"):
            raise
        raise UsageError(e.message, hint=f"choose one of: {AUTO}, {', '.join(sandbox_names())}") from None


def resolve_backend_name(name: str) -> tuple[str, str | None]:
    """The backend to use for ``name`` and, for ``auto`` falling back to ``process``, a warning."""
    if name != AUTO:
        sandbox_class(name)  # an unknown name is a usage error here, before anything starts
        return name, None
    for candidate in AUTO_ORDER:
        cls = sandbox_class(candidate)
        avail = cls.availability()
        if avail.available:
            if candidate == AUTO_ORDER[-1]:
                first = sandbox_class(AUTO_ORDER[0]).availability()
                return candidate, (
                    f"WARNING: no isolating sandbox available, falling back to {candidate!r} "
                    f"(no file system or network isolation). {AUTO_ORDER[0]}: {first.reason}. "
                    f"{first.install_hint}")
            return candidate, None
    raise SandboxUnavailableError("no sandbox backend is available")  # pragma: no cover


@dataclass(frozen=True)
class SandboxSpec:
    """A sandbox backend and its checked options: built once (:func:`sandbox_spec`), passed down
    unchanged (to executors, to each Ray node) and made into a sandbox by :func:`create_sandbox`.

    ``backend`` is a registered name, or ``auto`` where it is resolved on the machine that runs
    the sandbox (a Ray node); ``warning`` says why ``auto`` fell back to ``process`` here.
    """

    backend: str
    config: BackendConfig = field(default_factory=BackendConfig)
    warning: str | None = None


#: How the command line spells each sandbox option (named in errors).
FLAGS = {"pool_size": "--pool-size", "mode": "--docker-mode"}


def sandbox_spec(name: str, options: Mapping[str, Any] | None = None, *, resolve: bool = True,
                 labels: Mapping[str, str] | None = FLAGS) -> SandboxSpec:
    """Backend ``name`` with ``options`` checked against its config: an option it does not have,
    a missing one or a bad value is a one-line UsageError naming the option and the backend.

    ``auto`` is resolved here (its fall-back warning kept in the spec), or with ``resolve``
    false left for the machine that will run the sandbox; options given with an unresolved
    ``auto`` must suit every backend it may become.
    """
    if name == AUTO and not resolve:
        for candidate in AUTO_ORDER:
            cls = sandbox_class(candidate)
            build_config(cls.config_type, options, owner=f"sandbox backend {candidate!r} (from auto)",
                         labels=labels)
        return SandboxSpec(AUTO, build_config(BackendConfig, {}, owner="auto"))
    backend, warning = resolve_backend_name(name)
    cls = sandbox_class(backend)
    owner = f"sandbox backend {backend!r}" + (" (chosen by auto)" if name == AUTO else "")
    config = build_config(cls.config_type, options, owner=owner, labels=labels)
    return SandboxSpec(backend, config, warning)


def create_sandbox(name: str | SandboxSpec, **options: Any) -> Sandbox:
    """An instance of backend ``name`` (``auto`` resolved here) configured with ``options``, or
    SandboxUnavailableError saying what to do. Options are checked by :func:`sandbox_spec`: one
    the backend does not take is an error, never dropped. A :class:`SandboxSpec` is used as is."""
    if isinstance(name, SandboxSpec):
        if options:
            raise TypeError("create_sandbox: give options in the SandboxSpec, not beside it")
        spec = name
    else:
        spec = sandbox_spec(name, options, labels=None)
    if spec.backend == AUTO:  # a spec built for another machine: resolve it here
        spec = sandbox_spec(AUTO, spec.config.as_kwargs(), labels=None)
    cls = sandbox_class(spec.backend)
    if type(spec.config) is not cls.config_type:
        raise UsageError(f"sandbox backend {spec.backend!r} was given the options of another backend "
                         f"({type(spec.config).__name__})")
    avail = cls.availability()
    if not avail.available:
        raise SandboxUnavailableError(f"sandbox backend {spec.backend!r} is not available here: {avail.reason}",
                                      hint=avail.install_hint or None)
    return cls.from_config(spec.config)


def environment_label(backend: str, image: str | None, runtime: str) -> str | None:
    """What a run of ``backend`` (``a+b``: a cluster whose nodes differ) runs in: the task's
    image for backends that run in one, else its runtime."""
    names = backend.split("+")
    if names and all(n in SANDBOXES.names() and sandbox_class(n).runs_in_image for n in names):
        return image
    return runtime


__all__ = ["AUTO", "AUTO_ORDER", "ENTRY_POINT_GROUP", "SANDBOXES", "SandboxSpec", "create_sandbox",
           "environment_label", "register_sandbox", "resolve_backend_name", "sandbox_class", "sandbox_names",
           "sandbox_spec"]
