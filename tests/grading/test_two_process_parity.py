"""Honest candidates get identical verdicts two-process and in-process.

Reference, starter and a few mutants of every Python sample task, plus two tasks written for
two-process grading (a class-based interface, and listeners that are the tests' callbacks,
re-entrant): the score, the pass verdict and every test's outcome must agree. On bwrap the
same requests graded warm (a warm candidate parent forks each candidate) get the verdicts of
the cold two-process runs: one cold grading (``bwrap_two_process``) serves both comparisons.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from verify_cli.checks.mutation.generate import generate_mutants
from verify_cli.grading.grader import EXPECTING_PHASES, Grader, GradeRequest, GradeResult
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
    return [t for t in map(load_task, folders) if t.kind == "pytest"]


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


#: Mutants a task on bwrap (with reference and starter): one in the default tier, two in the
#: extended one (VERIFY_TESTS_FULL=1), which also compares in-process with two-process on them.
MUTANTS = 2 if os.environ.get("VERIFY_TESTS_FULL") == "1" else 1


def parity_requests(tasks: list[Task], mutants: int) -> list[GradeRequest]:
    return [req for task in map(roomy, tasks) for req in honest_requests(task, mutants)]


def grade_all(grader: Grader, requests: list[GradeRequest]) -> dict[tuple[str, str], GradeResult]:
    # One run at a time: the sample tasks call the candidate thousands of times, and on a
    # loaded machine two concurrent runs can pass a 30 s wall limit.
    return {(r.task_id, r.label): r for r in grader.grade_many(requests, jobs=1)}


def compare(box: Sandbox, tasks: list[Task], mutants: int,
            two: dict[tuple[str, str], GradeResult] | None = None) -> None:
    """In-process verdicts of ``tasks``' honest requests against two-process ones (``two``, the
    same requests graded two-process cold on ``box``, or graded here)."""
    requests = parity_requests(tasks, mutants)
    old = [dataclasses.replace(r, task=dataclasses.replace(r.task, isolation=Isolation.IN_PROCESS))
           for r in requests]
    with Grader(box) as grader:
        if two is None:
            two = grade_all(grader, requests)
        one = grade_all(grader, old)
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


@pytest.fixture(scope="module")
def bwrap_two_process(bwrap: Sandbox) -> dict[tuple[str, str], GradeResult]:
    """Every parity task's honest requests (2 mutants each) graded two-process cold on bwrap."""
    with Grader(bwrap) as grader:
        return grade_all(grader, parity_requests(parity_tasks(), mutants=MUTANTS))


@pytest.mark.bwrap
@pytest.mark.slow
def test_identical_verdicts_on_every_python_task_bwrap(
        bwrap: Sandbox, bwrap_two_process: dict[tuple[str, str], GradeResult]) -> None:
    compare(bwrap, parity_tasks(), mutants=MUTANTS, two=bwrap_two_process)


@pytest.mark.bwrap
@pytest.mark.slow
def test_warm_candidates_give_the_verdicts_of_cold_ones(
        bwrap: Sandbox, bwrap_two_process: dict[tuple[str, str], GradeResult]) -> None:
    """(The warm candidate side's own tests are in test_warm_candidate.py.)"""
    requests = parity_requests(parity_tasks(), mutants=MUTANTS)
    with Grader(bwrap, warm=True) as warm:
        warm_results = grade_all(warm, requests)
        stats = warm.warm_stats
    cold_results = bwrap_two_process
    assert warm_results.keys() == cold_results.keys()
    for key in sorted(warm_results):
        assert warm_results[key].isolation == "two-process"
        assert verdict(warm_results[key]) == verdict(cold_results[key]), key
    # Each task whose mutants were graded had one reference run collect its declared tests.
    collecting = len({r.task.id for r in requests if r.phase in EXPECTING_PHASES})
    assert stats is not None and stats.warm_candidates == len(requests) + collecting and stats.fallbacks == 0, stats
    assert any(r.passed for r in warm_results.values()) and not all(r.passed for r in warm_results.values())


@pytest.mark.slow
def test_identical_verdicts_on_the_interface_tasks_process(process_sandbox: Sandbox) -> None:
    compare(process_sandbox, [t for t in parity_tasks() if t.id.startswith("fixture/")], mutants=3)
