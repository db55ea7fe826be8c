"""Sandboxes: run a command over a set of files under limits. Knows nothing about tasks."""

from pathlib import Path

from verify_cli.sandbox.base import (
    Availability,
    CapturedOutput,
    Limits,
    RunResult,
    RunSpec,
    Sandbox,
    Verdict,
)
from verify_cli.sandbox.bwrap.candidate import WARM_CANDIDATE_ENV
from verify_cli.sandbox.environment import harness_dir, pinned_environment
from verify_cli.sandbox.plumbing.levers import LEVERS, LEVERS_OFF_ENV
from verify_cli.sandbox.process import runtime_path
from verify_cli.sandbox.registry import (
    ENTRY_POINT_GROUP,
    SandboxSpec,
    create_sandbox,
    register_sandbox,
    resolve_backend_name,
    sandbox_class,
    sandbox_names,
    sandbox_spec,
)
from verify_cli.sandbox.sessions.base import (
    ExecResult,
    ExecVerdict,
    Session,
    SessionDeadError,
    SessionInfraError,
    SessionLimits,
    SessionState,
)

__all__ = [
    "ENTRY_POINT_GROUP",
    "HARNESS_DIR",
    "LEVERS",
    "LEVERS_OFF_ENV",
    "WARM_CANDIDATE_ENV",
    "Availability",
    "CapturedOutput",
    "ExecResult",
    "ExecVerdict",
    "Limits",
    "RunResult",
    "RunSpec",
    "Sandbox",
    "SandboxSpec",
    "Session",
    "SessionDeadError",
    "SessionInfraError",
    "SessionLimits",
    "SessionState",
    "Verdict",
    "create_sandbox",
    "pinned_environment",
    "register_sandbox",
    "resolve_backend_name",
    "runtime_path",
    "sandbox_class",
    "sandbox_names",
    "sandbox_spec",
]


def __getattr__(name: str) -> Path:
    """``HARNESS_DIR``: the run-time harness folder, built on first use (:func:`harness_dir`)."""
    if name == "HARNESS_DIR":
        return harness_dir()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
