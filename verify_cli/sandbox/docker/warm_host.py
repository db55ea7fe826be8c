"""The docker backend's :class:`~verify_cli.sandbox.base.WarmHost`: warm jobs in pooled
containers whose waiting process has imported the job's runner
(:meth:`DockerSandbox.run_warm_job <verify_cli.sandbox.docker.sandbox.DockerSandbox.run_warm_job>`).

The pool belongs to the sandbox (it closes with it); this host only hands runs to it and counts.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import ClassVar, Protocol

from verify_cli.sandbox.base import (
    RunResult,
    RunSpec,
    WarmHost,
    WarmHow,
    WarmInvocation,
    WarmOutcome,
    WarmStats,
)


class WarmSandbox(Protocol):
    """What the host uses of its :class:`DockerSandbox` (named here, so that this module does
    not import the sandbox that imports it)."""

    mode: str
    warm_last_error: str

    def run(self, spec: RunSpec) -> RunResult: ...

    def warm_environment(self, spec: RunSpec) -> dict[str, str]: ...

    def warm_candidate_start(self) -> str: ...

    def run_warm_job(self, spec: RunSpec, *, mode: str, argv0: str, args: Sequence[str],
                        preload: Sequence[str] = (), program: str = "") -> tuple[RunResult, str]: ...


class DockerWarmHost(WarmHost):
    """Warm jobs of one :class:`DockerSandbox` (its programs are the image's)."""

    programs_on_host: ClassVar[bool] = False

    def __init__(self, sandbox: WarmSandbox) -> None:
        self.sandbox = sandbox
        self._stats = WarmStats()
        self._lock = threading.Lock()

    @property
    def stats(self) -> WarmStats:
        return self._stats

    def environment(self, spec: RunSpec) -> dict[str, str]:
        return self.sandbox.warm_environment(spec)

    def run_warm(self, spec: RunSpec, invocation: WarmInvocation, *,
                   preload: Sequence[str] = (), report_imports: bool = False) -> WarmOutcome:
        if spec.candidate is not None and self.sandbox.mode != "node":  # single-use: cold
            return WarmOutcome(self.sandbox.run(spec), "cold")
        result, how = self.sandbox.run_warm_job(
            spec, mode=invocation.mode, argv0=invocation.argv0, args=invocation.args,
            preload=sorted(set(preload)), program=invocation.program)
        told: WarmHow = "warm" if how == "warm" else "fallback" if how == "fallback" else "cold"
        with self._lock:
            if told == "warm":
                self._stats.warm_runs += 1
                if spec.candidate is not None:  # forked by the node's candidate parent, or cold
                    if self.sandbox.warm_candidate_start() == "warm":
                        self._stats.warm_candidates += 1
                    else:
                        self._stats.cold_candidates += 1
            elif told == "fallback":
                self._stats.fallbacks += 1
            else:
                self._stats.cold_runs += 1
            self._stats.last_error = self.sandbox.warm_last_error or self._stats.last_error
        return WarmOutcome(result, told)


class DockerNodeWarmHost(DockerWarmHost):
    """Warm jobs of a :class:`DockerSandbox` in node mode: also the built-in runners (``python
    -m verify_calls``), on warm nodes that have imported the runner (:mod:`.warm_nodes`)."""

    runs_harness_modules: ClassVar[bool] = True


__all__ = ["DockerNodeWarmHost", "DockerWarmHost"]
