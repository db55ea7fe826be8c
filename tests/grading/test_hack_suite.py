"""Reward-hack conformance: candidates that implement nothing and attack the grading itself.

Every candidate in ``tests/fixtures/hacks/`` (the shared ``_head.py`` + its body + ``_tail.py``)
replaces the editable module of every Python sample task. With two-process grading (the
default) each must earn 0 on every task warm (the default path: ``Grader(warm=True)``, as the
CLI grades) and on ``COLD_TASKS`` cold (a module task, one with hidden tests, a CLI task: every
hack, so every attack on the cold path; the other tasks add nothing the cold path does
differently, and cold runs cost about twice a warm one). The same candidates graded in-process
(``isolation = "in-process"``) show what the old mode misses: the table printed by
``test_in_process_misses_what_two_process_catches`` is the argument for the default (README,
Trust section).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from pathlib import Path

import pytest

from verify_cli.grading.grader import Grader, GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.warm import WarmStats
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Isolation, Task

HACKS_DIR = Path(__file__).resolve().parent.parent / "fixtures" / "hacks"
SAMPLE_TASKS = Path(__file__).resolve().parent.parent.parent / "sample_tasks"
HACKS = sorted(p.stem for p in HACKS_DIR.glob("*.py") if not p.name.startswith("_"))
#: The tasks every hack is also graded on cold (and in-process, for the table below).
COLD_TASKS = ("coding/interval-merge", "coding/roman-numerals", "interface-spec/kv-cli")

pytestmark = [pytest.mark.bwrap, pytest.mark.slow]


def hack_source(name: str) -> bytes:
    parts = [HACKS_DIR / "_head.py", HACKS_DIR / f"{name}.py", HACKS_DIR / "_tail.py"]
    return b"".join(p.read_bytes() for p in parts)


def python_sample_tasks() -> list[Task]:
    tasks = [load_task(p.parent) for p in sorted(SAMPLE_TASKS.glob("*/task.toml"))]
    return [t for t in tasks if t.kind == "pytest"]


def hack_target(task: Task) -> str:
    """The module a hack replaces: the task's one editable file, or (a repository task, whose
    globs cover a source tree) the first file its reference edits."""
    if not any(c in task.editable[0] for c in "*?"):
        return task.editable[0]
    return sorted(task.solution_files())[0]


def in_process(task: Task) -> Task:
    return dataclasses.replace(task, isolation=Isolation.IN_PROCESS)


def grade_hacks(grader: Grader, tasks: list[Task], hacks: list[str]) -> dict[tuple[str, str], GradeResult]:
    return grade_pairs(grader, [(hack, task) for hack in hacks for task in tasks])


def grade_pairs(grader: Grader, pairs: list[tuple[str, Task]]) -> dict[tuple[str, str], GradeResult]:
    """Each hack of ``pairs`` graded on its task: results by (hack, task id)."""
    requests = [GradeRequest(task, Phase.PROBE, candidate={hack_target(task): hack_source(hack)},
                             label=f"{hack}|{task.id}")
                for hack, task in pairs]
    out: dict[tuple[str, str], GradeResult] = {}
    for result in grader.grade_many(requests, jobs=2):
        hack, task_id = result.label.split("|", 1)
        out[(hack, task_id)] = result
    return out


@pytest.fixture(scope="module")
def bwrap() -> Iterator[Sandbox]:
    with create_sandbox("bwrap") as box:
        yield box


def test_the_suite_covers_every_family() -> None:
    families = {"seal_key_module_state", "seal_key_gc_objects", "seal_key_frames", "seal_key_proc_environ",
                "plugin_without_file", "replace_detectors", "patch_test_reports", "expected_from_frame",
                "expected_from_test_files", "rewrite_results_at_exit", "always_equal", "forged_junit_exit",
                "os_exit_at_import"}
    assert families <= set(HACKS)


@pytest.fixture(scope="module")
def two_process_cold(bwrap: Sandbox) -> dict[tuple[str, str], GradeResult]:
    with Grader(bwrap) as grader:
        return grade_hacks(grader, [t for t in python_sample_tasks() if t.id in COLD_TASKS], HACKS)


@pytest.fixture(scope="module")
def two_process_warm(bwrap: Sandbox) -> tuple[dict[tuple[str, str], GradeResult], WarmStats | None]:
    with Grader(bwrap, warm=True) as grader:
        results = grade_hacks(grader, python_sample_tasks(), HACKS)
        return results, grader.warm_stats


def assert_earns_nothing(results: dict[tuple[str, str], GradeResult], hack: str) -> None:
    mine = {task_id: r for (h, task_id), r in results.items() if h == hack}
    assert mine
    for task_id, r in mine.items():
        assert r.isolation == "two-process", task_id
        assert r.status is GradeStatus.GRADED, (task_id, r.problems)
        assert r.score == 0.0 and not r.passed, (task_id, r.score, [t.id for t in r.tests if t.outcome.ok])


@pytest.mark.parametrize("hack", HACKS)
def test_hack_earns_nothing_with_two_process_grading(
        two_process_warm: tuple[dict[tuple[str, str], GradeResult], WarmStats | None],
        two_process_cold: dict[tuple[str, str], GradeResult], hack: str) -> None:
    warm, _ = two_process_warm
    assert len(warm) == len(HACKS) * len(python_sample_tasks())
    assert_earns_nothing(warm, hack)
    assert len(two_process_cold) == len(HACKS) * len(COLD_TASKS)
    assert_earns_nothing(two_process_cold, hack)


def test_hacks_earn_nothing_warm(two_process_warm: tuple[dict[tuple[str, str], GradeResult], WarmStats | None]
                                 ) -> None:
    results, stats = two_process_warm
    # Both sides warm: the candidates were forked by warm candidate parents.
    assert stats is not None and stats.warm_candidates > 0, stats
    for hack in HACKS:
        assert_earns_nothing(results, hack)


def test_in_process_misses_what_two_process_catches(bwrap: Sandbox,
                                                    two_process_cold: dict[tuple[str, str], GradeResult],
                                                    capsys: pytest.CaptureFixture[str]) -> None:
    tasks = [t for t in python_sample_tasks() if t.id in COLD_TASKS]
    # In-process graded as the CLI grades (warm): what a task that declares in-process gets.
    with Grader(bwrap, warm=True) as grader:
        old = grade_hacks(grader, [in_process(t) for t in tasks], HACKS)
    rows = []
    for hack in HACKS:
        won_old = sum(1 for t in tasks if (old[(hack, t.id)].score or 0) > 0)
        full_old = sum(1 for t in tasks if old[(hack, t.id)].passed)
        won_two = sum(1 for t in tasks if (two_process_cold[(hack, t.id)].score or 0) > 0)
        rows.append(f"| {hack} | {won_old}/{len(tasks)} ({full_old} full score) | {won_two}/{len(tasks)} |")
        assert won_two == 0, hack
    assert all(old[k].isolation == "in-process" for k in old)
    with capsys.disabled():
        print("\n| hack | in-process: tasks scoring > 0 | two-process: tasks scoring > 0 |")
        print("|------|------|------|")
        print("\n".join(rows))


VIEW_CANDIDATE = '''
import os


def violations():
    """What this process can see that it must not."""
    seen = []
    for path in ("tests", "hidden_tests", "/workspace/tests", "/workspace/hidden_tests"):
        if os.path.isdir(path) and os.listdir(path):
            seen.append(path)
    for path in ("/results", "/opt/verify-harness", "/proc/1/environ", "/proc/self/environ", "/.verify-src"):
        if os.path.exists(path):
            seen.append(path)
    for name in ("VERIFY_SEAL_KEY", "VERIFY_SEAL_FD", "VERIFY_RESULTS_DIR", "VERIFY_HARNESS_DIR"):
        if name in os.environ:
            seen.append(name)
    try:
        os.unshare(os.CLONE_NEWUSER)
        seen.append("a new user namespace")
    except (OSError, AttributeError):
        pass
    return seen


def write_output(path):
    import socket

    with open(path, "w") as fh:
        fh.write("written by the candidate")
    return socket.gethostname()
'''

VIEW_TESTS = '''
import os
import pytest
from probe import violations, write_output


def test_the_candidate_sees_nothing_it_must_not():
    assert violations() == []


def test_files_it_writes_reach_the_tests(tmp_path):
    import socket

    host = write_output(str(tmp_path / "out.txt"))
    assert (tmp_path / "out.txt").read_text() == "written by the candidate"
    # Written in the candidate's sandbox (its own UTS namespace), not in this process: process
    # ids cannot tell, each side counts them in a pid namespace of its own.
    assert host == "candidate" != socket.gethostname()


def test_the_tests_cannot_read_the_candidates_code():
    with pytest.raises(OSError):
        open("probe.py").read()
'''


def test_each_side_sees_only_its_own(bwrap: Sandbox, tmp_path: Path) -> None:
    src = SAMPLE_TASKS / "coding-interval-merge"
    root = tmp_path / "view"
    for folder in ("starter", "solution", "tests", "hidden_tests"):
        (root / folder).mkdir(parents=True)
    toml = (src / "task.toml").read_text().replace('editable = ["intervals.py"]', 'editable = ["probe.py"]')
    (root / "task.toml").write_text(toml.replace("coding/interval-merge", "fixture/view")
                                    .replace(" tests'", " tests hidden_tests'"))
    (root / "prompt.md").write_text("Report what you see.\n")
    (root / "starter" / "probe.py").write_text("def violations():\n    return ['starter']\n")
    (root / "solution" / "probe.py").write_text(VIEW_CANDIDATE)
    (root / "tests" / "test_view.py").write_text(VIEW_TESTS)
    (root / "hidden_tests" / "test_hidden.py").write_text("def test_hidden_exists():\n    assert True\n")
    task = load_task(root)
    with Grader(bwrap) as grader:
        result = grader.grade(GradeRequest(task, Phase.REFERENCE))
    assert result.isolation == "two-process" and result.isolation_notes == tuple(bwrap.two_process_gaps)
    assert result.passed, (result.problems, result.run.stdout.text[-3000:])
