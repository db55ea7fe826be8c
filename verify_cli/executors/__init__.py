"""Executors: where grade requests run. The checks and commands do not change; only this does.

An executor is a :class:`~verify_cli.grading.batch.BatchGrader`, a drop-in for the
:class:`~verify_cli.grading.Grader` that checks were written against::

    from verify_cli.executors import create_executor

    with create_executor("ray", sandbox="auto", ray_address="auto") as executor:
        for result in executor.grade_many(requests, on_result=progress):   # completion order
            ...                                                           # result.node: where it ran
        result = executor.grade(request)                    # one request, blocking
        result = await executor.agrade(request)             # asyncio
        async for result in executor.agrade_many(requests): # asyncio, streaming
            ...
    check_tasks(items, executor, options)                   # any check takes an executor
    audit_tasks(items, executor, options)

- ``local`` (:class:`LocalExecutor`): threads over one sandbox backend on this machine, exactly
  :meth:`Grader.grade_many` (``jobs`` threads, at most ``2 * jobs`` requests in flight).
- ``ray`` (:class:`~verify_cli.executors.ray_executor.RayExecutor`, needs the ``distributed``
  extra): one sandbox-pool actor per node of a Ray cluster offering the ``sandbox_slots``
  resource; tasks travel by content; a run lost with its node is re-queued, never scored.

Results are the same :class:`~verify_cli.grading.GradeResult` whichever executor grades them; the
ray executor also fills in :attr:`GradeResult.node`. ``grade_many`` is safe to call from
several threads at once (audit grades two streams side by side).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from verify_cli._exports import lazy_attribute
from verify_cli.errors import UsageError
from verify_cli.executors.base import (
    ClusterError,
    Executor,
    ExecutorStats,
    ExecutorUnavailableError,
    ResultCallback,
    import_ray,
)
from verify_cli.executors.local import LocalExecutor
from verify_cli.sandbox.registry import SandboxSpec, sandbox_spec

EXECUTOR_NAMES = ("local", "ray")


def create_executor(name: str, *, sandbox: str | SandboxSpec = "auto",
                    sandbox_options: Mapping[str, Any] | None = None, warm: bool = True,
                    ray_address: str = "auto") -> Executor:
    """The executor ``name`` (``local`` or ``ray``) grading in backend ``sandbox`` configured with
    ``sandbox_options`` (checked here, once: an option the backend does not take is a
    UsageError), or in the :class:`SandboxSpec` given.

    ``auto`` is resolved here for ``local`` (a fall-back to ``process`` is in the executor's
    :attr:`~Executor.warnings`) and on each node for ``ray``. Ray is imported only for ``ray``.
    """
    if name not in EXECUTOR_NAMES:
        raise UsageError(f"unknown executor {name!r}", hint=f"choose one of: {', '.join(EXECUTOR_NAMES)}")
    if isinstance(sandbox, SandboxSpec):
        if sandbox_options:
            raise TypeError("create_executor: give the options in the SandboxSpec, not beside it")
        spec = sandbox
    else:
        spec = sandbox_spec(sandbox, sandbox_options, resolve=name == "local")
    if name == "local":
        return LocalExecutor(spec, warm=warm)
    from verify_cli.executors.ray_executor import RayExecutor

    return RayExecutor(ray_address, sandbox=spec, warm=warm)


__all__ = ["EXECUTOR_NAMES", "ClusterError", "Executor", "ExecutorStats", "ExecutorUnavailableError", "LocalExecutor",
           "RayExecutor", "ResultCallback", "create_executor", "import_ray"]


def __getattr__(name: str) -> Any:
    # RayExecutor needs ray (the distributed extra): imported on first use
    return lazy_attribute(__name__, {"RayExecutor": "verify_cli.executors.ray_executor"}, name)
