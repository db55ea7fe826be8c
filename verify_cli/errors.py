"""Expected errors, each a mistake a user can fix, and the one table of exit codes.

Library code raises these; only ``verify_cli.cli`` turns them into exit codes and messages.
An unexpected exception is not one of these and keeps its traceback.

The hierarchy (exit code in brackets)::

    VerifyError [2]
    ├── UsageError [2]                       bad arguments or options
    ├── TaskFormatError [2]                  a malformed task folder or task.toml (file + pointer)
    ├── ImportStopped [2]                    importers.run: --strict stopped at a bad row
    ├── ModelBackendUnavailableError [2]     models.base: a model backend cannot be used here
    ├── SandboxUnavailableError [3]          a sandbox backend cannot run here (not installed,
    │                                        daemon down, an image cannot be built)
    ├── ExecutorUnavailableError [3]         executors.base: an executor cannot start here
    ├── ClusterError [3]                     executors.base: the cluster failed
    ├── ModelBackendError [2]                models.base: a model backend failed a request
    │   ├── ServerError [3]                  models.openai_backend: the server failed
    │   │   └── ContextExceededError [3]     the server refused a prompt too long (becomes
    │   │                                    prompt_too_long samples, never reaches a command)
    │   └── VLLMEngineError [3]              models.vllm_backend: the engine did not start or
    │                                        died (its cause in one line)
    ├── EnvironmentBuildError [1]            environments: a task's environment did not build
    ├── JUnitParseError [3]                  grading.junit: a results file is not JUnit XML
    └── WorkerError [3]                      sandbox.bwrap_warm: a warm worker failed (re-run cold)

Exit codes of the commands that judge tasks (check-tasks): 0 every task sound; 1 a task is
defective (its reference fails in-process too, its starter passes, a test is flaky, ...) or its
environment did not build (``environment-error``); 4 no
task is defective but some task is *not gradeable two-process* (its reference passes in-process
and a test fails only two-process: the test uses something the two-process boundary does not
carry, named in the report with the remedy); 3 nothing could be concluded for some task (the
sandbox failed). When several apply, the first in that order wins.

A bad task file is a finding, not a usage error, for the commands that exist to find bad tasks:
``check-tasks`` reports a failed ``schema`` check and ``audit`` an unreliable task, and both exit
1 like for any other finding. Elsewhere a TaskFormatError exits 2.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes of every verify-cli command."""

    OK = 0
    DEFECTIVE = 1  # the command ran and found defective tasks / failing audits
    USAGE = 2  # bad arguments, bad configuration, bad input files
    INFRA = 3  # the sandbox or infrastructure failed: nothing could be concluded
    NOT_GRADEABLE = 4  # check-tasks: a correct reference fails only two-process (not its fault)
    INTERRUPTED = 130  # Ctrl-C


class VerifyError(Exception):
    """Base of all expected errors: says what is wrong, where, and what to do."""

    exit_code: ExitCode = ExitCode.USAGE

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def __str__(self) -> str:
        if self.hint:
            return f"{self.message}\n  hint: {self.hint}"
        return self.message


class UsageError(VerifyError):
    """Bad command-line arguments or options."""


class TaskFormatError(VerifyError):
    """A task folder or task.toml is malformed.

    ``path`` is the offending file, ``pointer`` the JSON pointer of the field (``""`` for the
    whole document).
    """

    def __init__(
        self, path: str, message: str, *, pointer: str | None = None, hint: str | None = None
    ) -> None:
        where = path if pointer is None else f"{path}: {pointer or '/'}"
        super().__init__(f"{where}: {message}", hint=hint)
        self.path = path
        self.pointer = pointer
        self.detail = message


class EnvironmentBuildError(VerifyError):
    """A task's environment (task.toml ``[environment]``) could not be built: a requirement that
    does not exist, a Dockerfile that does not parse, a set-up command that failed. The task's
    fault, not the candidate's: its runs are unscored and check-tasks says ``environment-error``.

    ``cause`` is the one line that says why; ``log`` the build log's path (its tail is in the
    message).
    """

    exit_code = ExitCode.DEFECTIVE

    def __init__(self, identity: str, cause: str, *, log: str = "", tail: str = "",
                 hint: str | None = None) -> None:
        text = f"environment {identity} did not build: {cause}"
        if tail:
            text += "\n" + "\n".join(f"  | {line}" for line in tail.splitlines())
        if log:
            text += f"\n  (build log: {log})"
        super().__init__(text, hint=hint)
        self.identity = identity
        self.cause = cause
        self.log = log


class SandboxUnavailableError(VerifyError):
    """A sandbox backend was asked for but cannot run here (not installed, daemon down).

    Exit 3: nothing about the tasks could be concluded, and the fix is on the machine, not in
    the command line.
    """

    exit_code = ExitCode.INFRA
