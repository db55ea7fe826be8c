"""The ``calls`` kind: tests call a named function of the candidate by value, from verify-cli's
built-in runner (``python -m verify_calls``, ``harness/runners/verify_calls.py``) that never imports
candidate code; the task's ``[calls]`` table configures it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

from verify_cli.kinds.base import TwoProcessRuntime
from verify_cli.kinds.registry import register_kind
from verify_cli.kinds.runner import SERVER_COMMAND, RunnerKind
from verify_cli.tasks.model import Task


def _trusted_env(task: Task, root: Path, env: dict[str, str]) -> dict[str, str]:
    module = task.calls.module if task.calls is not None else ""
    name = module[:-3].replace("/", ".") if module.endswith(".py") else module
    return {"VERIFY_CANDIDATE_MODULES": json.dumps([name])}


class CallsKind(RunnerKind):
    name: ClassVar[str] = "calls"
    summary: ClassVar[str] = "calls of a named function, compared by value (the built-in runner)"
    harness_files: ClassVar[tuple[str, ...]] = ("verify_calls.py", *RunnerKind.harness_files)

    def __init__(self) -> None:
        super().__init__()
        self.two_process = TwoProcessRuntime(kind=self.name, server_command=SERVER_COMMAND,
                                             trusted_env=_trusted_env, code_suffixes=(".py",))

    def table(self, task: Task) -> Any:
        return task.calls


register_kind(CallsKind())
