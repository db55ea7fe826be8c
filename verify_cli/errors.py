"""Expected errors, each a mistake a user can fix, and the one table of exit codes.

Library code raises these; only ``verify_cli.cli`` turns them into exit codes and messages.
An unexpected exception is not one of these and keeps its traceback.
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    """Process exit codes of every verify-cli command."""

    OK = 0
    DEFECTIVE = 1  # the command ran and found defective tasks / failing audits
    USAGE = 2  # bad arguments, bad configuration, bad input files
    INFRA = 3  # the sandbox or infrastructure failed: nothing could be concluded
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


class SandboxUnavailableError(VerifyError):
    """A sandbox backend was asked for but cannot run here (not installed, daemon down)."""


class InfrastructureError(VerifyError):
    """The infrastructure failed while running (daemon died, disk full): not the task's fault."""

    exit_code = ExitCode.INFRA
