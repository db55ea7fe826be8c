"""The built-in runners of 'stdio' and 'calls' tasks, seen from the grader's side.

A runner is a harness module (``verify_cli/harness/verify_stdio.py``, ``verify_calls.py``)
that the task's test command starts inside the sandbox. It is the trusted side of the run: it
starts the candidate as a separate process, compares outputs itself, and writes JUnit XML plus
the signed record the grader checks the JUnit file against (:mod:`verify_cli.grading.seal`).
This module turns the task's ``[stdio]``/``[calls]`` table into the runner's configuration.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from verify_cli.tasks.model import Task, TaskKind

#: Mirrored in verify_cli/harness/verify_runner_common.py.
CONFIG_ENV = "VERIFY_RUNNER_CONFIG"
#: Share of the task's wall limit the runner spends on cases, leaving time to write results.
TOTAL_SHARE = 0.85


def uses_builtin_runner(task: Task) -> bool:
    return task.kind is not TaskKind.TESTS


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
