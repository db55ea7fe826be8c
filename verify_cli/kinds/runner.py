"""What the two built-in runner kinds (``calls``, ``stdio``) share, seen from the grader's side.

A runner is a harness module (``verify_cli/harness/runners/verify_stdio.py``, ``verify_calls.py``)
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
from typing import Any, ClassVar

from verify_cli.grading.junit import TestOutcome
from verify_cli.grading.seal import SEAL_KEY_ENV
from verify_cli.kinds.base import HarnessOptions, Kind
from verify_cli.kinds.pytest_command import split_simple_command
from verify_cli.kinds.record import check_record
from verify_cli.sandbox.base import RunResult, RunSpec, WarmHost, WarmInvocation
from verify_cli.sandbox.plumbing.trusted_launch import python_module_command
from verify_cli.tasks.model import Task

#: Mirrored in verify_cli/harness/runners/verify_runner_common.py.
CONFIG_ENV = "VERIFY_RUNNER_CONFIG"
#: Share of the task's wall limit the runner spends on cases, leaving time to write results.
TOTAL_SHARE = 0.85

#: The harness modules of the built-in runners (``python -m MODULE``).
RUNNER_MODULES = ("verify_calls", "verify_stdio")
_PYTHON_NAMES = ("python", "python3")

#: The candidate server both runners talk to under two-process grading: the calls runner calls
#: the entry point through it, the stdio runner starts the program through its ``exec`` op.
SERVER_COMMAND = ("/bin/sh", "-c", 'exec python "$VERIFY_CANDIDATE_HARNESS/verify_candidate_server.py"')


def runner_invocation(task: Task, env: Mapping[str, str], *, here: bool = True) -> WarmInvocation | None:
    """The task's command as a warm host's runner job (mode "runner", ``program`` the runner
    module), or None when it is not exactly ``python -m verify_calls|verify_stdio`` with a
    ``python`` found on the run's PATH (it then runs cold). ``here`` false: the run's programs
    are not this machine's (the host finds the interpreter; ``interpreter`` is "")."""
    words = split_simple_command(task.test.command, env)
    if words is None or len(words) != 3 or words[1] != "-m" or words[2] not in RUNNER_MODULES:
        return None
    if os.path.basename(words[0]) not in _PYTHON_NAMES and not os.path.basename(words[0]).startswith("python3."):
        return None
    if not here:
        return WarmInvocation("runner", "", words[2], words[0], ())
    interpreter = words[0] if "/" in words[0] else shutil.which(words[0], path=env.get("PATH", ""))
    if not interpreter or not os.access(interpreter, os.X_OK):
        return None
    return WarmInvocation("runner", interpreter, words[2], words[0], ())


def launched_runner_command(command: str) -> str:
    """``command`` with a plain ``PYTHON -m verify_calls|verify_stdio`` in it started isolated
    (``PYTHON -s $VERIFY_HARNESS_DIR/verify_launch.py MODULE``); any other command unchanged."""
    words = command.split()
    if (len(words) == 3 and words[1] == "-m" and words[2] in RUNNER_MODULES
            and (os.path.basename(words[0]) in _PYTHON_NAMES
                 or os.path.basename(words[0]).startswith("python3."))
            and all(c.isalnum() or c in "/._-" for c in words[0])):
        return python_module_command(words[0], words[2])
    return command


class RunnerKind(Kind):
    """A kind graded by one of verify-cli's built-in runners (a Python harness module, whatever
    the task's language), configured from the task's table of the kind's name."""

    harness_files: ClassVar[tuple[str, ...]] = ("verify_launch.py", "verify_runner_common.py", "warm_worker.py",
                                                 "candidate/verify_candidate_server.py")

    def table(self, task: Task) -> Any:
        """The task's ``[<kind>]`` table (a dataclass), or None."""
        return None

    def runner_config(self, task: Task) -> dict[str, object]:
        """What the runner needs to know of the task (the task.toml is not in the work folder)."""
        spec = self.table(task)
        config: dict[str, object] = asdict(spec) if spec is not None else {}
        config["total_seconds"] = round(task.limits.wall_seconds * TOTAL_SHARE, 3)
        config["output_bytes"] = task.limits.output_bytes
        return config

    def run_environment(self, task: Task) -> dict[str, str]:
        return {CONFIG_ENV: json.dumps(self.runner_config(task), sort_keys=True)}

    def test_command(self, task: Task) -> str:
        """``python -m verify_calls|verify_stdio`` started by the trusted launcher
        (:mod:`verify_cli.sandbox.plumbing.trusted_launch`): ``python -m`` would put the shared work folder
        first on the runner's ``sys.path``, so a module the candidate writes there at run time
        would be imported by the runner (a lazy standard import after the candidate ran)."""
        return launched_runner_command(task.test.command)

    def needs_seal_key(self, task: Task) -> bool:
        return True

    def request_environment(self, task: Task, options: HarnessOptions,
                            seal_key: str | None) -> dict[str, str]:
        return {SEAL_KEY_ENV: seal_key} if seal_key else {}

    def check_seal(self, task: Task, run: RunResult, key: str, tests: list[TestOutcome],
                   problems: list[str]) -> bool:
        return check_record(run, key, tests, problems)

    def warm_invocation(self, task: Task, host: WarmHost, spec: RunSpec) -> WarmInvocation | None:
        if not host.runs_harness_modules:
            return None
        return runner_invocation(task, host.environment(spec), here=host.programs_here(spec))

    def traceable(self, task: Task) -> bool:
        return True  # the runner records each call or case itself

    def trace_needs_two_process(self, task: Task) -> bool:
        return False  # the runner, not the candidate, writes the trace


__all__ = ["CONFIG_ENV", "RUNNER_MODULES", "SERVER_COMMAND", "RunnerKind", "launched_runner_command",
           "runner_invocation"]
