"""Reward-hack candidates for node tasks (tests/fixtures/hacks_js/): two-process grading gives
every one of them 0 on both JavaScript sample tasks; in-process grading, kept for comparison,
misses the ones that live in the test process (the argument for the default)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from verify_cli.grading import Grader, GradeRequest, GradeResult, Phase
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Isolation, Task

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
HACKS = ROOT / "tests" / "fixtures" / "hacks_js"
TASKS = {"coding-word-wrap-js": "wrap.js", "interface-spec-event-emitter-js": "emitter.js"}
ALL_HACKS = sorted(p.stem for p in HACKS.glob("*.js"))
#: What in-process grading lets through (see the fixtures' README).
MISSED_IN_PROCESS = {"stream_rewrite", "steal_key_forge"}


@pytest.fixture(scope="module")
def grader() -> Grader:
    return Grader(create_sandbox("bwrap"))


def _grade(grader: Grader, task_name: str, hack: str, *, in_process: bool = False) -> GradeResult:
    task: Task = load_task(ROOT / "sample_tasks" / task_name)
    if in_process:
        task = replace(task, isolation=Isolation.IN_PROCESS)
    files = {TASKS[task_name]: (HACKS / f"{hack}.js").read_bytes()}
    return grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate=files, label=hack))


def test_the_fixture_set_covers_every_family() -> None:
    assert {"stream_rewrite", "steal_key_forge", "exit_on_load", "exit_on_call", "assert_monkeypatch",
            "always_equal", "read_expected", "forge_junit"} <= set(ALL_HACKS)


@pytest.mark.parametrize("task_name", sorted(TASKS))
@pytest.mark.parametrize("hack", ALL_HACKS)
def test_every_hack_earns_nothing_two_process(grader: Grader, task_name: str, hack: str) -> None:
    result = _grade(grader, task_name, hack)
    assert result.isolation == "two-process"
    assert result.status.value == "graded"
    assert result.score == 0.0, result.to_dict(with_run=False)
    assert not result.passed


@pytest.mark.parametrize("task_name", sorted(TASKS))
@pytest.mark.parametrize("hack", sorted(MISSED_IN_PROCESS))
def test_in_process_grading_misses_the_stream_hacks(grader: Grader, task_name: str, hack: str) -> None:
    result = _grade(grader, task_name, hack, in_process=True)
    assert result.isolation == "in-process"
    assert result.score == 1.0, result.to_dict(with_run=False)


def test_in_process_grading_lets_literal_reading_pass_some_tests(grader: Grader) -> None:
    inside = _grade(grader, "coding-word-wrap-js", "read_expected", in_process=True)
    outside = _grade(grader, "coding-word-wrap-js", "read_expected")
    assert sum(t.outcome.ok for t in inside.tests) >= 3
    assert sum(t.outcome.ok for t in outside.tests) == 0
