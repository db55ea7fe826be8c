"""SWE-bench rows list a parametrized test id as its harness's log parser recorded it: cut at the
first space, a path parameter reduced to its file name. Such an id matches the full id the run
reports, as SWE-bench matches it, and the worst of the tests it stands for counts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.conftest import write_task
from verify_cli.grading import Grader
from verify_cli.grading.grader import GradeRequest
from verify_cli.grading.junit import Outcome, TestOutcome
from verify_cli.grading.scoring import TestLists, match_listed_ids, swebench_id
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import Sandbox
from verify_cli.tasks.loader import load_task

TESTS = '''import pytest

from solution import total


@pytest.mark.parametrize("values", [[1, 2, 3]], ids=["three small numbers"])
def test_long(values):
    assert total(values) == 6


@pytest.mark.parametrize("path", ["/tmp/somewhere/data.txt"])
def test_path(path):
    assert total([len(path)]) == len(path)


def test_empty():
    assert total([]) == 0
'''


def test_swebench_ids_are_cut_as_its_log_parsers_cut_them() -> None:
    assert swebench_id("tests.t::test_long[three small numbers]") == "tests.t::test_long[three"
    assert swebench_id("tests.t::test_path[/tmp/somewhere/data.txt]") == "tests.t::test_path[/data.txt]"
    assert swebench_id("tests.t::test_empty") == "tests.t::test_empty"


def test_a_truncated_id_stands_for_the_worst_of_its_matches() -> None:
    lists = TestLists(fail_to_pass=("t::test_x[a",), pass_to_pass=())
    tests = [TestOutcome("t::test_x[a b]", Outcome.PASSED), TestOutcome("t::test_x[a c]", Outcome.FAILED, message="no")]
    (merged,) = match_listed_ids(lists, tests)
    assert merged.id == "t::test_x[a" and merged.outcome is Outcome.FAILED
    assert "t::test_x[a b], t::test_x[a c]" in merged.message


def test_a_task_listing_truncated_ids_grades_them(tmp_path: Path, process_sandbox: Sandbox) -> None:
    def mutate(doc: dict[str, Any]) -> None:
        doc["test"]["fail_to_pass"] = ["tests/test_solution.py::test_long[three",
                                       "tests/test_solution.py::test_path[/data.txt]"]
        doc["test"]["pass_to_pass"] = ["tests/test_solution.py::test_empty"]
        doc["scoring"] = {"policy": "swebench"}

    task = load_task(write_task(tmp_path / "t", mutate=mutate, files={"tests/test_solution.py": TESTS}))
    grader = Grader(process_sandbox)
    reference = grader.grade(GradeRequest(task, Phase.REFERENCE))
    starter = grader.grade(GradeRequest(task, Phase.STARTER))
    assert reference.score == 1.0 and reference.passed, [t.to_dict() for t in reference.tests]
    ids = {t.id: t.outcome for t in reference.tests}
    assert ids["tests.test_solution::test_long[three"] is Outcome.PASSED
    assert starter.score == 0.0
    assert {t.id: t.outcome for t in starter.tests}["tests.test_solution::test_long[three"] is Outcome.FAILED
