"""Sessions: a sandbox that lives for an episode (``Sandbox.open_session``).

See :mod:`verify_cli.sandbox.sessions.base` for the contract; the backends' sessions live in
:mod:`~verify_cli.sandbox.sessions.bwrap` (namespaces forked by a session parent),
:mod:`~verify_cli.sandbox.sessions.process` (not isolated) and the docker backend.
"""

from verify_cli.sandbox.sessions.base import (
    ExecResult,
    ExecVerdict,
    FileEntry,
    Session,
    SessionDeadError,
    SessionError,
    SessionFileError,
    SessionInfraError,
    SessionLimits,
    SessionState,
    SessionsUnsupportedError,
    Snapshot,
    Workspace,
)

__all__ = ["ExecResult", "ExecVerdict", "FileEntry", "Session", "SessionDeadError", "SessionError",
           "SessionFileError", "SessionInfraError", "SessionLimits", "SessionState",
           "SessionsUnsupportedError", "Snapshot", "Workspace"]
