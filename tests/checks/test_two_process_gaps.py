"""The honest verdict: a reference that fails only two-process is not called defective.

Pure: the graded runs are built here from the messages real two-process runs give (captured from
the parity corpus), so each rule of :func:`evaluate` and :mod:`two_process_gaps` is shown alone.
The same rules on real runs: tests/grading/test_parity_corpus.py.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from verify_cli.checks.report import CheckStatus, TaskReport, TaskVerdict
from verify_cli.checks.solvability import SAME_ORDER_REPEATS, CheckOptions, check_tasks, evaluate, first_line
from verify_cli.checks.two_process_gaps import recognise_idiom
from verify_cli.grading import GradeResult, GradeStatus, Outcome, Phase, TestOutcome
from verify_cli.grading.junit import parse_junit
from verify_cli.sandbox.base import RunResult, Verdict
from verify_cli.tasks import load_task
from verify_cli.tasks.model import Isolation, Task

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "parity"
RANGE_FAILURE = ("TypeError: 'TrustedHandle' object is not iterable\n"
                 "in the candidate's code: /workspace/summing.py:2 in total: return sum(numbers)\n"
                 "in the test: tests/test_summing.py:5: assert total(range(5)) == 10")
RANGE_TEST, LIST_TEST = "tests.test_summing::test_range", "tests.test_summing::test_list"


def run(task: Task, outcomes: dict[str, Outcome], *, isolation: str = "two-process", seed: int = 1,
        message: str = RANGE_FAILURE, phase: Phase = Phase.REFERENCE) -> GradeResult:
    tests = tuple(TestOutcome(tid, o, message="" if o.ok else message) for tid, o in outcomes.items())
    passed = all(t.outcome.ok for t in tests)
    return GradeResult(task_id=task.id, phase=phase, status=GradeStatus.GRADED, score=float(passed),
                       passed=passed, tests=tests, seed=seed, isolation=isolation,
                       run=RunResult(Verdict.OK if passed else Verdict.NONZERO_EXIT, "bwrap", wall_seconds=0.5))


@pytest.fixture
def task() -> Task:
    return load_task(CORPUS / "iter-range")


def report(task: Task, checks: list) -> TaskReport:  # type: ignore[type-arg]
    return TaskReport(task.id, str(task.root), task.domain, task.language, checks)


FAILS_RANGE = {RANGE_TEST: Outcome.FAILED, LIST_TEST: Outcome.PASSED}
PASSES = {RANGE_TEST: Outcome.PASSED, LIST_TEST: Outcome.PASSED}


def test_a_test_passing_in_process_is_not_gradeable_two_process_never_reference_fails(task: Task) -> None:
    refs = [run(task, FAILS_RANGE, seed=s) for s in (1, 2, 3)]
    starter = run(task, {RANGE_TEST: Outcome.FAILED}, phase=Phase.STARTER)
    checks = evaluate(task, refs, starter, run(task, PASSES, isolation="in-process"))
    by_name = {c.name: c for c in checks}
    assert by_name["reference-passes"].status is CheckStatus.PASS
    gap = by_name["two-process"]
    assert gap.status is CheckStatus.NOT_GRADEABLE
    assert gap.message.startswith("not gradeable two-process: the test uses an iterable or iterator "
                                  "passed to the candidate (range, iter()")
    assert RANGE_TEST in gap.message and "/workspace/summing.py:2 in total" in gap.message
    assert 'isolation = "in-process"' in gap.message
    assert "reference fails" not in " ".join(c.message for c in checks)
    assert report(task, checks).verdict is TaskVerdict.NOT_GRADEABLE


def test_without_the_in_process_run_it_is_still_reference_fails(task: Task) -> None:
    refs = [run(task, FAILS_RANGE)]
    checks = {c.name: c for c in evaluate(task, refs, run(task, FAILS_RANGE, phase=Phase.STARTER))}
    assert checks["reference-passes"].status is CheckStatus.FAIL
    # The table shows the first line of the first failure, and the candidate's frame.
    assert (f"{RANGE_TEST} failed: TypeError: 'TrustedHandle' object is not iterable "
            "(candidate's code: /workspace/summing.py:2 in total") in checks["reference-passes"].message


def test_a_test_failing_in_process_too_is_the_references_fault(task: Task) -> None:
    both = {RANGE_TEST: Outcome.FAILED, LIST_TEST: Outcome.FAILED}
    in_process = run(task, {RANGE_TEST: Outcome.PASSED, LIST_TEST: Outcome.FAILED}, isolation="in-process",
                     message="assert 0 == 3")
    checks = {c.name: c for c in evaluate(task, [run(task, both)], run(task, both, phase=Phase.STARTER),
                                          in_process)}
    assert checks["reference-passes"].status is CheckStatus.FAIL
    assert "in-process too" in checks["reference-passes"].message
    assert LIST_TEST in checks["reference-passes"].message
    assert RANGE_TEST not in checks["reference-passes"].message  # that one is the gap's
    assert checks["two-process"].status is CheckStatus.NOT_GRADEABLE
    assert report(task, list(checks.values())).verdict is TaskVerdict.DEFECTIVE


def test_a_test_that_passes_in_some_two_process_run_is_flaky_not_a_gap(task: Task) -> None:
    refs = [run(task, FAILS_RANGE, seed=1), run(task, PASSES, seed=2)]
    checks = {c.name: c for c in evaluate(task, refs, run(task, FAILS_RANGE, phase=Phase.STARTER),
                                          run(task, PASSES, isolation="in-process"))}
    assert checks["flaky"].status is CheckStatus.FAIL
    assert checks["reference-passes"].status is CheckStatus.FAIL
    assert "two-process" not in checks


@pytest.mark.parametrize(("folder", "test_id", "message", "fragment"), [
    ("monkeypatch-setenv", "tests.test_settings::test_from_environment", "assert 30 == 5", "environment"),
    ("patched-stdin", "tests.test_stdin_sum::test_stdin", "assert 0 == 6", "sys.stdin"),
    ("patched-argv", "tests.test_cli::test_argv", "assert 2 == 8", "sys.argv"),
    ("mutate-list-arg", "tests.test_totals::test_appends_in_place", "assert [1, 2, 3] == [1, 2, 3, 6]",
     "changes in place"),
    ("subclass-candidate-class", "tests.test_greeter::test_override_is_used",
     "AssertionError: assert 'Hello, world!' == 'Hello, matey!'", "subclassing a candidate class"),
    ("callback-exception", "tests.test_applying::test_callback_exception_propagates", "Exception: 7",
     "the test's own exception"),
    ("enum-identity", "tests.test_colours::test_identity",
     "AssertionError: assert <Colour.RED: 'red'> is <Colour.RED: 'red'>", "identity (`is`)"),
])
def test_the_idiom_is_named_from_the_message_or_the_tests_source(
        folder: str, test_id: str, message: str, fragment: str) -> None:
    idiom, remedy = recognise_idiom(load_task(CORPUS / folder), test_id, message)
    assert fragment in idiom
    assert 'isolation = "in-process"' in remedy


def test_a_value_type_gets_the_codec_remedy() -> None:
    message = "TypeError: float() argument must be a string or a real number, not 'TrustedHandle'"
    idiom, remedy = recognise_idiom(load_task(CORPUS / "numpy-arrays"),
                                    "tests.test_normalise::test_array_in_and_out", message)
    assert "numpy" in idiom and remedy.startswith("register a by-value codec")


def test_a_timeout_with_a_thread_pool_names_the_threads() -> None:
    idiom, _ = recognise_idiom(load_task(CORPUS / "thread-pool-callback"),
                               "tests.test_pool::test_callbacks_from_threads", "", timed_out=True)
    assert "candidate's threads" in idiom


CUT_XML = b"""<?xml version="1.0" encoding="utf-8"?><testsuites><testsuite name="pytest"><testcase
classname="tests.test_lines" name="test_open_file"><failure message="TypeError: 'TrustedHandle' object
is not iterable&#10;in the candidate process:&#10;Traceback (most recent call last):&#10;  File
&quot;/opt/verify-candidate/verify_peer.py&quot;, line 154, in _serve&#10;[+6 more lines; full report in element
text]">    def test_open_file(tmp_path):
&gt;           assert count_lines(fh) == 3

tests/test_lines.py:8:
_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _
/opt/verify-harness/verify_standin.py:324: in __call__
    return _call("call", _ref(self._desc), args, kwargs)
&gt;           raise rebuild_exception(e.payload) from None
E           TypeError: 'TrustedHandle' object is not iterable
E           in the candidate process:
E           Traceback (most recent call last):
E             File "/opt/verify-candidate/verify_peer.py", line 154, in _serve
E               result = self._dispatch(op, msg)
E                        ^^^^^^^^^^^^^^^^^^^^^^^
E             File "/opt/verify-candidate/verify_candidate_server.py", line 188, in _dispatch
E               return target(*args, **kwargs)
E             File "/workspace/lines.py", line 2, in count_lines
E               return sum(1 for line in fh if line.strip())
E                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
E             File "&lt;frozen os&gt;", line 679, in __getitem__
E           TypeError: 'TrustedHandle' object is not iterable

/opt/verify-harness/verify_standin.py:208: TypeError</failure></testcase></testsuite></testsuites>"""


def test_a_failure_cut_by_pytest_shows_the_candidates_frame_and_not_the_harness() -> None:
    (outcome,) = parse_junit(CUT_XML.replace(b"object\nis", b"object is").replace(b"File\n&quot;", b"File &quot;")
                             .replace(b"element\ntext", b"element text"))
    assert outcome.message.splitlines() == [
        "TypeError: 'TrustedHandle' object is not iterable",
        "in the candidate's code: /workspace/lines.py:2 in count_lines: return sum(1 for line in fh if line.strip())",
        "  raised in <frozen os>:679 in __getitem__",
        "in the test: tests/test_lines.py:8: assert count_lines(fh) == 3",
    ]
    assert "verify_" not in outcome.message
    assert first_line(outcome.message) == (
        "TypeError: 'TrustedHandle' object is not iterable (candidate's code: /workspace/lines.py:2 in "
        "count_lines: return sum(1 for line in fh if line.strip()))")


def test_the_junit_report_fails_a_task_not_gradeable_two_process(task: Task) -> None:
    from xml.etree import ElementTree as ET

    from verify_cli.report.files import junit_document

    refs = [run(task, FAILS_RANGE)]
    checks = evaluate(task, refs, run(task, FAILS_RANGE, phase=Phase.STARTER),
                      run(task, PASSES, isolation="in-process"))
    root = ET.fromstring(junit_document([report(task, checks)]))
    (failure,) = root.iter("failure")
    assert failure.get("type") == "NotGradeableTwoProcess" and root.get("failures") == "1"
    assert (failure.text or "").startswith("two-process: not gradeable two-process: the test uses an iterable")


class _ScriptedGrader:
    """Grades by script (the scheduling of check_tasks is under test, not a sandbox): two-process
    reference runs fail RANGE_TEST for the seeds in ``failing`` and pass otherwise; the in-process
    re-run passes; the starter fails."""

    def __init__(self, failing: set[int], *, by_chance: bool = False) -> None:
        self.failing = failing
        #: A random flake: a failing seed fails its first two-process run only (re-run under the
        #: same seed, the test order, it passes); else each of its two-process runs fails.
        self.by_chance = by_chance
        self.requests: list[tuple[str, str, int | None]] = []

    def grade_many(self, requests: list[Any], jobs: int = 1) -> Iterator[GradeResult]:
        for req in requests:
            mode = "in-process" if req.task.isolation is Isolation.IN_PROCESS else "two-process"
            again = (req.phase.value, mode, req.seed) in self.requests
            self.requests.append((req.phase.value, mode, req.seed))
            if req.phase is Phase.STARTER:
                outcomes = {RANGE_TEST: Outcome.FAILED}
            elif mode == "in-process" or req.seed not in self.failing or (self.by_chance and again):
                outcomes = PASSES
            else:
                outcomes = FAILS_RANGE
            yield dataclasses.replace(run(req.task, outcomes, isolation=mode, seed=req.seed or 1,
                                          phase=req.phase), label=req.label)


def test_a_flaky_test_that_fails_the_first_wave_and_passes_in_process_is_flaky_not_a_gap(task: Task) -> None:
    """One run in four at random can fail all three first-wave runs and pass the one in-process
    re-run: the rest of the repeats are made before a task is called not gradeable two-process,
    and a test that passes one of them is flaky (defective), as a CI run of the one-in-four
    fixture showed (it was called not gradeable)."""
    grader = _ScriptedGrader(failing={1, 2, 3}, by_chance=True)
    (rep,) = check_tasks([task], grader, CheckOptions())
    assert rep.verdict is TaskVerdict.DEFECTIVE, [(c.name, c.status, c.message) for c in rep.checks]
    assert {c.name: c.status for c in rep.checks}["flaky"] is CheckStatus.FAIL
    refs = sorted(seed for phase, mode, seed in grader.requests if phase == "reference" and mode == "two-process")
    # Every repeat was made, and each failing seed re-run two-process SAME_ORDER_REPEATS times
    # (they passed: chance, not order).
    assert refs == sorted([*range(1, 12), *[1, 2, 3] * SAME_ORDER_REPEATS])


def test_failures_the_test_order_repeats_two_process_only_are_the_graders(task: Task) -> None:
    """The same failing seeds, but each re-run under its seed fails again two-process and passes
    in-process: an order-dependent failure of two-process grading (a module constant restored
    wrongly by a monkeypatch undo once was one), not a flaky task."""
    grader = _ScriptedGrader(failing={1, 2, 3})
    (rep,) = check_tasks([task], grader, CheckOptions())
    checks = {c.name: c for c in rep.checks}
    assert "flaky" not in checks or checks["flaky"].status is CheckStatus.PASS, checks
    assert checks["grader-nondeterminism"].status is CheckStatus.NOT_GRADEABLE
    assert rep.verdict is TaskVerdict.NOT_GRADEABLE


def test_a_gap_in_every_repeat_is_not_gradeable(task: Task) -> None:
    grader = _ScriptedGrader(failing=set(range(1, 12)))
    (rep,) = check_tasks([task], grader, CheckOptions())
    assert rep.verdict is TaskVerdict.NOT_GRADEABLE, [(c.name, c.status, c.message) for c in rep.checks]
    assert [m for _, m, _ in grader.requests].count("in-process") == 1


def test_a_reference_that_passes_the_first_wave_makes_no_in_process_run(task: Task) -> None:
    grader = _ScriptedGrader(failing=set())
    (rep,) = check_tasks([task], grader, CheckOptions())
    assert rep.verdict is TaskVerdict.SOUND, [(c.name, c.status, c.message) for c in rep.checks]
    assert [m for _, m, _ in grader.requests].count("in-process") == 0
