"""The ``node`` kind: the task's ``node --test`` command, with node:assert frozen before any
test or candidate code runs (``harness/plugins/verify_node_guard.js``), the runner's JUnit sealed by a
second reporter (:mod:`verify_cli.kinds.node_seal`), and two-process grading through
``harness/candidate/node/candidate_server.js`` on the candidate's side and ``verify_node_standin``
preloaded on the tests' side, which makes ``require()`` of an editable file return a stand-in whose
calls cross the channel (docs/wire-protocol.md, "node")."""

from __future__ import annotations

import json
from pathlib import Path
from typing import ClassVar

from verify_cli.grading.junit import TestOutcome
from verify_cli.grading.seal import SEAL_KEY_ENV
from verify_cli.kinds.base import HarnessOptions, Kind, TwoProcessRuntime
from verify_cli.kinds.node_seal import check_node_seal, node_seal_command, runner_writes_junit
from verify_cli.kinds.registry import register_kind
from verify_cli.sandbox.base import RunResult
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import glob_matches

#: The candidate's code files, which the tests' side sees empty (reached only through the channel).
NODE_CODE_SUFFIXES = (".js", ".cjs", ".mjs")


def _trusted_env(task: Task, root: Path, env: dict[str, str]) -> dict[str, str]:
    options = env.get("NODE_OPTIONS", "")
    return {"NODE_OPTIONS": f"{options} --require verify_node_standin".strip(),
            "VERIFY_CANDIDATE_FILES": json.dumps(list(task.editable))}


class NodeKind(Kind):
    name: ClassVar[str] = "node"
    summary: ClassVar[str] = "the task's node --test command, sealed and two-process"
    legacy_framework: ClassVar[str | None] = "node"
    harness_files: ClassVar[tuple[str, ...]] = (
        "verify_node_guard.js", "verify_node_seal.js", "verify_node_standin.js",
        "candidate/node/candidate_server.js")

    def __init__(self) -> None:
        super().__init__()
        self.two_process = TwoProcessRuntime(
            kind=self.name,
            server_command=("/bin/sh", "-c", 'exec node "$VERIFY_CANDIDATE_HARNESS/node/candidate_server.js"'),
            trusted_env=_trusted_env, code_suffixes=NODE_CODE_SUFFIXES)

    def run_environment(self, task: Task) -> dict[str, str]:
        # Freezes node:assert before any test or candidate code runs (verify_node_guard.js).
        return {"NODE_OPTIONS": "--require verify_node_guard"}

    def needs_seal_key(self, task: Task) -> bool:
        return True

    def request_environment(self, task: Task, options: HarnessOptions,
                            seal_key: str | None) -> dict[str, str]:
        # verify_node_guard.js takes the key out for the seal reporter.
        return {SEAL_KEY_ENV: seal_key} if seal_key else {}

    def test_command(self, task: Task) -> str:
        return node_seal_command(task.test.command)  # the runner seals its JUnit (node_seal.py)

    def check_seal(self, task: Task, run: RunResult, key: str, tests: list[TestOutcome],
                   problems: list[str]) -> bool:
        if not tests or not runner_writes_junit(task.test.command):
            return True  # a JUnit file built otherwise (a converter) is graded without the seal
        seal_problems = check_node_seal(run.results, key, [
            n for n in run.results if glob_matches(task.test.results, n)])
        problems.extend(seal_problems)
        return not seal_problems


register_kind(NodeKind())
