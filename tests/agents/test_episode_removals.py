"""An agent that removes a starter file in its session (``rm``) is graded with the file removed,
as a candidate diff's deletion is; a file it may not remove (outside the editable globs) comes
back from the task."""

from __future__ import annotations

import shutil
from typing import Any

import pytest

from tests.conftest import SandboxFor, TaskFactory
from verify_cli.agents.environment import TaskEnvironment
from verify_cli.agents.tools import tool_call
from verify_cli.grading.grader import Grader
from verify_cli.sandbox.base import Sandbox
from verify_cli.tasks.file_states import is_removed
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task

GOLD = """\
diff --git a/extra.py b/extra.py
deleted file mode 100644
--- a/extra.py
+++ /dev/null
@@ -1 +0,0 @@
-EXTRA = 1
diff --git a/solution.py b/solution.py
--- a/solution.py
+++ b/solution.py
@@ -1,2 +1,2 @@
 def total(values):
-    raise NotImplementedError
+    return sum(values)
"""
GONE_TEST = """\
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_extra_is_removed():
    assert not os.path.exists(os.path.join(ROOT, "extra.py"))
"""


@pytest.fixture
def task(make_task: TaskFactory) -> Task:
    """The demo task, plus a starter file extra.py that its gold patch deletes and a hidden test
    that checks it is gone; README.md is not editable."""

    def mutate(doc: dict[str, Any]) -> None:
        doc.update(editable=["*.py"], isolation="in-process")
        doc["test"]["command"] += " hidden_tests"

    root = make_task("removal", mutate=mutate, files={"starter/extra.py": "EXTRA = 1\n", "starter/README.md": "x\n",
                                                      "hidden_tests/test_gone.py": GONE_TEST, "solution.patch": GOLD})
    shutil.rmtree(root / "solution")
    return load_task(root)


def _episode(task: Task, sandbox: Sandbox, command: str) -> tuple[dict[str, bytes], Any]:
    with Grader(sandbox) as grader:
        env = TaskEnvironment.open(task, sandbox, grader)
        try:
            fixed = "def total(values):\n    return sum(values)\n"
            assert not env.call(tool_call("write_file", {"path": "solution.py", "content": fixed})).error
            if command:
                assert not env.call(tool_call("bash", {"command": command})).error
            files = env.editable_files()
            return files, env.outcome()
        finally:
            env.close()


@pytest.mark.parametrize("backend", [pytest.param("process"), pytest.param("bwrap", marks=pytest.mark.bwrap),
                                     pytest.param("docker", marks=pytest.mark.docker)])
def test_a_file_the_agent_removes_is_absent_from_its_grade(task: Task, sandbox_for: SandboxFor, backend: str) -> None:
    files, outcome = _episode(task, sandbox_for(backend), "rm extra.py README.md")
    assert is_removed(files["extra.py"]) and "README.md" not in files
    assert (outcome.status, outcome.score) == ("passed", 1.0), outcome.reason
    assert outcome.grade.ignored_files == ()


def test_a_file_the_agent_keeps_is_graded_present(task: Task, process_sandbox: Sandbox) -> None:
    files, outcome = _episode(task, process_sandbox, "")
    assert not any(is_removed(data) for data in files.values())
    assert outcome.status == "failed"
    assert [t.id for t in outcome.grade.tests if not t.outcome.ok] == ["hidden_tests.test_gone::test_extra_is_removed"]
