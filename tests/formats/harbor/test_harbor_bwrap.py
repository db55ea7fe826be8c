"""Harbor task folders graded on bwrap, over each image's exported root file system (Docker builds
and exports once; every trial runs without it): the sound fixtures are sound, every planted defect
is caught for its own reason, the classic reward hacks earn 0 under the isolated verifier (a fresh
writable root) and the reward under Harbor's shared mode, side by side, scripted agents earn what
they did, and the fallback where no overlay mounts (a full copy of the root) grades the same."""

from __future__ import annotations

import os
import shutil
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from tests.formats.harbor.test_harbor_docker import DEFECTS, SOUND, _grade, _shared
from verify_cli.checks.audit import AuditOptions, audit_tasks
from verify_cli.checks.probes import ProbeTarget, build_probe, probe_context, probes_for
from verify_cli.checks.report import CheckStatus, TaskVerdict
from verify_cli.checks.solvability import CheckOptions, check_tasks
from verify_cli.environments import Environments
from verify_cli.environments.store import EnvironmentStore
from verify_cli.formats.harbor.bwrap import BwrapTrials
from verify_cli.formats.harbor.spec import AGENT_SCRIPT
from verify_cli.formats.harbor.verifier import AgentPhase, TrialInfraError
from verify_cli.grading.grader import Grader, GradeRequest, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import Verdict
from verify_cli.sandbox.bwrap.writable_root import WritableRoot, overlay_unavailable
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks import load_task, load_task_set

pytestmark = [pytest.mark.docker, pytest.mark.bwrap]


@pytest.fixture(scope="module")
def grader(tmp_path_factory: pytest.TempPathFactory) -> Any:
    box = create_sandbox("bwrap")
    store = EnvironmentStore(tmp_path_factory.mktemp("harbor-bwrap-store"))
    g = Grader(box, environments=Environments(box, store))
    yield g
    g.close()
    box.close()


def _root_of(grader: Grader, folder: Path) -> str:
    realised = grader.environments.realise(load_task(folder))
    assert realised is not None and realised.layer is not None and realised.layer.root
    return realised.layer.root


def test_sound_harbor_tasks_are_sound_on_bwrap(grader: Grader) -> None:
    reports = check_tasks(load_task_set(SOUND), grader, CheckOptions(repeats=2))
    assert {r.task_id for r in reports} == {"fix-sum", "partial-credit"}
    for report in reports:
        failed = [c.to_dict() for c in report.checks if c.status is not CheckStatus.PASS]
        assert report.verdict is TaskVerdict.SOUND, failed
        assert report.isolation == "isolated-verifier"
    reference = grader.grade(GradeRequest(load_task(SOUND / "fix-sum"), Phase.REFERENCE))
    assert reference.run is not None and reference.run.backend == "bwrap"
    notes = reference.isolation_notes
    assert any("the verifier's root: a private overlayfs" in n for n in notes), notes


def test_every_planted_defect_is_caught_for_its_own_reason_on_bwrap(grader: Grader) -> None:
    reports = {r.task_id: r for r in check_tasks(load_task_set(DEFECTS), grader, CheckOptions(repeats=1))}
    failed = {tid: {c.name: c.message for c in r.checks if c.status is CheckStatus.FAIL} for tid, r in reports.items()}
    assert set(failed["no-reward"]) == {"reference-passes"}
    assert "wrote no reward file" in failed["no-reward"]["reference-passes"]
    assert set(failed["bad-reward"]) == {"reference-passes"}
    assert "does not parse as a number: 'PASS'" in failed["bad-reward"]["reference-passes"]
    assert set(failed["always-one"]) == {"starter-fails"}
    assert set(failed["oracle-fails"]) == {"reference-passes"}
    assert set(failed["baked-tests"]) == {"image-leaks"}
    assert set(failed["baked-solution"]) == {"image-leaks"}
    assert reports["bad-build"].verdict is TaskVerdict.ENVIRONMENT_ERROR
    assert "unknown instruction: THIS" in failed["bad-build"]["environment"]
    for tid in ("no-reward", "bad-reward", "always-one", "oracle-fails", "baked-tests", "baked-solution"):
        assert reports[tid].verdict is TaskVerdict.DEFECTIVE, failed[tid]
    assert failed["git-history"] == {}


def test_audit_reads_the_fix_from_the_images_git_history_and_nothing_on_a_sound_task_on_bwrap(grader: Grader) -> None:
    options = AuditOptions(mutants=False, flaky=False, labelled=False, jobs=2)
    (leaky,) = audit_tasks(load_task_set(DEFECTS / "git-history"), grader, options)
    assert leaky.probes is not None
    assert {p.name for p in leaky.probes if p.score} == {"read-fix-from-git-parent"}
    (sound,) = audit_tasks(load_task_set(SOUND / "fix-sum"), grader, options)
    assert sound.probes is not None and len(sound.probes) == len(probes_for("shell"))
    assert [p.name for p in sound.probes if p.score] == []  # nothing else flagged


def test_classic_hacks_earn_nothing_isolated_and_the_reward_shared_on_bwrap(grader: Grader) -> None:
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


def test_a_scripted_agent_earns_what_its_changes_earn_on_bwrap(grader: Grader) -> None:
    for folder in sorted(SOUND.iterdir()):
        task = load_task(folder)
        oracle = (folder / "solution" / "solve.sh").read_bytes()
        assert _grade(grader, task, {AGENT_SCRIPT: oracle}).score == 1.0, folder.name
        assert _grade(grader, _shared(task), {AGENT_SCRIPT: oracle}).score == 1.0, folder.name
        assert _grade(grader, task, {}).score == 0.0, folder.name
    partial = load_task(SOUND / "partial-credit")
    half = _grade(grader, partial, {"greeting.txt": b"Hello, world!\n"})
    assert half.score == 0.5
    assert {t.id: t.outcome.ok for t in half.tests} == {"harbor::count": False, "harbor::greeting": True}
    fix_sum = load_task(SOUND / "fix-sum")
    fixed = b"def total(numbers):\n    return sum(numbers)\n"
    planted = _grade(grader, fix_sum, {"calc.py": fixed, "conftest.py": b"raise SystemExit(1)\n"})
    assert planted.score == 1.0 and planted.ignored_files == ("conftest.py",)
    # a shared trial's files are not filtered by the isolated rule, but none leaves its folder on the host
    escape = Path("/tmp") / f"verify-harbor-escape-{os.getpid()}"
    shared = _grade(grader, _shared(fix_sum), {"calc.py": fixed, "../" * 12 + str(escape).lstrip("/"): b"x"})
    assert shared.score == 1.0 and not escape.exists()
    # a file the agent deletes is gone for the verifier too (the overlay's whiteout, carried)
    deleted = _grade(grader, fix_sum, {AGENT_SCRIPT: b"rm calc.py\n"})
    assert deleted.score == 0.0 and "No module named 'calc'" in deleted.run.stdout.head.decode()


def test_the_full_copy_fallback_grades_the_same(grader: Grader) -> None:
    """Where no overlay can be mounted, each writable root is a full copy of the exported root (one
    oracle trial: two copies; the copy's account of a run's changes is tested on a small root in
    tests/sandbox/test_bwrap_writable_root.py)."""
    task = load_task(SOUND / "fix-sum")
    root = _root_of(grader, SOUND / "fix-sum")
    trials = BwrapTrials(force_copy=True)
    oracle = trials.trial(task, root, AgentPhase(oracle=True))
    assert oracle.reward is not None and oracle.reward.score == 1.0, oracle.run.message
    assert oracle.carried == ("calc.py",)
    assert any("a full copy of the image's exported root file system" in n for n in oracle.notes), oracle.notes


def test_infrastructure_is_never_scored_on_bwrap(grader: Grader, tmp_path: Path) -> None:
    task = load_task(SOUND / "fix-sum")
    gone = BwrapTrials().trial(task, str(tmp_path / "no-such-root"), AgentPhase(oracle=True))
    assert gone.run.verdict is Verdict.INFRA_ERROR and "is gone" in gone.run.message
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
    stranger = load_task(folder)
    assert stranger.harbor is not None
    stranger = replace(stranger, harbor=replace(stranger.harbor, agent_user="no-such-user"))
    unknown = grader.grade(GradeRequest(stranger, Phase.REFERENCE))
    assert unknown.status is GradeStatus.INFRA_ERROR and "'no-such-user' is not in the image's" in unknown.problems[0]
    slow = load_task(folder)
    assert slow.harbor is not None
    slow = replace(slow, harbor=replace(slow.harbor, agent_timeout_sec=1.0))
    for timed in (slow, _shared(slow)):
        timed_out = grader.grade(GradeRequest(timed, Phase.CANDIDATE, candidate={AGENT_SCRIPT: b"sleep 30\n"}))
        assert timed_out.status is GradeStatus.GRADED and timed_out.score == 0.0
        assert "the agent phase ran past 1s" in timed_out.run.message


def test_a_writable_root_that_does_not_mount_is_infrastructure(grader: Grader, tmp_path: Path) -> None:
    task = load_task(SOUND / "fix-sum")
    assert task.harbor is not None
    lower = _root_of(grader, SOUND / "fix-sum")
    if overlay_unavailable(str(tmp_path)):
        pytest.skip(f"no overlay here: {overlay_unavailable(str(tmp_path))}")
    with WritableRoot(lower, parent=str(tmp_path)) as root:
        (root.folder / "work").rmdir()  # overlayfs refuses a missing work folder
        with pytest.raises(TrialInfraError, match=r"the writable root \(overlay\) never began\): .*mount"):
            BwrapTrials().run_in_root(root, Path(lower), task.harbor, "true", user=None, env={}, wall=30,
                                      scratch=tmp_path)


def test_an_agent_session_in_a_harbor_task_on_bwrap_works_in_a_writable_root(grader: Grader) -> None:
    """A session is a writable root over the image's exported one, kept for the episode: what a
    command writes stays, the workdir's changes are the work, graded by the isolated verifier."""
    from verify_cli.agents.environment import TaskEnvironment
    from verify_cli.sandbox.sessions.base import ExecVerdict, SessionFileError

    task = load_task(SOUND / "fix-sum")
    env = TaskEnvironment.open(task, grader.sandbox, grader)
    session = env.session
    try:
        assert session.backend == "bwrap" and session.workdir == "/app"
        where = session.exec('pwd; id -u; echo "$LANG"; cat calc.py')  # the image's USER and ENV
        assert where.ok and where.stdout.text.startswith("/app\n0\nC.UTF-8\ndef total"), where
        assert session.exec((SOUND / "fix-sum" / "solution" / "solve.sh").read_text()).ok
        session.write_file("notes/todo.txt", "done\n")
        assert session.exec("echo trojan > /usr/local/bin/curl && chmod +x /usr/local/bin/curl").ok
        assert session.read_file("notes/todo.txt") == b"done\n"
        assert session.read_file("/usr/local/bin/curl") == b"trojan\n"  # the whole root is writable
        assert "sum(numbers)" in session.read_file("calc.py").decode()
        assert {e.path for e in session.list_files(".")} >= {"calc.py", "notes", "notes/todo.txt"}
        with pytest.raises(SessionFileError, match="is not a file"):
            session.read_file("notes")
        slow = session.exec("sleep 10", timeout=0.5)
        assert slow.verdict is ExecVerdict.TIMEOUT
        assert session.snapshot() == {"calc.py": b"def total(numbers):\n    return sum(numbers)\n",
                                      "notes/todo.txt": b"done\n"}
        graded = _grade(grader, task, session.snapshot())
        assert graded.score == 1.0 and graded.isolation == "isolated-verifier"
        scratch = session.scratch  # type: ignore[attr-defined]
    finally:
        env.close()
    assert not scratch.exists() and session.exec("true").verdict is ExecVerdict.SESSION_DEAD


def test_a_prebuilt_image_without_a_dockerfile_says_to_use_docker_on_bwrap(grader: Grader, tmp_path: Path) -> None:
    folder = tmp_path / "prebuilt"
    shutil.copytree(SOUND / "fix-sum", folder)
    shutil.rmtree(folder / "environment")
    toml = folder / "task.toml"
    toml.write_text(toml.read_text().replace("[environment]", '[environment]\ndocker_image = "verify-cli/python:3.11"'))
    result = grader.grade(GradeRequest(load_task(folder), Phase.REFERENCE))
    assert result.status is not GradeStatus.GRADED and result.score is None
    assert "names a prebuilt image" in " ".join(result.problems) and "--sandbox docker" in " ".join(result.problems)


def test_the_images_user_is_the_agents_where_the_task_names_none(grader: Grader, tmp_path: Path) -> None:
    """The image's USER (kept beside its exported root) runs the agent, as on docker; the oracle
    still passes (a user namespace maps it to the caller: every file of the root is its own)."""
    from verify_cli.agents.environment import TaskEnvironment

    folder = tmp_path / "as-1000"
    shutil.copytree(SOUND / "fix-sum", folder)
    dockerfile = folder / "environment" / "Dockerfile"
    dockerfile.write_text(dockerfile.read_text() + "USER 1000\n")
    task = load_task(folder)
    assert _grade(grader, task, None, Phase.REFERENCE).score == 1.0
    env = TaskEnvironment.open(task, grader.sandbox, grader)
    try:
        assert env.session.exec("id -u").stdout.text == "1000\n"
    finally:
        env.close()
