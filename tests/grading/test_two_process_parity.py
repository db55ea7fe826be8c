"""Honest candidates get identical verdicts two-process and in-process.

Reference, starter and a few mutants of every Python sample task, plus two tasks written for
two-process grading (a class-based interface, and listeners that are the tests' callbacks,
re-entrant): the score, the pass verdict and every test's outcome must agree.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from verify_cli.checks.mutation.generate import generate_mutants
from verify_cli.grading.grader import Grader, GradeRequest, GradeResult
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Isolation, Task

ROOT = Path(__file__).resolve().parent.parent.parent
FIXTURES = ROOT / "tests" / "fixtures" / "two_process"


def parity_tasks() -> list[Task]:
    folders = [p.parent for p in sorted((ROOT / "sample_tasks").glob("*/task.toml"))]
    folders += [p.parent for p in sorted(FIXTURES.glob("*/task.toml"))]
    return [t for t in map(load_task, folders) if t.test.framework == "pytest"]


def honest_requests(task: Task, mutants: int) -> list[GradeRequest]:
    reqs = [GradeRequest(task, Phase.REFERENCE, label="reference"), GradeRequest(task, Phase.STARTER, label="starter")]
    sources = {rel: p.read_text(encoding="utf-8") for rel, p in task.solution_files().items()}
    for m in generate_mutants(sources, language="python", seed=0, max_mutants=mutants).mutants:
        candidate = {rel: src.encode() for rel, src in sources.items()}
        candidate[m.path] = m.mutated_source.encode()
        reqs.append(GradeRequest(task, Phase.MUTANT, candidate=candidate, label=m.id))
    return reqs


def verdict(r: GradeResult) -> tuple[object, ...]:
    return (r.status, r.score, r.passed, tuple(sorted((t.id, t.outcome.value) for t in r.tests)))


def roomy(task: Task) -> Task:
    """The task with a 120 s wall limit (both modes get it): this compares verdicts, and a test
    that calls the candidate thousands of times (roman-numerals round-trips 1..3999) costs
    seconds two-process on a loaded machine, past the sample's 30 s limit there."""
    return dataclasses.replace(task, limits=dataclasses.replace(task.limits, wall_seconds=120.0))


def compare(box: Sandbox, tasks: list[Task], mutants: int) -> None:
    requests = [req for task in map(roomy, tasks) for req in honest_requests(task, mutants)]
    old = [dataclasses.replace(r, task=dataclasses.replace(r.task, isolation=Isolation.IN_PROCESS))
           for r in requests]
    with Grader(box) as grader:
        # One run at a time: the sample tasks call the candidate thousands of times, and on a
        # loaded machine two concurrent runs can pass a 30 s wall limit.
        two = {(r.task_id, r.label): r for r in grader.grade_many(requests, jobs=1)}
        one = {(r.task_id, r.label): r for r in grader.grade_many(old, jobs=1)}
    assert two.keys() == one.keys()
    for key in sorted(two):
        assert two[key].isolation == "two-process" and one[key].isolation == "in-process"
        assert verdict(two[key]) == verdict(one[key]), (key, two[key].problems, one[key].problems)
    # The comparison means something: references pass, starters fail.
    assert all(two[(t.id, "reference")].passed and not two[(t.id, "starter")].passed for t in tasks)


@pytest.fixture(scope="module")
def bwrap() -> Iterator[Sandbox]:
    with create_sandbox("bwrap") as box:
        yield box


@pytest.mark.bwrap
@pytest.mark.slow
def test_identical_verdicts_on_every_python_task_bwrap(bwrap: Sandbox) -> None:
    compare(bwrap, parity_tasks(), mutants=2)


@pytest.mark.slow
def test_identical_verdicts_on_the_interface_tasks_process(process_sandbox: Sandbox) -> None:
    compare(process_sandbox, [t for t in parity_tasks() if t.id.startswith("fixture/")], mutants=3)
