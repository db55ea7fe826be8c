"""Typed backend options: each sandbox and model backend declares a frozen dataclass of what it
takes, and options are checked against it once, where a caller builds it.

:func:`build_config` turns a mapping of options (from command-line flags, ``--backend-option
KEY=VALUE`` pairs or a library call) into that dataclass, or raises a one-line
:class:`~verify_cli.errors.UsageError` naming the option and the backend: an option the backend
does not have, a required one that is missing, a value of the wrong type, or one the config's
own :meth:`BackendConfig.check` refuses. Nothing is dropped silently and nothing reaches a
constructor as a ``TypeError`` (in the manner of inspect_ai's ``config_deserialize``).
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar, Union

from verify_cli.errors import UsageError

C = TypeVar("C", bound="BackendConfig")


@dataclasses.dataclass(frozen=True)
class BackendConfig:
    """Base of every backend's options (a frozen dataclass; the base takes none).

    A field's ``metadata["help"]`` says what it is (shown when it is missing).
    """

    def check(self) -> str | None:
        """Why these values cannot be used (a phrase naming the option), or None."""
        return None

    def as_kwargs(self) -> dict[str, Any]:
        """The options as keyword arguments of the backend's constructor (not deep-copied)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}


def option_names(config_type: type[BackendConfig]) -> list[str]:
    """The options ``config_type`` declares, in declaration order."""
    return [f.name for f in dataclasses.fields(config_type)]


def _spelled(name: str, labels: Mapping[str, str] | None) -> str:
    label = (labels or {}).get(name)
    return f"{label} ({name})" if label else repr(name)


def build_config(config_type: type[C], options: Mapping[str, Any] | None, *, owner: str,
                 labels: Mapping[str, str] | None = None) -> C:
    """``options`` checked against ``config_type``: an instance, or a UsageError.

    ``owner`` names the backend in messages ("model backend 'hf'"); ``labels`` maps an option
    to how the user wrote it ("--docker-mode"), so the message names the flag.
    """
    options = dict(options or {})
    fields = {f.name: f for f in dataclasses.fields(config_type)}
    for key in options:
        if key not in fields:
            known = f"its options: {', '.join(fields)}" if fields else "it takes none"
            raise UsageError(f"{owner} has no option {_spelled(key, labels)} ({known})")
    hints = _type_hints(config_type)
    for name, f in fields.items():
        if name not in options:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                what = f.metadata.get("help", "")
                raise UsageError(f"{owner} needs option {_spelled(name, labels)}"
                                 + (f": {what}" if what else ""))
            continue
        value = options[name]
        if not _conforms(value, hints.get(name, Any)):
            raise UsageError(f"{owner} option {_spelled(name, labels)}: {value!r} is not "
                             f"{_describe(hints.get(name, Any))}")
    config = config_type(**options)
    why = config.check()
    if why:
        raise UsageError(f"{owner}: {why}")
    return config


_HINTS: dict[type, dict[str, Any]] = {}


def _type_hints(config_type: type) -> dict[str, Any]:
    hints = _HINTS.get(config_type)
    if hints is None:
        hints = _HINTS[config_type] = typing.get_type_hints(config_type)
    return hints


def _conforms(value: Any, tp: Any) -> bool:
    if tp is Any:
        return True
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return any(_conforms(value, arg) for arg in typing.get_args(tp))
    if origin is typing.Literal:
        return value in typing.get_args(tp)
    if tp is type(None):
        return value is None
    if tp is bool:
        return isinstance(value, bool)
    if tp is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if tp is float:
        return isinstance(value, int | float) and not isinstance(value, bool)
    if tp is Path:
        return isinstance(value, Path)
    if origin is not None:
        tp = origin
    if tp in (Mapping, dict) or (isinstance(tp, type) and issubclass(tp, Mapping)):
        return isinstance(value, Mapping)
    if tp in (tuple, list):
        return isinstance(value, tuple | list)
    return isinstance(tp, type) and isinstance(value, tp)


def _describe(tp: Any) -> str:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        return " or ".join(_describe(a) for a in typing.get_args(tp))
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(a) for a in typing.get_args(tp))
    if tp is type(None):
        return "null"
    names = {bool: "true or false", int: "a whole number", float: "a number", str: "a string",
             Path: "a path"}
    if tp in names:
        return names[tp]
    return f"a {getattr(origin or tp, '__name__', str(tp))}"


__all__ = ["BackendConfig", "build_config", "option_names"]
