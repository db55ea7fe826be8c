"""The hostile-program conformance suite, run as session commands.

:class:`SessionRunner` is a :class:`~verify_cli.sandbox.base.Sandbox` whose every run is a
command of one session of another backend: the files of the run's work folder are written into
the session, the command runs there with the run's environment and limits, and the next run
(the suite's "does the sandbox still work" run) goes to the same session. So
:func:`verify_cli.sandbox.kit.conformance.run_case` judges, from the host and with its own checks,
whether a session contains each hostile program and survives it.
"""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

from verify_cli.sandbox.base import Limits, RunResult, RunSpec, Sandbox, Verdict
from verify_cli.sandbox.sessions.base import (
    ExecResult,
    ExecVerdict,
    Session,
    SessionError,
    SessionLimits,
)

SESSION_COMMAND_SECONDS = 60.0
_VERDICTS = {ExecVerdict.SESSION_DEAD: Verdict.SIGNAL}


def session_limits(limits: Limits) -> SessionLimits:
    """The session limits that give a session's command a run's limits."""
    return SessionLimits(memory_mb=limits.memory_mb, processes=limits.processes,
                         disk_bytes=limits.file_bytes, command_seconds=limits.wall_seconds,
                         cpu_seconds=limits.cpu_seconds, output_bytes=limits.output_bytes,
                         max_output_bytes=limits.output_bytes,
                         file_bytes=limits.file_bytes, idle_seconds=600.0)


def run_result(result: ExecResult, backend: str) -> RunResult:
    """A session command's result as a run's (a dead session reads as a run killed by a signal,
    its message saying so)."""
    verdict = _VERDICTS.get(result.verdict) or Verdict(result.verdict.value)
    message = result.message
    if result.verdict is ExecVerdict.SESSION_DEAD:
        message = f"session_dead: {message}"
    return RunResult(verdict, backend, exit_code=result.exit_code, signal=result.signal,
                     wall_seconds=result.wall_seconds, cpu_seconds=result.cpu_seconds,
                     stdout=result.stdout, stderr=result.stderr, message=message)


class SessionRunner(Sandbox):
    """Runs every RunSpec as a command of one session of ``inner`` (reopened when it died or
    when a run's limits differ from the session's)."""

    def __init__(self, inner: Sandbox) -> None:
        self.inner = inner
        # The suite's tables are by backend name.
        self.name = inner.name  # type: ignore[misc]
        self.isolation = inner.isolation  # type: ignore[misc]
        self.session: Session | None = None
        self._limits: SessionLimits | None = None
        #: Sessions opened so far (a run after a death opens a new one).
        self.opened = 0

    def _session_for(self, spec: RunSpec) -> Session:
        limits = session_limits(spec.limits)
        # A run's wall limit is its command's (the exec's timeout), not the session's.
        limits = replace(limits, command_seconds=SESSION_COMMAND_SECONDS)
        if self.session is None or not self.session.alive or self._limits != limits:
            if self.session is not None:
                self.session.close()
            self.session = self.inner.open_session(None, limits, image=spec.image)
            self._limits = limits
            self.opened += 1
        return self.session

    def run(self, spec: RunSpec) -> RunResult:
        try:
            session = self._session_for(spec)
            root = Path(spec.workdir)
            for dirpath, _dirs, files in os.walk(root):
                for name in files:
                    path = Path(dirpath) / name
                    session.write_file(str(path.relative_to(root)), path.read_bytes())
        except (SessionError, OSError) as e:
            return RunResult(Verdict.INFRA_ERROR, self.name, message=f"session: {e}")
        result = session.exec(list(spec.command), env=dict(spec.env), stdin=spec.stdin,
                              timeout=spec.limits.wall_seconds)
        return run_result(result, self.name)

    def close(self) -> None:
        if self.session is not None:
            self.session.close()
            self.session = None


__all__ = ["SessionRunner", "run_result", "session_limits"]
