# ruff: noqa: F401  (the TYPE_CHECKING imports are the public names, exported through __all__)
"""verify-cli: curate and use verifiable tasks for LLM post-training.

The public API is what ``__all__`` lists, importable from here (loaded on first use, so
``import verify_cli`` stays cheap), and what the ``__all__`` of each layer's package lists
(``verify_cli.tasks``, ``.sandbox``, ``.grading``, ``.checks``, ``.models``, ``.executors``,
``.sampling``, ``.rollout``, ``.agents``, ``.difficulty``, ``.importers``, ``.exporters``, ``.kinds``,
``.environments``,
``.service`` (the ``serve`` extra), ``.client``, ``.adapters`` (each framework's extra): ``from
verify_cli.sandbox import create_sandbox``). Everything else is internal and may change without
notice: every module inside a package (``verify_cli.sandbox.bwrap.sandbox``), anything whose name starts
with ``_``, and the whole of ``verify_cli.cli``, ``verify_cli.formats`` (other people's task formats, read
by the task loader), ``verify_cli.harness`` and ``verify_cli.report`` (the lists are in
``verify_cli._exports``; tests/test_public_api.py pins the names).
Third-party sandbox backends plug in through the ``verify_cli.sandboxes`` entry-point group (see
:func:`verify_cli.register_sandbox`), task kinds through ``verify_cli.task_kinds`` (see
:func:`verify_cli.kinds.register_kind`).
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from verify_cli._version import __version__

#: public name -> the module that defines it
_PUBLIC: dict[str, str] = {
    # tasks
    "Task": "verify_cli.tasks",
    "TaskLoadFailure": "verify_cli.tasks",
    "load_task": "verify_cli.tasks",
    "load_task_set": "verify_cli.tasks",
    "discover_task_dirs": "verify_cli.tasks",
    # grading
    "Grader": "verify_cli.grading",
    "GradeRequest": "verify_cli.grading",
    "GradeResult": "verify_cli.grading",
    "GradeStatus": "verify_cli.grading",
    "Phase": "verify_cli.grading",
    "Outcome": "verify_cli.grading",
    "TestOutcome": "verify_cli.grading",
    # sandboxes
    "Sandbox": "verify_cli.sandbox",
    "RunSpec": "verify_cli.sandbox",
    "RunResult": "verify_cli.sandbox",
    "Limits": "verify_cli.sandbox",
    "Verdict": "verify_cli.sandbox",
    "Availability": "verify_cli.sandbox",
    "create_sandbox": "verify_cli.sandbox",
    "register_sandbox": "verify_cli.sandbox",
    "sandbox_names": "verify_cli.sandbox",
    # checks
    "CheckOptions": "verify_cli.checks.solvability",
    "check_tasks": "verify_cli.checks.solvability",
    "AuditOptions": "verify_cli.checks.audit.model",
    "audit_tasks": "verify_cli.checks.audit.run",
    # model backends
    "ModelBackend": "verify_cli.models",
    "SamplingParams": "verify_cli.models",
    "Completion": "verify_cli.models",
    "create_model_backend": "verify_cli.models",
    "model_backend_names": "verify_cli.models",
    # executors
    "Executor": "verify_cli.executors",
    "create_executor": "verify_cli.executors",
    # errors
    "VerifyError": "verify_cli.errors",
    "UsageError": "verify_cli.errors",
    "TaskFormatError": "verify_cli.errors",
    "SandboxUnavailableError": "verify_cli.errors",
    "ExitCode": "verify_cli.errors",
}

__all__ = ["__version__", *sorted(_PUBLIC)]


def __getattr__(name: str) -> Any:
    module = _PUBLIC.get(name)
    if module is None:
        raise AttributeError(f"module 'verify_cli' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_PUBLIC))


if TYPE_CHECKING:  # static checkers see the real names (names used through __all__)
    from verify_cli.checks.audit.model import AuditOptions
    from verify_cli.checks.audit.run import audit_tasks
    from verify_cli.checks.solvability import CheckOptions, check_tasks
    from verify_cli.errors import (
        ExitCode,
        SandboxUnavailableError,
        TaskFormatError,
        UsageError,
        VerifyError,
    )
    from verify_cli.executors import Executor, create_executor
    from verify_cli.grading import Grader, GradeRequest, GradeResult, GradeStatus, Outcome, Phase, TestOutcome
    from verify_cli.models import (
        Completion,
        ModelBackend,
        SamplingParams,
        create_model_backend,
        model_backend_names,
    )
    from verify_cli.sandbox import (
        Availability,
        Limits,
        RunResult,
        RunSpec,
        Sandbox,
        Verdict,
        create_sandbox,
        register_sandbox,
        sandbox_names,
    )
    from verify_cli.tasks import Task, TaskLoadFailure, discover_task_dirs, load_task, load_task_set
