"""The built-in runners of 'stdio' and 'calls' tasks, seen from the grader's side.

A runner is a harness module (``verify_cli/harness/verify_stdio.py``, ``verify_calls.py``)
that the task's test command starts inside the sandbox. It is the trusted side of the run: it
starts the candidate as a separate process, compares outputs itself, and writes JUnit XML plus
the signed record the grader checks the JUnit file against (:mod:`verify_cli.grading.seal`).
This module turns the task's ``[stdio]``/``[calls]`` table into the runner's configuration.
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from dataclasses import asdict
from pathlib import Path

from verify_cli.grading.pytest_command import split_simple_command
from verify_cli.grading.two_process import TwoProcessRuntime, register_two_process_runtime
from verify_cli.sandbox.base import PytestInvocation
from verify_cli.tasks.model import Task, TaskKind

#: Mirrored in verify_cli/harness/verify_runner_common.py.
CONFIG_ENV = "VERIFY_RUNNER_CONFIG"
#: Share of the task's wall limit the runner spends on cases, leaving time to write results.
TOTAL_SHARE = 0.85


def uses_builtin_runner(task: Task) -> bool:
    return task.kind is not TaskKind.TESTS


#: The harness modules of the built-in runners (``python -m MODULE``).
RUNNER_MODULES = ("verify_calls", "verify_stdio")
_PYTHON_NAMES = ("python", "python3")


def runner_invocation(task: Task, env: Mapping[str, str]) -> PytestInvocation | None:
    """The task's command as a warm host's runner job (mode "runner", ``program`` the runner
    module), or None when it is not exactly ``python -m verify_calls|verify_stdio`` with a
    ``python`` found on the run's PATH (it then runs cold)."""
    if not uses_builtin_runner(task):
        return None
    words = split_simple_command(task.test.command, env)
    if words is None or len(words) != 3 or words[1] != "-m" or words[2] not in RUNNER_MODULES:
        return None
    if os.path.basename(words[0]) not in _PYTHON_NAMES and not os.path.basename(words[0]).startswith("python3."):
        return None
    interpreter = words[0] if "/" in words[0] else shutil.which(words[0], path=env.get("PATH", ""))
    if not interpreter or not os.access(interpreter, os.X_OK):
        return None
    return PytestInvocation("runner", interpreter, words[2], words[0], ())


def runner_config(task: Task) -> dict[str, object]:
    """What the runner needs to know of the task (the task.toml is not in the work folder)."""
    spec = task.stdio if task.kind is TaskKind.STDIO else task.calls
    config: dict[str, object] = asdict(spec) if spec is not None else {}
    config["total_seconds"] = round(task.limits.wall_seconds * TOTAL_SHARE, 3)
    config["output_bytes"] = task.limits.output_bytes
    return config


def runner_environment(task: Task) -> dict[str, str]:
    if not uses_builtin_runner(task):
        return {}
    return {CONFIG_ENV: json.dumps(runner_config(task), sort_keys=True)}


#: The candidate server both runners talk to under two-process grading: the calls runner calls
#: the entry point through it, the stdio runner starts the program through its ``exec`` op.
SERVER_COMMAND = ("/bin/sh", "-c", 'exec python "$VERIFY_CANDIDATE_HARNESS/verify_candidate_server.py"')


def _calls_trusted_env(task: Task, root: Path, env: dict[str, str]) -> dict[str, str]:
    module = task.calls.module if task.calls is not None else ""
    name = module[:-3].replace("/", ".") if module.endswith(".py") else module
    return {"VERIFY_CANDIDATE_MODULES": json.dumps([name])}


def _no_env(task: Task, root: Path, env: dict[str, str]) -> dict[str, str]:
    return {}


register_two_process_runtime(TwoProcessRuntime(
    framework=TaskKind.CALLS.value, server_command=SERVER_COMMAND, trusted_env=_calls_trusted_env,
    code_suffixes=(".py",)))
register_two_process_runtime(TwoProcessRuntime(
    framework=TaskKind.STDIO.value, server_command=SERVER_COMMAND, trusted_env=_no_env, code_suffixes=()))
