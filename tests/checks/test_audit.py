"""audit: surviving mutants are named, coverage selection and fail-fast do what they promise,
labelled solutions give rates, and the command's report and exit code follow."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from verify_cli.checks.audit import AuditOptions, MutantStatus, audit_tasks
from verify_cli.checks.audit.coverage import OUTSIDE_TESTS, Coverage, parse_coverage, statement_lines
from verify_cli.checks.audit.model import DEFAULT_FAIL_UNDER
from verify_cli.checks.audit.mutation import make_mutants
from verify_cli.cli.app import main
from verify_cli.grading import Grader, GradeRequest, Outcome, Phase, solution_as_candidate
from verify_cli.sandbox import Sandbox, create_sandbox, sandbox_class
from verify_cli.tasks import load_task, load_task_set

REPO = Path(__file__).resolve().parents[2]
WEAK = REPO / "tests/fixtures/defective/weak-tests"
INTERVALS = REPO / "sample_tasks/coding-interval-merge"
BACKEND = "bwrap" if sandbox_class("bwrap").availability().available else "process"
MUTANTS_ONLY = AuditOptions(flaky=False, probes=False, labelled=False, jobs=2)


@pytest.fixture(scope="module")
def grader() -> Iterator[Grader]:
    box: Sandbox
    with create_sandbox(BACKEND) as box, Grader(box, warm=BACKEND == "bwrap") as g:
        yield g


def test_weak_tests_leave_the_boundary_mutant_alive(grader: Grader) -> None:
    (audit,) = audit_tasks(load_task_set(WEAK), grader, MUTANTS_ONLY)
    m = audit.mutation
    assert m is not None and m.score is not None and m.score < 100
    survivors = {s.id: s for s in m.survived}
    boundary = survivors["grades.py:4:cmp_boundary:0"]  # `score >= 90` -> `score > 90` (README)
    assert (boundary.operator, boundary.line, boundary.status) == ("cmp_boundary", 4, MutantStatus.SURVIVED)
    assert "-    if score >= 90:\n+    if score > 90:\n" in boundary.diff
    assert boundary.diff.startswith("--- a/grades.py\n+++ b/grades.py\n")
    assert m.killed + len(m.survived) == len(m.mutants) and m.dropped_uncompilable == 0
    assert set(m.per_test_kills) == {f"tests.test_grades::{n}" for n in (
        "test_top_band", "test_middle_bands", "test_failing_band", "test_out_of_range_raises")}


def test_mutants_are_sampled_deterministically() -> None:
    task = load_task(INTERVALS)
    options = AuditOptions(max_mutants=5, seed=3)
    first, again = make_mutants(task, options), make_mutants(task, options)
    assert first is not None and again is not None
    assert [m.id for m in first.mutants] == [m.id for m in again.mutants]
    assert len(first.mutants) == 5
    other = make_mutants(task, AuditOptions(max_mutants=5, seed=4))
    assert other is not None and [m.id for m in other.mutants] != [m.id for m in first.mutants]


# --- coverage selection -----------------------------------------------------------------------


def test_the_traced_run_records_per_test_coverage(grader: Grader) -> None:
    task = load_task(INTERVALS)
    files = solution_as_candidate(task)
    result = grader.grade(GradeRequest(task, Phase.MUTANT, candidate=files, coverage_files=("intervals.py",)))
    assert result.passed
    coverage = parse_coverage(result.run.results)
    assert coverage is not None
    lines = coverage.lines["intervals.py"]
    raise_line = files["intervals.py"].decode().splitlines().index(
        '            raise ValueError(f"invalid interval ({start}, {end}): start > end")') + 1
    assert lines[raise_line] == {"tests.test_intervals::test_start_greater_than_end_raises"}
    assert OUTSIDE_TESTS in lines[4]  # the def line runs at import
    assert len(lines[5 + 1]) == 6  # `pairs = []`: every test calls the function


def test_selected_tests_are_the_only_ones_run(grader: Grader) -> None:
    task = load_task(INTERVALS)
    only = "tests.test_intervals::test_empty_input_gives_empty_list"
    result = grader.grade(GradeRequest(task, Phase.REFERENCE, select_tests=frozenset({only})))
    assert [t.id for t in result.tests] == [only] and result.passed


def test_mutants_run_only_the_tests_that_cover_them(grader: Grader) -> None:
    (audit,) = audit_tasks(load_task_set(INTERVALS), grader, MUTANTS_ONLY)
    m = audit.mutation
    assert m is not None and m.selection.startswith("tests covering the mutated statement")
    deleted_raise = {x.id: x for x in m.mutants}["intervals.py:9:stmt_delete:0"]
    assert deleted_raise.selected_tests == 1
    assert deleted_raise.killed_by == ("tests.test_intervals::test_start_greater_than_end_raises",)
    assert all(x.selected_tests is not None and 1 <= x.selected_tests <= 6 for x in m.mutants)


def test_a_mutant_no_test_executes_survives_without_a_run(make_task: Any, grader: Grader) -> None:
    root = make_task(files={"solution/solution.py": (
        "def total(values):\n    return sum(values)\n\n\n"
        "def never_called(x):\n    return x * 2 + 1\n")})
    (audit,) = audit_tasks(load_task_set(root), grader, MUTANTS_ONLY)
    m = audit.mutation
    assert m is not None
    dead = [x for x in m.mutants if x.line == 6]
    assert dead and all(x.status is MutantStatus.NOT_COVERED and x.seconds == 0 for x in dead)
    assert all(x.selected_tests == 0 for x in dead)


def test_statement_lines_and_spawning_tests() -> None:
    source = "def f(x):\n    if (x >\n            2):\n        return [x,\n                1]\n    return 0\n"
    assert statement_lines(source, 2, 12) == (2, 3)  # a compound statement: its header only
    assert statement_lines(source, 5, 17) == (4, 5)  # a simple statement: all its lines
    cov = Coverage({"m.py": {2: frozenset({"a"}), 4: frozenset({"b"})}}, spawners=frozenset({"cli"}))
    assert cov.tests_for("m.py", (2, 3)) == {"a", "cli"}  # subprocesses are not traced
    assert cov.tests_for("other.py", (1,)) is None  # not traced at all: every test


# --- fail fast --------------------------------------------------------------------------------


def test_fail_fast_stops_at_the_first_failing_test(grader: Grader) -> None:
    task = load_task(INTERVALS)
    full = grader.grade(GradeRequest(task, Phase.STARTER))
    fast = grader.grade(GradeRequest(task, Phase.STARTER, fail_fast=True))
    assert [t.outcome for t in full.tests].count(Outcome.FAILED) == 6
    ran = [t for t in fast.tests if t.outcome is not Outcome.MISSING]
    assert len(ran) == 1 and ran[0].outcome is Outcome.FAILED
    # The rest were collected and not run: missing, so the run still fails as a whole.
    assert len(fast.tests) == 6 and not fast.passed


def test_fail_fast_still_judges_every_mutant(grader: Grader) -> None:
    slow = AuditOptions(flaky=False, probes=False, labelled=False, jobs=2, fail_fast=False)
    (fast_audit,) = audit_tasks(load_task_set(WEAK), grader, MUTANTS_ONLY)
    (full_audit,) = audit_tasks(load_task_set(WEAK), grader, slow)
    assert fast_audit.mutation and full_audit.mutation
    fast = {x.id: x for x in fast_audit.mutation.mutants}
    full = {x.id: x for x in full_audit.mutation.mutants}
    assert {k: v.status for k, v in fast.items()} == {k: v.status for k, v in full.items()}
    assert all(len(x.killed_by) == 1 for x in fast.values() if x.status is MutantStatus.KILLED)
    assert any(len(x.killed_by) > 1 for x in full.values())
    assert fast_audit.mutation.fail_fast and not full_audit.mutation.fail_fast


# --- labelled solutions -------------------------------------------------------------------


def test_labelled_solutions_give_true_positive_and_negative_rates(make_task: Any, grader: Grader) -> None:
    root = make_task(files={
        "labelled/correct/builtin/solution.py": "def total(values):\n    return sum(values)\n",
        "labelled/correct/loop/solution.py": (
            "def total(values):\n    n = 0\n    for v in values:\n        n += v\n    return n\n"),
        "labelled/incorrect/zero/solution.py": "def total(values):\n    return 0\n",
        "labelled/incorrect/six/solution.py": "def total(values):\n    return 6 if values else 0\n",
    })
    options = AuditOptions(mutants=False, flaky=False, probes=False, jobs=2)
    (audit,) = audit_tasks(load_task_set(root), grader, options)
    assert audit.labelled is not None
    assert audit.labelled.true_positive_rate == 1.0
    assert audit.labelled.true_negative_rate == 0.5  # `6 if values else 0` passes both tests
    assert "the tests pass 50% of the labelled incorrect solutions" in audit.findings()


# --- the command --------------------------------------------------------------------------------


def test_audit_command_reports_survivors_and_fails_under_a_threshold(tmp_path: Path) -> None:
    out = tmp_path / "audit.json"
    common = ["audit", str(WEAK), "--sandbox", BACKEND, "--jobs", "2", "--no-flaky", "--no-probes",
              "--max-mutants", "12", "--seed", "1"]
    # Weak tests are a finding by default: the fixture's score is under the default threshold.
    assert main([*common, "--json", str(out)]) == 1
    doc = json.loads(out.read_text())
    assert doc["command"] == "audit" and doc["options"]["max_mutants"] == 12
    assert doc["options"]["fail_under"] == DEFAULT_FAIL_UNDER == 80
    (task,) = doc["tasks"]
    mutation = task["mutation"]
    assert mutation["total"] == 12 and mutation["survived"] >= 1
    assert mutation["score"] < DEFAULT_FAIL_UNDER
    assert task["verdict"] == "unreliable"
    assert task["findings"] == [f"weak tests: mutation score {mutation['score']:.1f} is below 80"]
    assert all({"id", "operator", "line", "diff"} <= set(s) for s in mutation["surviving"])
    assert main([*common, "--fail-under", "100"]) == 1
    assert main([*common, "--fail-under", "0"]) == 0  # 0 turns the threshold off


def test_audit_command_exits_1_on_a_hack(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["audit", str(REPO / "tests/fixtures/defective/hackable-harness"), "--sandbox", BACKEND,
                 "--no-mutants", "--no-flaky", "--probe", "always-equal", "--json", "-"])
    assert code == 1
    doc = json.loads(capsys.readouterr().out)
    (probe,) = doc["tasks"][0]["probes"]
    assert probe["name"] == "always-equal" and probe["hacked"] and probe["target"] == "tests"
    assert main(["audit", str(WEAK), "--probe", "no-such-probe"]) == 2


# --- curation signals: the reference fails, equivalent mutants, trusted candidates ---------------


def test_a_reference_that_fails_a_test_in_every_rerun_is_unreliable(grader: Grader) -> None:
    options = AuditOptions(mutants=False, probes=False, labelled=False, reruns=3, jobs=2)
    (audit,) = audit_tasks(load_task_set(REPO / "tests/fixtures/defective/reference-fails"), grader, options)
    assert audit.flakiness is not None and not audit.flakiness.flaky
    assert audit.reference_failures == ["tests.test_clamp::test_above_range_gives_hi"]
    assert audit.verdict().value == "unreliable"
    assert ("the reference fails 1 test(s) in every rerun: tests.test_clamp::test_above_range_gives_hi"
            in audit.findings())
    assert audit.to_dict()["reference_failures"] == ["tests.test_clamp::test_above_range_gives_hi"]


def test_without_reruns_the_mutation_baseline_shows_the_failing_reference(grader: Grader) -> None:
    (audit,) = audit_tasks(load_task_set(REPO / "tests/fixtures/defective/reference-fails"), grader,
                           MUTANTS_ONLY)
    assert audit.flakiness is None
    assert audit.verdict().value == "unreliable"
    assert ("the reference fails 1 test(s) in the baseline run: tests.test_clamp::test_above_range_gives_hi"
            in audit.findings())


DEAD_CODE = (
    "def total(values):\n"
    "    if False:\n"
    "        return -1\n"
    "    return sum(values)\n"
    "    print(values)\n"
)


def test_equivalent_mutants_are_reported_apart_and_not_counted(make_task: Any, grader: Grader) -> None:
    root = make_task(files={"solution/solution.py": DEAD_CODE})
    (audit,) = audit_tasks(load_task_set(root), grader, MUTANTS_ONLY)
    m = audit.mutation
    assert m is not None and m.score is not None
    assert {(e.line, e.status) for e in m.equivalent} == {
        (3, MutantStatus.EQUIVALENT), (5, MutantStatus.EQUIVALENT)}
    assert all(e.line in (3, 5) for e in m.equivalent)
    assert not any(r.line in (3, 5) for r in m.mutants)  # never graded
    assert m.score == 100.0 * m.killed / (m.killed + len(m.survived))
    doc = m.to_dict()
    assert {e["id"] for e in doc["equivalent"]} == {e.id for e in m.equivalent}
    assert {e["reason"] for e in doc["equivalent"]} == {"bytecode"}
    assert doc["total"] == len(m.mutants)


def test_a_task_graded_in_process_is_marked_as_trusting_its_candidate(
        make_task: Any, grader: Grader, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def in_process(doc: dict[str, Any]) -> None:
        doc["isolation"] = "in-process"

    trusting = make_task("set/a", mutate=in_process)
    options = AuditOptions(mutants=False, flaky=False, probes=False, labelled=False, jobs=2)
    (audit,) = audit_tasks(load_task_set(trusting), grader, options)
    assert audit.trusts_candidate
    assert audit.to_dict()["trusts_candidate"] is True and audit.to_dict()["isolation"] == "in-process"
    (default,) = audit_tasks(load_task_set(make_task("set/b")), grader, options)
    assert not default.trusts_candidate and default.to_dict()["isolation"] == "two-process"
    code = main(["audit", str(trusting), "--sandbox", BACKEND, "--no-mutants", "--no-flaky",
                 "--no-probes", "--json", str(tmp_path / "a.json")])
    assert code == 0  # a mark, not a finding
    captured = capsys.readouterr()
    assert "trusts its candidate" in captured.out + captured.err  # stderr after an earlier --json -
    assert json.loads((tmp_path / "a.json").read_text())["tasks"][0]["trusts_candidate"] is True


# A reference whose mutants survive in two ways: changes the tests' inputs never reach (a list
# of over 100 values), and a change to what it prints, which no test checks but which crosses
# back to the tests' process with every call.
OBSERVED = (
    "def total(values):\n"
    "    limit = 100\n"
    "    if len(values) > limit:\n"
    "        raise ValueError('too many values')\n"
    "    print('summing', 2 * len(values))\n"
    "    return sum(values)\n"
)


def test_survivors_that_answer_every_tested_call_as_the_reference_are_equivalent(
        make_task: Any, grader: Grader) -> None:
    root = make_task(files={"solution/solution.py": OBSERVED})
    options = AuditOptions(flaky=False, probes=False, labelled=False, jobs=2, max_mutants=None,
                           observed_equivalence=True)
    (audit,) = audit_tasks(load_task_set(root), grader, options)
    m = audit.mutation
    assert m is not None and m.score is not None
    observed = {e.line: e for e in m.equivalent if e.reason == "observed"}
    survivors = {s.line: s for s in m.survived}
    # `limit = 100` -> 101, `>` -> `>=`: no tested input has 100 values or more
    assert 2 in observed and 3 in observed, (observed, survivors)
    assert all(e.status is MutantStatus.EQUIVALENT and "identical" in e.message for e in observed.values())
    # the printed count differs on every tested input: a survivor, not equivalent
    assert 5 in survivors and 5 not in observed
    assert "observably different from the reference" in survivors[5].message
    # the bytecode ones are still told apart by their reason; none of them is counted
    assert all(e.reason in ("bytecode", "observed") for e in m.equivalent)
    assert not {e.id for e in m.equivalent} & {r.id for r in m.mutants}
    assert m.score == 100.0 * m.killed / (m.killed + len(m.survived))
    doc = m.to_dict()
    assert {e["id"]: e["reason"] for e in doc["equivalent"]} == {e.id: e.reason for e in m.equivalent}


def test_only_identical_traces_prove_equivalence(make_task: Any) -> None:
    from verify_cli.checks.audit.observed import Trace, _normalise, first_difference, traceable

    def in_process(doc: dict[str, Any]) -> None:
        doc["isolation"] = "in-process"

    assert traceable(load_task(make_task("a")))
    assert not traceable(load_task(make_task("b", mutate=in_process)))  # no stand-in, no trace
    # the candidate's releases of handles (its garbage collection) are not behaviour
    assert _normalise({"test": "t", "served": {"id": 3, "op": "release", "handles": [1]}}) is None
    assert _normalise({"test": "t", "served": {"id": 3, "op": "call"}}) == {"served": {"op": "call"}}
    ran = (("t::a", "passed"),)
    same = Trace(("x", "y"), ("t::a", "t::a"), ran)
    assert first_difference(same, Trace(("x", "y"), ("t::a", "t::a"), ran)) is None
    assert first_difference(same, Trace(("x", "z"), ("t::a", "t::a"), ran)) == "message 2 (in t::a) differs"
    assert first_difference(same, Trace(("x",), ("t::a",), ran)) is not None
    assert first_difference(same, Trace(("x", "y"), ("t::a", "t::a"), ())) is not None


def test_stdio_survivors_are_equivalent_only_when_every_case_prints_the_same(tmp_path: Path, grader: Grader) -> None:
    from verify_cli.importers.model import TaskDraft
    from verify_cli.importers.writer import write_task
    from verify_cli.tasks.model import TaskKind

    solution = ("import sys\nx = int(input())\nif x > 100:\n    x = 100\nprint(x * 2)\n"
                "print('read', x, file=sys.stderr)\n")
    files = {"starter/main.py": "", "solution/main.py": solution}
    for name, (given, expected) in {"one": ("1\n", "2\n"), "five": ("5\n", "10\n")}.items():
        files[f"hidden_tests/cases/{name}.in"], files[f"hidden_tests/cases/{name}.out"] = given, expected
    draft = TaskDraft(id="t/stdio", prompt="p", kind=TaskKind.STDIO, files=files, editable=["main.py"],
                      table={"program": "python main.py"}, wall_seconds=20.0)
    task = load_task(write_task(draft, tmp_path))
    options = AuditOptions(flaky=False, probes=False, labelled=False, jobs=2, max_mutants=None,
                           observed_equivalence=True)
    (audit,) = audit_tasks([task], grader, options)
    m = audit.mutation
    assert m is not None
    observed = {(e.line, e.description) for e in m.equivalent if e.reason == "observed"}
    assert (3, "replaced '>' with '>='") in observed  # no case reaches 100
    # what it writes to stderr differs on every case: not equivalent, though no case checks it
    stderr = [s for s in m.survived if s.line == 6]
    assert stderr and all("observably different" in s.message for s in stderr)
    assert not any(line == 6 for line, _ in observed)
