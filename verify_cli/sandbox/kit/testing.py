"""A test double for the sandbox interface, for testing code that runs things in a sandbox.

:class:`FakeSandbox` is a :class:`~verify_cli.sandbox.base.Sandbox` whose runs end as configured:
a given result (or one computed from the run's spec), the run of a real backend it wraps, or an
injected infrastructure failure (an ``infra_error`` verdict, or an exception, as a backend that
fell over would raise). It records every spec it was given and counts runs, thread-safely::

    from verify_cli.sandbox.kit.testing import FakeSandbox

    box = FakeSandbox(RunResult(Verdict.OK, "fake", results={"junit.xml": xml}))
    flaky = FakeSandbox(inner=create_sandbox("process"), fail_first=2)  # a daemon hiccup
    broken = FakeSandbox.broken(RuntimeError("daemon went away"))

It is not registered as a backend (``create_sandbox`` never returns it) and declares no
two-process support: runs with a ``candidate`` process are not its business.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import ClassVar

from verify_cli.sandbox.base import RunResult, RunSpec, Sandbox, Verdict

#: What a failing run's ``infra_error`` says unless told otherwise.
INJECTED_FAILURE = "injected infrastructure failure"


class FakeSandbox(Sandbox):
    """A backend whose runs end as configured (see the module's docstring).

    Each run is recorded (:attr:`specs`, :attr:`runs`), then it fails when it is among the first
    ``fail_first`` runs or ``fail_if(spec)`` is true (recorded in :attr:`failed`): it raises
    ``raises`` if given, else returns an ``infra_error`` saying ``fail_message``. A run that does
    not fail returns ``result`` (called with the spec when it is a function), else ``inner``'s
    run. With neither, every run that does not fail is an ``infra_error`` saying so.
    """

    name: ClassVar[str] = "fake"
    isolation: ClassVar[str] = "none: a test double that runs nothing itself"

    def __init__(self, result: RunResult | Callable[[RunSpec], RunResult] | None = None, *,
                 inner: Sandbox | None = None, fail_first: int = 0,
                 fail_if: Callable[[RunSpec], bool] | None = None,
                 fail_message: str = INJECTED_FAILURE,
                 raises: BaseException | None = None) -> None:
        if result is not None and inner is not None:
            raise ValueError("give a FakeSandbox a result or an inner backend, not both")
        self.result = result
        self.inner = inner
        self.fail_first = fail_first
        self.fail_if = fail_if
        self.fail_message = fail_message
        self.raises = raises
        self.specs: list[RunSpec] = []
        self.failed: list[RunSpec] = []
        self._lock = threading.Lock()

    @classmethod
    def broken(cls, error: BaseException) -> FakeSandbox:
        """A backend whose every run raises ``error`` (a backend bug, a daemon gone)."""
        return cls(fail_if=lambda _spec: True, raises=error)

    @classmethod
    def failing(cls, message: str = INJECTED_FAILURE) -> FakeSandbox:
        """A backend whose every run is an ``infra_error`` saying ``message``."""
        return cls(fail_if=lambda _spec: True, fail_message=message)

    @property
    def runs(self) -> int:
        """How many runs reached this backend (failed ones included)."""
        with self._lock:
            return len(self.specs)

    def run(self, spec: RunSpec) -> RunResult:
        with self._lock:
            self.specs.append(spec)
            fails = len(self.specs) <= self.fail_first
        if not fails and self.fail_if is not None:
            fails = self.fail_if(spec)
        if fails:
            with self._lock:
                self.failed.append(spec)
            if self.raises is not None:
                raise self.raises
            return RunResult(Verdict.INFRA_ERROR, self.name, message=self.fail_message)
        if callable(self.result):
            return self.result(spec)
        if self.result is not None:
            return self.result
        if self.inner is not None:
            return self.inner.run(spec)
        return RunResult(Verdict.INFRA_ERROR, self.name,
                         message="this FakeSandbox was given no result and no inner backend")

    def close(self) -> None:
        """Closes nothing: an ``inner`` backend belongs to whoever made it."""


__all__ = ["INJECTED_FAILURE", "FakeSandbox"]
