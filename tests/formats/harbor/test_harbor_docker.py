"""Harbor task folders graded on docker, as they are: the sound fixtures are sound, every planted
defect is caught for its own reason, the classic reward hacks earn 0 under the isolated verifier
and the reward under Harbor's shared mode (side by side), and scripted agents earn what they did."""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from verify_cli.checks.audit import AuditOptions, audit_tasks
from verify_cli.checks.probes import ProbeTarget, build_probe, probe_context, probes_for
from verify_cli.checks.report import CheckStatus, TaskVerdict
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.environments import Environments
from verify_cli.environments.store import EnvironmentStore
from verify_cli.formats.harbor.spec import AGENT_SCRIPT, VerifierMode
from verify_cli.grading.grader import Grader, GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks import Task, load_task, load_task_set

pytestmark = pytest.mark.docker

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "harbor"
SOUND = FIXTURES / "sound"
DEFECTS = FIXTURES / "defects"


@pytest.fixture(scope="module")
def grader(tmp_path_factory: pytest.TempPathFactory) -> Any:
    box = create_sandbox("docker")
    box.start()
    store = EnvironmentStore(tmp_path_factory.mktemp("harbor-env-store"))
    g = Grader(box, environments=Environments(box, store))
    yield g
    g.close()
    box.close()


def _shared(task: Task) -> Task:
    assert task.harbor is not None
    return replace(task, harbor=replace(task.harbor, mode=VerifierMode.SHARED))


def _grade(grader: Grader, task: Task, candidate: dict[str, bytes] | None,
           phase: Phase = Phase.CANDIDATE) -> GradeResult:
    result = grader.grade(GradeRequest(task, phase, candidate=candidate))
    assert result.status is GradeStatus.GRADED, result.problems
    return result


def test_sound_harbor_tasks_are_sound_with_flakiness_statistics(grader: Grader) -> None:
    reports = check_tasks(load_task_set(SOUND), grader, CheckOptions(repeats=3))
    assert {r.task_id for r in reports} == {"fix-sum", "partial-credit"}
    for report in reports:
        failed = [c.to_dict() for c in report.checks if c.status is not CheckStatus.PASS]
        assert report.verdict is TaskVerdict.SOUND, failed
        names = {c.name for c in report.checks}
        assert {"reference-passes", "starter-fails", "flaky"} <= names
        assert report.isolation == "isolated-verifier"


def test_every_planted_defect_is_caught_for_its_own_reason(grader: Grader) -> None:
    reports = {r.task_id: r for r in check_tasks(load_task_set(DEFECTS), grader, CheckOptions(repeats=2))}
    failed = {tid: {c.name: c.message for c in r.checks if c.status is CheckStatus.FAIL} for tid, r in reports.items()}
    assert set(failed["no-reward"]) == {"reference-passes"}
    assert "wrote no reward file" in failed["no-reward"]["reference-passes"]
    assert set(failed["bad-reward"]) == {"reference-passes"}
    assert "does not parse as a number: 'PASS'" in failed["bad-reward"]["reference-passes"]
    assert set(failed["always-one"]) == {"starter-fails"}
    assert set(failed["oracle-fails"]) == {"reference-passes"}
    assert set(failed["baked-tests"]) == {"image-leaks"}
    assert "COPY tests /tests" in failed["baked-tests"]["image-leaks"]
    assert set(failed["baked-solution"]) == {"image-leaks"}
    assert "solution" in failed["baked-solution"]["image-leaks"]
    assert reports["bad-build"].verdict is TaskVerdict.ENVIRONMENT_ERROR
    assert "unknown instruction: THIS" in failed["bad-build"]["environment"]
    for tid in ("no-reward", "bad-reward", "always-one", "oracle-fails", "baked-tests", "baked-solution"):
        assert reports[tid].verdict is TaskVerdict.DEFECTIVE
    assert failed["git-history"] == {}  # sound to check-tasks: audit's git probes catch it (below)


def test_audit_finds_the_fix_in_the_images_git_history_and_nothing_on_a_sound_task(grader: Grader) -> None:
    options = AuditOptions(mutants=False, flaky=False, labelled=False, jobs=2)
    (leaky,) = audit_tasks(load_task_set(DEFECTS / "git-history"), grader, options)
    assert leaky.probes is not None
    scored = {p.name for p in leaky.probes if p.score}
    assert scored == {"read-fix-from-git-parent"}
    (sound,) = audit_tasks(load_task_set(SOUND / "fix-sum"), grader, options)
    assert sound.probes is not None and len(sound.probes) == len(probes_for("shell"))
    assert [p.name for p in sound.probes if p.score] == []


def test_classic_hacks_earn_nothing_isolated_and_the_reward_shared(grader: Grader) -> None:
    """The difference is the point: the same scripted agents, the same task, two verifiers."""
    task = load_task(SOUND / "fix-sum")
    ctx = probe_context(task)
    probes = [p for p in probes_for("shell") if p.target is ProbeTarget.HARNESS]
    assert {p.name for p in probes} >= {"trojan-curl", "trojan-python3", "trojan-pytest", "conftest-forces-passes",
                                        "reward-file-write", "reward-rewriter"}
    side_by_side: dict[str, tuple[float | None, float | None]] = {}
    for probe in probes:
        candidate = build_probe(probe, ctx)
        assert candidate is not None and AGENT_SCRIPT in candidate
        isolated = _grade(grader, task, candidate)
        shared = _grade(grader, _shared(task), candidate)
        side_by_side[probe.name] = (isolated.score, shared.score)
        assert isolated.isolation == "isolated-verifier" and shared.isolation == "shared-verifier"
    assert side_by_side == {name: (0.0, 1.0) for name in side_by_side}, side_by_side


def test_a_scripted_agent_earns_what_its_changes_earn(grader: Grader) -> None:
    """An agent that writes the oracle's changes earns 1.0 on every sound task; one that submits
    at once earns 0; partial work earns partial credit per reward key."""
    for folder in sorted(SOUND.iterdir()):
        task = load_task(folder)
        oracle = (folder / "solution" / "solve.sh").read_bytes()
        assert _grade(grader, task, {AGENT_SCRIPT: oracle}).score == 1.0, folder.name
        assert _grade(grader, task, {}).score == 0.0, folder.name
    partial = load_task(SOUND / "partial-credit")
    half = _grade(grader, partial, {"greeting.txt": b"Hello, world!\n"})
    assert half.score == 0.5
    assert {t.id: t.outcome.ok for t in half.tests} == {"harbor::count": False, "harbor::greeting": True}


def test_a_candidate_conftest_in_the_workdir_is_not_carried(grader: Grader) -> None:
    task = load_task(SOUND / "fix-sum")
    fixed = (b"def total(numbers):\n    return sum(numbers)\n")
    result = _grade(grader, task, {"calc.py": fixed, "conftest.py": b"raise SystemExit(1)\n"})
    assert result.score == 1.0
    assert result.ignored_files == ("conftest.py",)


def test_a_module_shadowing_the_test_runner_is_not_carried(grader: Grader) -> None:
    task = load_task(SOUND / "fix-sum")
    fake = b"import sys\nsys.exit(0)\n"
    result = _grade(grader, task, {"pytest.py": fake, "_pytest/__init__.py": fake})
    assert result.score == 0.0 and set(result.ignored_files) == {"pytest.py", "_pytest/__init__.py"}


def test_a_healthcheck_that_never_passes_is_infrastructure(grader: Grader, tmp_path: Path) -> None:
    folder = tmp_path / "unhealthy"
    shutil.copytree(SOUND / "fix-sum", folder)
    toml = folder / "task.toml"
    toml.write_text(toml.read_text() + "\n[environment.healthcheck]\ncommand = \"test -e /nowhere\"\n"
                    "interval_sec = 0.1\ntimeout_sec = 5\nretries = 2\n")
    result = grader.grade(GradeRequest(load_task(folder), Phase.REFERENCE))
    assert result.status is GradeStatus.INFRA_ERROR and result.score is None
    assert "healthcheck 'test -e /nowhere' never passed" in result.problems[0]
    toml.write_text(toml.read_text().replace("test -e /nowhere", "test -d /app"))
    assert _grade(grader, load_task(folder), None, Phase.REFERENCE).score == 1.0
