"""What a Harbor task declares beyond what verify-cli's :class:`~verify_cli.tasks.model.Task`
holds (plain data, no imports of the rest of verify-cli: the task layer keeps one on a Task)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum

#: The Harbor semantics implemented: harbor's ``TaskConfig`` of ``schema_version = "1.1"``
#: (``src/harbor/models/task/config.py``; ``version`` read as ``schema_version``).
HARBOR_SCHEMA_VERSION = "1.1"
INSTRUCTION_FILE = "instruction.md"
TEST_SCRIPT = "tests/test.sh"
SOLVE_SCRIPT = "solution/solve.sh"
DOCKERFILE = "environment/Dockerfile"
#: Where Harbor mounts things in the environment.
TESTS_MOUNT = "/tests"
SOLUTION_MOUNT = "/solution"
VERIFIER_LOGS = "/logs/verifier"
DEFAULT_WORKDIR = "/app"
TERMINAL_BENCH = "terminal-bench"
TB1_SPEC = "task.yaml"
TB1_TESTS = "run-tests.sh"
TB1_SOLUTION = "solution.sh"
#: Terminal-Bench 1's verifier as Harbor's: run-tests.sh (beside the tests at /tests, as TB1 runs
#: it with ``TEST_DIR``), its exit status the reward.
TB1_TEST_SH = ("#!/bin/bash\n# Terminal-Bench 1's run-tests.sh: its exit status is the reward.\n"
               "export TEST_DIR=/tests\nmkdir -p /logs/verifier\n"
               "if bash /tests/run-tests.sh; then echo 1 > /logs/verifier/reward.txt; "
               "else echo 0 > /logs/verifier/reward.txt; fi\n")
#: A candidate's file of this name is not laid into the workdir: it is the agent's script, run in the
#: agent's environment before the verifier (a scripted agent; audit's probes are such agents).
AGENT_SCRIPT = ".verify-cli-agent.sh"


class VerifierMode(StrEnum):
    """Where the verifier runs."""

    #: verify-cli's rule: a fresh container from the image, the agent's workdir changes carried
    #: in, ``/tests`` read-only, ``/logs/verifier`` the verifier's alone.
    ISOLATED = "isolated"
    #: Harbor's own: ``test.sh`` in the agent's container, after the agent (whatever it left
    #: there runs too). Weaker: a task that needs the agent's running services declares it.
    SHARED = "shared"


@dataclass(frozen=True)
class Healthcheck:
    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    start_period_sec: float = 0.0
    retries: int = 3


@dataclass(frozen=True)
class HarborSpec:
    """A Harbor task's own settings (``task.toml``), normalised."""

    schema_version: str = HARBOR_SCHEMA_VERSION
    #: ``[task] name`` (``org/name``), if any.
    name: str = ""
    metadata: Mapping[str, object] = field(default_factory=dict)
    agent_timeout_sec: float | None = None
    verifier_timeout_sec: float = 600.0
    build_timeout_sec: float = 600.0
    cpus: int = 1
    memory_mb: int = 2048
    storage_mb: int = 10240
    docker_image: str | None = None
    #: The working directory the agent works in and whose changes are "its work" (``[environment]
    #: workdir``, else the Dockerfile's last WORKDIR, else /app).
    workdir: str = DEFAULT_WORKDIR
    verifier_env: Mapping[str, str] = field(default_factory=dict)
    solution_env: Mapping[str, str] = field(default_factory=dict)
    agent_user: str | None = None
    verifier_user: str | None = None
    healthcheck: Healthcheck | None = None
    mode: VerifierMode = VerifierMode.ISOLATED
    #: Fields verify-cli reads but cannot honour, by TOML path, with the reason (never dropped
    #: silently: check-tasks shows them as a warning).
    unsupported: Mapping[str, str] = field(default_factory=dict)
    #: The Dockerfile (relative path) when the task has one.
    dockerfile: str | None = None
    #: ``harbor``, or ``terminal-bench`` for a Terminal-Bench 1 folder read as it is (``task.yaml``,
    #: ``run-tests.sh``, ``solution.sh``: its verifier is run-tests.sh's exit status).
    layout: str = "harbor"
    #: The instruction where it is not ``instruction.md`` (Terminal-Bench 1's ``task.yaml``).
    instruction: str | None = None


__all__ = [
    "AGENT_SCRIPT",
    "DEFAULT_WORKDIR",
    "DOCKERFILE",
    "HARBOR_SCHEMA_VERSION",
    "INSTRUCTION_FILE",
    "SOLUTION_MOUNT",
    "SOLVE_SCRIPT",
    "TB1_SOLUTION",
    "TB1_SPEC",
    "TB1_TESTS",
    "TB1_TEST_SH",
    "TERMINAL_BENCH",
    "TESTS_MOUNT",
    "TEST_SCRIPT",
    "VERIFIER_LOGS",
    "HarborSpec",
    "Healthcheck",
    "VerifierMode",
]
