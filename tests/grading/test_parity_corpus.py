"""The parity corpus (tests/fixtures/parity/): ordinary pytest idioms, graded both ways.

Every task's reference is correct. In-process every one must be sound. Two-process each must be
sound or get check-tasks' honest verdict, "not gradeable two-process: the test uses X", with X
the task's own idiom; never "reference fails" for a reference that passes in-process. Which
idioms pass two-process depends on the boundary (verify_cli/harness/), so this asserts the rule,
not a list: only a few idioms that pass today are pinned, and the sound ratio is printed.

One warm bwrap Grader serves the module: check-tasks with one repeat (the reference and the
starter per task, plus the one in-process re-run of each reference that fails two-process),
then the same with every task declared in-process.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from verify_cli.checks.report import CheckStatus, TaskReport, TaskVerdict
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.grading.grader import Grader
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Isolation, Task

CORPUS = Path(__file__).resolve().parent.parent / "fixtures" / "parity"
#: A correct reference no boundary can grade two-process (it compares process ids).
NOT_TWO_PROCESS = Path(__file__).resolve().parent.parent / "fixtures" / "not_two_process" / "process-identity"
PID_TEST = "tests.test_workers::test_named_after_this_process"
OPTIONS = CheckOptions(repeats=1, jobs=2, first_wave=1)

#: Each task -> a fragment its idiom's name must hold where it is not gradeable two-process
#: ("": the idiom passes two-process today; should it stop, any recognised idiom will do).
IDIOMS = {
    "approx-floats": "", "nested-data": "", "parametrize": "", "closure-returned": "",
    "sorted-key-callback": "", "functools-partial": "", "property-setter": "", "raises-match": "",
    "set-result": "", "stdlib-value-types": "", "module-global-counter": "", "class-attribute": "",
    "iterable-class": "", "generator-send": "", "exception-base-class": "",
    "async-await": "async def", "bool-container": "truth value", "callback-exception": "own exception",
    "caplog": "caplog", "capsys-print": "capsys", "context-manager-exit": "__exit__",
    "counter-vs-dict": "collections type", "dataclass-asdict": "dataclasses",
    "dataclass-frozen": "FrozenInstanceError", "dataclass-replace": "dataclasses",
    "defaultdict-vs-dict": "collections type", "enum-identity": "identity", "enum-iteration": "Enum",
    "exception-attributes": "attributes of a candidate exception", "file-object": "file object",
    "stringio": "file object", "fixture-candidate-object": "identity",
    "generator-returned": "isgenerator", "isinstance-candidate-class": "type of a candidate object",
    "iter-genexp": "iterable or iterator", "iter-iterator": "iterable or iterator",
    "iter-map-zip": "iterable or iterator", "iter-range": "iterable or iterator",
    "mock-patch-module-func": "patch of the candidate module", "module-version": "__version__",
    "monkeypatch-chdir": "working directory", "monkeypatch-setattr-module": "patch of the candidate module",
    "monkeypatch-setenv": "environment", "os-environ": "environment",
    "mutate-dict-arg": "changes in place", "mutate-list-arg": "changes in place",
    "numpy-arrays": "numpy", "pandas-dataframes": "pandas", "ordereddict": "collections type",
    "patched-argv": "sys.argv", "patched-stdin": "sys.stdin", "pickle-roundtrip": "pickling",
    "random-seed": "random", "sentinel-identity": "identity", "slicing": "slic",
    "subclass-candidate-class": "subclassing", "thread-pool-callback": "threads",
    "tmp-path-written": "tmp_path",
}

#: Idioms that pass two-process today: a floor, not the list of what passes.
SOUND_TODAY = ("parametrize", "raises-match", "closure-returned", "sorted-key-callback", "property-setter")


def corpus() -> list[Task]:
    return [load_task(p.parent) for p in sorted(CORPUS.glob("*/task.toml"))]


@pytest.fixture(scope="module")
def reports() -> Iterator[tuple[dict[str, TaskReport], dict[str, TaskReport]]]:
    """(two-process reports, in-process reports) by task folder name."""
    tasks = corpus()
    in_process = [dataclasses.replace(t, isolation=Isolation.IN_PROCESS) for t in tasks]
    with create_sandbox("bwrap") as box, Grader(box, warm=True) as grader:
        two = check_tasks(tasks, grader, OPTIONS)
        one = check_tasks(in_process, grader, OPTIONS)
    name = {t.id: t.root.name for t in tasks}
    yield {name[r.task_id]: r for r in two}, {name[r.task_id]: r for r in one}


def test_the_corpus_covers_its_idioms() -> None:
    names = {t.root.name for t in corpus()}
    assert len(names) >= 45
    assert names == set(IDIOMS)


@pytest.mark.bwrap
@pytest.mark.slow
def test_every_reference_is_sound_in_process(
        reports: tuple[dict[str, TaskReport], dict[str, TaskReport]]) -> None:
    _, one = reports
    wrong = {n: [c.to_dict() for c in r.checks if c.status is not CheckStatus.PASS]
             for n, r in one.items() if r.verdict is not TaskVerdict.SOUND}
    assert wrong == {}
    assert all(r.isolation == "in-process" for r in one.values())


@pytest.mark.bwrap
@pytest.mark.slow
def test_two_process_is_sound_or_names_the_idiom(
        reports: tuple[dict[str, TaskReport], dict[str, TaskReport]],
        record_property: pytest.RecordProperty) -> None:
    two, one = reports
    wrong: dict[str, str] = {}
    for name, report in sorted(two.items()):
        assert report.isolation == "two-process", name
        if report.verdict is TaskVerdict.SOUND:
            continue
        defects = [f"{c.name}: {c.message}" for c in report.defects]
        if one[name].verdict is TaskVerdict.SOUND and any("reference fails" in d for d in defects):
            wrong[name] = f"'reference fails' for a reference sound in-process: {defects}"
            continue
        if report.verdict is not TaskVerdict.NOT_GRADEABLE:
            wrong[name] = f"{report.verdict.value}: {defects}"
            continue
        (gap,) = report.gaps
        fragment = IDIOMS[name]
        if not gap.message.startswith("not gradeable two-process: the test uses ") or (
                fragment and fragment not in gap.message) or 'isolation = "in-process"' not in gap.message:
            wrong[name] = f"idiom not named ({fragment!r} expected): {gap.message}"
        if "something two-process grading does not carry" in gap.message:
            wrong[name] = f"idiom not recognised: {gap.message}"
    sound = sum(r.verdict is TaskVerdict.SOUND for r in two.values())
    ratio = sound / len(two)
    record_property("two_process_sound_ratio", f"{ratio:.3f}")
    print(f"\nparity corpus: {sound} of {len(two)} references sound two-process ({ratio:.0%}); "
          f"the rest not gradeable two-process with the idiom named")
    assert wrong == {}
    assert {n for n in SOUND_TODAY if two[n].verdict is TaskVerdict.SOUND} == set(SOUND_TODAY)


@pytest.mark.bwrap
def test_audit_counts_a_two_process_gap_apart_from_reference_failures() -> None:
    """audit re-runs a reference that failed two-process once in-process, like check-tasks."""
    from verify_cli.checks.audit.model import AuditOptions
    from verify_cli.checks.audit.run import audit_tasks

    options = AuditOptions(mutants=False, probes=False, labelled=False, reruns=2)
    with create_sandbox("bwrap") as box, Grader(box) as grader:
        (audit,) = audit_tasks([load_task(NOT_TWO_PROCESS)], grader, options)
    assert audit.reference_failures == []
    assert [g.test_id for g in audit.two_process_gaps] == [PID_TEST]
    (finding,) = audit.findings()
    assert finding.startswith("not gradeable two-process: 1 test(s) pass in-process and fail only "
                              "two-process; the test uses the test's own process identity (os.getpid)")
    assert audit.to_dict()["not_gradeable_two_process"] is True


@pytest.mark.bwrap
def test_check_tasks_exits_4_for_a_task_not_gradeable_two_process(
        capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    from verify_cli.cli.app import main
    from verify_cli.errors import ExitCode

    code = main(["check-tasks", str(NOT_TWO_PROCESS), "--sandbox", "bwrap", "-n", "1",
                 "--no-cache", "--json", str(tmp_path / "report.json")])
    assert code == ExitCode.NOT_GRADEABLE == 4
    out = capsys.readouterr().out
    assert "not-gradeable-two-process" in out and "1 not gradeable two-process" in out
    assert "reference fails" not in out
    report = json.loads((tmp_path / "report.json").read_text())
    assert report["summary"]["not-gradeable-two-process"] == 1
    (task,) = report["tasks"]
    gap = next(c for c in task["checks"] if c["name"] == "two-process")
    assert gap["status"] == "not-gradeable" and PID_TEST in gap["message"]
