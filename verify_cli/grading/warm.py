"""Warm grading: a task's test run handed to the backend's warm host instead of a cold start.

A cold run pays for an interpreter start and for importing pytest (or a built-in runner) and
its plugins (most of a second) before the first test runs. A backend that can do better opens a
:class:`~verify_cli.sandbox.base.WarmHost` (:meth:`Sandbox.warm_host
<verify_cli.sandbox.base.Sandbox.warm_host>`): bwrap's pool of forking workers
(:mod:`verify_cli.sandbox.bwrap.warm`), docker's pooled containers that have imported pytest
(:mod:`verify_cli.sandbox.docker.warm_host`). This module is the grading side of it:

- which runs may go warm: the task's kind decides (:meth:`Kind.warm_invocation
  <verify_cli.kinds.base.Kind.warm_invocation>`: pytest commands recognisably
  ``python -m pytest ARGS``, the built-in runners' ``python -m verify_calls``); anything else
  runs cold;
- what to preload: ``task.environment.preload`` plus the third-party modules the task's reference
  runs were seen to import;
- the counters (:class:`WarmStats`).

A warm host absorbs its own faults (it re-runs the job cold); a worker's fault is never scored.
"""

from __future__ import annotations

import threading

from verify_cli.grading.workspace import Phase
from verify_cli.kinds.registry import kind_of
from verify_cli.sandbox.base import RunResult, RunSpec, Sandbox, Verdict, WarmHost, WarmInvocation, WarmStats
from verify_cli.tasks.model import Task


def warm_unavailable_reason(sandbox: Sandbox) -> str | None:
    """Why ``sandbox`` cannot run jobs warm here, or None when it can."""
    return sandbox.warm_unavailable()


class WarmRunner:
    """Runs a task's test command warm when its kind makes it a job the backend's warm host can
    take, else cold."""

    def __init__(self, sandbox: Sandbox, *, workers_per_key: int = 2) -> None:
        self.sandbox = sandbox
        self.unavailable = sandbox.warm_unavailable()
        self.host: WarmHost | None = (None if self.unavailable is not None
                                      else sandbox.warm_host(workers_per_key=workers_per_key))
        if self.host is None and self.unavailable is None:
            self.unavailable = f"the {sandbox.name or type(sandbox).__name__} backend opened no warm host"
        self._learned: dict[str, frozenset[str]] = {}
        self._lock = threading.Lock()

    def eligible(self, task: Task, spec: RunSpec) -> WarmInvocation | None:
        """``task``'s command as one job the host can run warm, or None (it runs cold)."""
        host = self.host
        if host is None:
            return None
        return kind_of(task).warm_invocation(task, host, spec)

    @property
    def stats(self) -> WarmStats | None:
        return self.host.stats if self.host is not None else None

    def run(self, task: Task, phase: Phase, spec: RunSpec) -> RunResult:
        inv = self.eligible(task, spec)
        if inv is None or self.host is None:
            return self.sandbox.run(spec)
        with self._lock:
            learned = self._learned.get(task.id, frozenset())
        preload = sorted(set(task.environment.preload) | learned)
        outcome = self.host.run_warm(spec, inv, preload=preload,
                                       report_imports=phase is Phase.REFERENCE)
        if outcome.imports and outcome.result.verdict is Verdict.OK:
            with self._lock:
                known = self._learned.get(task.id, frozenset())
                self._learned[task.id] = known | frozenset(outcome.imports)
        return outcome.result

    def reserve(self, jobs: int) -> None:
        """Let up to ``jobs`` runs go warm at once (grade_many's parallelism)."""
        if self.host is not None:
            self.host.reserve(jobs)

    def close(self) -> None:
        if self.host is not None:
            self.host.close()


__all__ = ["WarmInvocation", "WarmRunner", "WarmStats", "warm_unavailable_reason"]
