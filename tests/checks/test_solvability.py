"""check-tasks: sound tasks pass every check; each defective fixture is named for its defect."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from verify_cli.checks.cache import ResultCache
from verify_cli.checks.editable import editable_reach
from verify_cli.checks.report import CheckStatus, TaskReport, TaskVerdict
from verify_cli.checks.solvability import CheckOptions, Progress, check_tasks, evaluate
from verify_cli.grading import Grader, GradeResult, GradeStatus, Outcome, Phase, TestOutcome
from verify_cli.sandbox.base import RunResult, Sandbox, Verdict
from verify_cli.sandbox.kit.testing import FakeSandbox
from verify_cli.tasks import load_task, load_task_set
from verify_cli.tasks.model import Task

OPTIONS = CheckOptions(repeats=2, jobs=2)

#: Defective fixture -> (the check that must fail, a fragment of its message).
DEFECTS = {
    "reference-fails": ("reference-passes", "tests.test_clamp::test_above_range_gives_hi failed"),
    "starter-passes": ("starter-fails", "starter already passes all"),
    "flaky-test": ("flaky", "tests.test_dedupe::test_two_distinct_tags"),
    "missing-results": (
        "results",
        "no results file matching 'junit.xml' was written to $VERIFY_RESULTS_DIR",
    ),
    "schema-error": ("schema", "unknown field 'edtable'; did you mean 'editable'?"),
}


def check_folder(path: Path, sandbox: Sandbox, **kwargs: Any) -> list[TaskReport]:
    return check_tasks(load_task_set(path), Grader(sandbox), OPTIONS, **kwargs)


def test_defective_fixtures_are_named_for_their_defect(
    defective_tasks_dir: Path, copy_task: Any, process_sandbox: Sandbox, tmp_path: Path
) -> None:
    for name in DEFECTS:
        copy_task(defective_tasks_dir / name, f"set/{name}")
    reports = {Path(r.path).name: r for r in check_folder(tmp_path / "set", process_sandbox)}
    assert set(reports) == set(DEFECTS)
    wrong: dict[str, str] = {}
    for name, (check, fragment) in DEFECTS.items():
        report = reports[name]
        defects = {c.name: c.message for c in report.defects}
        if report.verdict is not TaskVerdict.DEFECTIVE or check not in defects:
            wrong[name] = f"expected {check} to fail, got {report.verdict.value}: {defects}"
        elif fragment not in defects[check]:
            wrong[name] = f"{check} message lacks {fragment!r}: {defects[check]!r}"
    assert wrong == {}


def test_defect_details(
    defective_tasks_dir: Path, copy_task: Any, process_sandbox: Sandbox
) -> None:
    """The schema defect is reported with file and pointer, and nothing is run for it."""
    root = copy_task(defective_tasks_dir / "schema-error")
    (report,) = check_folder(root, process_sandbox)
    (schema,) = report.checks
    assert schema.name == "schema"
    assert schema.status is CheckStatus.FAIL
    assert schema.message.startswith(
        f"{root / 'task.toml'}: /edtable: unknown field 'edtable'; did you mean 'editable'?"
    )
    assert report.runs == []


def test_sample_tasks_are_all_sound(sample_tasks_dir: Path, process_sandbox: Sandbox) -> None:
    reports = check_folder(sample_tasks_dir, process_sandbox)
    assert len(reports) >= 5
    verdicts = {
        r.task_id: (
            r.verdict.value,
            [
                f"{c.name}: {c.message}"
                for c in r.defects + r.warnings
                if c.status is not CheckStatus.WARN
            ],
        )
        for r in reports
    }
    assert verdicts == {r.task_id: ("sound", []) for r in reports}
    for r in reports:
        names = {c.name for c in r.checks}
        assert {"schema", "reference-passes", "starter-fails", "flaky", "headroom"} <= names


def test_sound_task_report(make_task: Any, process_sandbox: Sandbox) -> None:
    progress: list[Progress] = []
    (report,) = check_folder(make_task(fast=True), process_sandbox, on_progress=progress.append)
    assert report.verdict is TaskVerdict.SOUND
    assert report.task_id == "demo/total"
    assert {c.name: c.status for c in report.checks} == {
        "schema": CheckStatus.PASS,
        "flaky": CheckStatus.PASS,
        "reference-passes": CheckStatus.PASS,
        "starter-fails": CheckStatus.PASS,
        "editable": CheckStatus.PASS,
        "headroom": CheckStatus.PASS,
    }
    # Two reference runs (seeds 1, 2) and one starter run, each with per-test outcomes.
    assert sorted((r["phase"], r["seed"]) for r in report.runs) == [
        ("reference", 1),
        ("reference", 2),
        ("starter", None),
    ]
    assert all(r["tests"] for r in report.runs)
    assert [p.done for p in progress] == [1, 2, 3]
    assert {p.total for p in progress} == {3}
    assert report.reference_seconds is not None


def test_reports_keep_the_order_of_the_items(
    make_task: Any, process_sandbox: Sandbox, tmp_path: Path
) -> None:
    def other_id(doc: dict[str, Any]) -> None:
        doc["id"] = "demo/a-second"

    make_task("set/z-first", fast=True)
    make_task("set/b-broken", mutate=lambda doc: doc.pop("language"))
    make_task("set/c-third", mutate=other_id, fast=True)
    reports = check_folder(tmp_path / "set", process_sandbox)
    assert [Path(r.path).name for r in reports] == ["b-broken", "c-third", "z-first"]
    assert [r.verdict for r in reports] == [
        TaskVerdict.DEFECTIVE,
        TaskVerdict.SOUND,
        TaskVerdict.SOUND,
    ]


def graded(phase: Phase, wall: float, *, passed: bool = True, seed: int | None = 1) -> GradeResult:
    outcome = Outcome.PASSED if passed else Outcome.FAILED
    return GradeResult(
        task_id="demo/total",
        phase=phase,
        status=GradeStatus.GRADED,
        score=1.0 if passed else 0.0,
        passed=passed,
        tests=(TestOutcome("t::x", outcome),),
        seed=seed,
        run=RunResult(Verdict.OK if passed else Verdict.NONZERO_EXIT, "fixed", wall_seconds=wall),
    )


def test_headroom_warns_but_stays_sound(make_task: Any) -> None:
    task = load_task(make_task())  # wall limit 30 s
    slow = [graded(Phase.REFERENCE, 11.0, seed=1), graded(Phase.REFERENCE, 2.0, seed=2)]
    starter = graded(Phase.STARTER, 1.0, passed=False, seed=None)
    checks = {c.name: c for c in evaluate(task, slow, starter)}
    assert checks["headroom"].status is CheckStatus.WARN
    assert (
        checks["headroom"].message == "reference took 11.00s of a 30s limit (less than 3x headroom)"
    )
    report = TaskReport("demo/total", str(task.root), "coding", "python", list(checks.values()))
    assert report.verdict is TaskVerdict.SOUND
    fast = [graded(Phase.REFERENCE, 9.0, seed=1), graded(Phase.REFERENCE, 2.0, seed=2)]
    assert {c.name: c.status for c in evaluate(task, fast, starter)}["headroom"] is CheckStatus.PASS


def test_a_test_missing_from_one_repeat_is_flaky(make_task: Any) -> None:
    task = load_task(make_task())
    first = graded(Phase.REFERENCE, 1.0, seed=1)
    second = GradeResult(
        task_id="demo/total",
        phase=Phase.REFERENCE,
        status=GradeStatus.GRADED,
        score=1.0,
        passed=True,
        tests=(TestOutcome("t::y", Outcome.PASSED),),
        seed=2,
        run=RunResult(Verdict.OK, "fixed", wall_seconds=1.0),
    )
    starter = graded(Phase.STARTER, 1.0, passed=False, seed=None)
    checks = {c.name: c for c in evaluate(task, [first, second], starter)}
    assert checks["flaky"].status is CheckStatus.FAIL
    assert "t::x (missing/passed)" in checks["flaky"].message
    assert checks["reference-passes"].status is CheckStatus.FAIL


def test_infrastructure_failure_concludes_nothing(make_task: Any, tmp_path: Path) -> None:
    cache = ResultCache(tmp_path / "cache", "check-tasks")
    (report,) = check_folder(make_task(), FakeSandbox.failing("no daemon"), cache=cache)
    assert report.verdict is TaskVerdict.ERROR
    statuses = {c.name: c.status for c in report.checks}
    assert statuses["infrastructure"] is CheckStatus.ERROR
    assert statuses["starter-fails"] is CheckStatus.ERROR
    assert "reference-passes" not in statuses  # nothing graded, nothing concluded
    assert "2 of 2 reference runs failed in the sandbox: sandbox infra_error: no daemon" in next(
        c.message for c in report.checks if c.name == "infrastructure"
    )
    # An error is never cached: the next run tries again.
    assert not any((tmp_path / "cache").rglob("*.json"))


def test_report_round_trips_through_dict(make_task: Any, process_sandbox: Sandbox) -> None:
    (report,) = check_folder(make_task(fast=True), process_sandbox)
    again = TaskReport.from_dict(report.to_dict())
    assert again.to_dict() == report.to_dict()
    assert again.verdict is report.verdict


def test_an_editable_glob_reaching_tests_or_harness_files_is_a_warning(
    make_task: Any, process_sandbox: Sandbox
) -> None:
    def broad(doc: dict[str, Any]) -> None:
        doc["editable"] = ["**/*.py"]

    (report,) = check_folder(make_task(mutate=broad, fast=True), process_sandbox)
    assert report.verdict is TaskVerdict.SOUND  # the grader refuses those files: a warning only
    editable = next(c for c in report.checks if c.name == "editable")
    assert editable.status is CheckStatus.WARN
    # Only what is true of the task: its own test files, no harness file it does not have.
    assert editable.message == (
        "editable glob '**/*.py' matches test files (tests/check.py), which the grader "
        "always takes from the task")


def test_a_harness_file_the_solution_ships_is_named_and_no_other(make_task: Any) -> None:
    """A wildcard that could match a harness file is not a mistake (the grader refuses it); one
    that matches a harness file the solution really ships is: that solution fails."""
    def wide(doc: dict[str, Any]) -> None:
        doc["editable"] = ["*.py"]

    plain = load_task(make_task("plain", mutate=wide))
    assert editable_reach(plain) == []
    shipped = make_task("shipped", mutate=wide)
    (shipped / "solution" / "sitecustomize.py").write_text("import os\n")
    (reach,) = editable_reach(load_task(shipped))
    assert reach.refused_harness == ("sitecustomize.py",) and reach.test_files == ()
    assert "harness files of the task's own starter or solution (sitecustomize.py)" in reach.describe()
    assert "conftest.py" not in reach.describe() and "usercustomize" not in reach.describe()


def test_an_editable_harness_file_named_exactly_is_taken_and_warned_about(defective_tasks_dir: Path) -> None:
    (reach,) = editable_reach(load_task(defective_tasks_dir / "editable-conftest"))
    assert reach.glob == "conftest.py" and reach.admitted_harness == ("conftest.py",)
    assert "which the grader TAKES from the candidate" in reach.describe()


def test_sample_tasks_have_narrow_editable_globs(sample_tasks_dir: Path) -> None:
    for task in load_task_set(sample_tasks_dir):
        assert isinstance(task, Task)
        reach = editable_reach(task)
        if task.test.has_test_lists:
            # A repository task's globs cover its source tree ("pkg/**/*.py"): they reach harness
            # file names, which the grader refuses from a wildcard, but never a test file and
            # never a harness file the grader would take.
            assert all(not r.test_files and not r.admitted_harness and r.refused_harness for r in reach), task.id
            continue
        assert reach == [], task.id
