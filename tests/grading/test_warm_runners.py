"""The built-in runners ('calls' and 'stdio' tasks) run warm on bwrap: the warm worker imports
the runner once and forks a child per run that runs its ``main()``. Verdicts, outcomes and the
sealed record must be those of a cold run, for the reference, a wrong candidate, an object that
claims to equal everything, and a candidate that runs past its time limit."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from verify_cli.grading.grader import Grader, GradeRequest, GradeResult
from verify_cli.grading.warm import warm_unavailable_reason
from verify_cli.grading.workspace import Phase
from verify_cli.importers.model import TaskDraft
from verify_cli.importers.writer import write_task
from verify_cli.kinds.pytest_command import parse_pytest_command
from verify_cli.kinds.runner import runner_invocation
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task, TaskKind


@pytest.fixture(scope="module")
def graders() -> Iterator[tuple[Grader, Grader]]:
    from verify_cli.sandbox.registry import create_sandbox

    with create_sandbox("bwrap") as box:
        reason = warm_unavailable_reason(box)
        if reason is not None:
            pytest.skip(f"no warm workers here: {reason}")
        with Grader(box, warm=True) as warm, Grader(box, warm=False) as cold:
            yield warm, cold


def _task(root: Path, kind: TaskKind, files: dict[str, str], editable: str, table: dict[str, Any],
          isolation: str) -> Task:
    draft = TaskDraft(id=f"t/{kind.value}", prompt="p", kind=kind, files=files, editable=[editable],
                      table=table, wall_seconds=20.0)
    folder = write_task(draft, root)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace(f'kind = "{kind.value}"',
                                             f'kind = "{kind.value}"\nisolation = "{isolation}"'))
    return load_task(folder)


def calls_task(root: Path, isolation: str) -> Task:
    check = ("def check(candidate):\n    assert candidate(2) == 4\n    assert candidate(5) == 10\n")
    return _task(root, TaskKind.CALLS,
                 {"starter/solution.py": "def f(x):\n    raise NotImplementedError\n",
                  "solution/solution.py": "def f(x):\n    return x * 2\n", "hidden_tests/check.py": check},
                 "solution.py", {"entry_point": "f", "module": "solution.py", "style": "check",
                                 "call_seconds": 1.0}, isolation)


def stdio_task(root: Path, isolation: str) -> Task:
    files = {"starter/main.py": "", "solution/main.py": "print(int(input()) * 2)\n"}
    for name, (given, expected) in {"a": ("2\n", "4\n"), "b": ("5\n", "10\n")}.items():
        files[f"hidden_tests/cases/{name}.in"] = given
        files[f"hidden_tests/cases/{name}.out"] = expected
    return _task(root, TaskKind.STDIO, files, "main.py",
                 {"program": "python main.py", "case_seconds": 1.0}, isolation)


CALLS_CANDIDATES = {
    "reference": None,
    "wrong": "def f(x):\n    return x + 2\n",  # right for 2, wrong for 5
    "always_equal": ("class Yes:\n    def __eq__(self, other):\n        return True\n"
                     "    __hash__ = object.__hash__\n\ndef f(x):\n    return Yes()\n"),
    "timeout": "def f(x):\n    while x == 5:\n        pass\n    return x * 2\n",
}
STDIO_CANDIDATES = {
    "reference": None,
    "wrong": "x = int(input())\nprint(x + 2)\n",
    "timeout": "x = int(input())\nwhile x == 5:\n    pass\nprint(x * 2)\n",
}


def _grade(grader: Grader, task: Task, code: str | None, name: str) -> GradeResult:
    if code is None:
        return grader.grade(GradeRequest(task, Phase.REFERENCE))
    return grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={name: code.encode()}))


def _summary(result: GradeResult) -> dict[str, Any]:
    return {"status": result.status.value, "passed": result.passed, "score": result.score,
            "verdict": result.run.verdict.value,
            "tests": {t.id: t.outcome.value for t in result.tests},
            # Problems name what went wrong (a seal that did not verify, forged results).
            "problems": sorted(p.split(":")[0] for p in result.problems)}


def test_only_the_runner_command_goes_to_a_runner_worker(tmp_path: Path) -> None:
    import shutil

    from verify_cli.sandbox.process import runtime_path

    env = {"PATH": runtime_path()}  # what a sandboxed run's PATH is
    python = shutil.which("python", path=env["PATH"])
    assert python is not None
    task = calls_task(tmp_path, "two-process")
    inv = runner_invocation(task, env)
    assert inv is not None and (inv.mode, inv.program, inv.interpreter, inv.args) == (
        "runner", "verify_calls", python, ())
    stdio = runner_invocation(stdio_task(tmp_path / "s", "in-process"), env)
    assert stdio is not None and stdio.program == "verify_stdio"
    assert runner_invocation(task, {"PATH": "/nonexistent"}) is None  # no interpreter: cold
    assert parse_pytest_command(task.test.command, env) is None  # the pytest kind does not take it


@pytest.mark.bwrap
@pytest.mark.parametrize(("kind", "isolation"), [("calls", "two-process"), ("calls", "in-process"),
                                                 ("stdio", "two-process"), ("stdio", "in-process")])
def test_warm_runner_verdicts_match_cold(tmp_path: Path, graders: tuple[Grader, Grader], kind: str,
                                         isolation: str) -> None:
    warm, cold = graders
    if kind == "calls":
        task, candidates, name = calls_task(tmp_path, isolation), CALLS_CANDIDATES, "solution.py"
    else:
        task, candidates, name = stdio_task(tmp_path, isolation), STDIO_CANDIDATES, "main.py"
    for grader in (warm, cold):  # the task's declared tests: one reference run each, first
        grader.expected_tests(task)
    stats = warm.warm_stats
    before = stats.warm_runs if stats is not None else 0
    for label, code in candidates.items():
        got_warm, got_cold = _grade(warm, task, code, name), _grade(cold, task, code, name)
        assert _summary(got_warm) == _summary(got_cold), label
        assert got_warm.isolation == got_cold.isolation == isolation
        if label == "reference":
            # Passing at all needs the runner's signed record to verify against the JUnit file.
            assert got_warm.passed and not got_warm.problems
        else:
            assert not got_warm.passed and got_warm.score == 0.0, label
        if label == "timeout":
            assert got_warm.run.wall_seconds < 15
            assert any("time limit" in t.message for t in got_warm.tests if t.message), label
    stats = warm.warm_stats
    assert stats is not None
    assert stats.warm_runs - before == len(candidates), stats
    assert stats.fallbacks == 0, stats.last_error
