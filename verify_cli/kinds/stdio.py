"""The ``stdio`` kind: input/output pairs fed to the candidate's program by verify-cli's built-in
runner (``python -m verify_stdio``, ``harness/runners/verify_stdio.py``); the task's ``[stdio]`` table
configures it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, ClassVar

from verify_cli.kinds.base import TwoProcessRuntime
from verify_cli.kinds.registry import register_kind
from verify_cli.kinds.runner import SERVER_COMMAND, RunnerKind
from verify_cli.tasks.model import Task


def _no_env(task: Task, root: Path, env: dict[str, str]) -> dict[str, str]:
    return {}


class StdioKind(RunnerKind):
    name: ClassVar[str] = "stdio"
    summary: ClassVar[str] = "input/output pairs fed to a program (the built-in runner)"
    harness_files: ClassVar[tuple[str, ...]] = ("verify_stdio.py", *RunnerKind.harness_files)

    def __init__(self) -> None:
        super().__init__()
        # The program is started through the candidate server's exec op: no code file is private.
        self.two_process = TwoProcessRuntime(kind=self.name, server_command=SERVER_COMMAND,
                                             trusted_env=_no_env, code_suffixes=())

    def table(self, task: Task) -> Any:
        return task.stdio


register_kind(StdioKind())
