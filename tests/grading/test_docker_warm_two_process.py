"""Warm two-process runs in docker warm nodes (``harness/warm/docker_node_warm.py``).

With ``Grader(warm=True)`` a two-process run on docker's node mode forks from a warm node that
has imported pytest; its candidate starts in a nested bubblewrap laid out as the cold node run
lays it out. These tests check that such runs really go warm (the warm host's counters), that the
candidate in one sees nothing of the tests' side, that nothing a run leaves (files in /tmp,
/dev/shm or the work folder, processes, environment) reaches the next run in the same
container, and that honest candidates get the verdicts the bwrap backend gives them. The hack
suite warm on docker is in ``test_docker_two_process``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import test_two_process_parity as parity
from test_hack_suite import VIEW_CANDIDATE, VIEW_TESTS

from verify_cli.grading.grader import EXPECTING_PHASES, Grader, GradeRequest
from verify_cli.grading.warm import WarmStats
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.base import Sandbox
from verify_cli.sandbox.docker.sandbox import DockerSandbox
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks.loader import load_task
from verify_cli.tasks.model import Task

pytestmark = [pytest.mark.docker, pytest.mark.slow]

ROOT = Path(__file__).resolve().parents[2]
SRC = ROOT / "sample_tasks" / "coding-interval-merge"


@pytest.fixture(scope="module")
def docker() -> Iterator[Sandbox]:
    with create_sandbox("docker") as box:
        yield box


def _stats(grader: Grader) -> WarmStats:
    stats = grader.warm_stats
    assert stats is not None
    return WarmStats(**vars(stats))


def probe_task(root: Path, candidate: str, tests: str, *, hidden: bool = True) -> Task:
    """A copy of coding-interval-merge whose editable file is ``probe.py`` (``candidate`` in
    the solution) and whose tests are ``tests`` (plus hidden tests)."""
    for folder in ("starter", "solution", "tests", "hidden_tests"):
        (root / folder).mkdir(parents=True)
    toml = (SRC / "task.toml").read_text().replace('editable = ["intervals.py"]', 'editable = ["probe.py"]')
    toml = toml.replace("coding/interval-merge", f"fixture/{root.name}")
    (root / "task.toml").write_text(toml.replace(" tests'", " tests hidden_tests'") if hidden else toml)
    (root / "prompt.md").write_text("Probe.\n")
    (root / "starter" / "probe.py").write_text("def violations():\n    return ['starter']\n")
    (root / "solution" / "probe.py").write_text(candidate)
    (root / "tests" / "test_probe.py").write_text(tests)
    (root / "hidden_tests" / "test_hidden.py").write_text("def test_hidden_exists():\n    assert True\n")
    return load_task(root)


def test_two_process_runs_go_warm_in_docker_nodes(docker: Sandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    task = load_task(SRC)
    with Grader(docker, warm=True) as grader:
        reference = grader.grade(GradeRequest(task, Phase.REFERENCE))
        starter = grader.grade(GradeRequest(task, Phase.STARTER))
        stats = _stats(grader)
    assert reference.isolation == starter.isolation == "two-process"
    assert reference.passed and not starter.passed
    assert (stats.warm_runs, stats.cold_runs, stats.fallbacks) == (2, 0, 0), stats
    assert stats.warm_candidates == 2, stats  # forked by the node's candidate parent
    # With the lever off each candidate starts in its own nested sandbox, as before.
    monkeypatch.setenv("VERIFY_LEVERS_OFF", "docker-warm-candidate")
    with Grader(docker, warm=True) as grader:
        cold_reference = grader.grade(GradeRequest(task, Phase.REFERENCE))
        cold_starter = grader.grade(GradeRequest(task, Phase.STARTER))
        stats = _stats(grader)
    assert cold_reference.passed and not cold_starter.passed
    assert [t.id for t in cold_starter.failed_tests] == [t.id for t in starter.failed_tests]
    assert (stats.warm_runs, stats.cold_candidates, stats.warm_candidates) == (2, 2, 0), stats
    monkeypatch.delenv("VERIFY_LEVERS_OFF")
    # The off switch sends them cold, as before.
    monkeypatch.setenv("VERIFY_DOCKER_WARM_TWO_PROCESS", "0")
    with Grader(docker, warm=True) as grader:
        again = grader.grade(GradeRequest(task, Phase.REFERENCE))
        stats = _stats(grader)
    assert again.passed and (stats.warm_runs, stats.cold_runs) == (0, 1), stats


def test_each_side_sees_only_its_own_warm(docker: Sandbox, tmp_path: Path) -> None:
    """The bwrap suite's view probe (tests, hidden tests, results, harness, /proc, the seal key
    and new user namespaces absent from the candidate; what it writes reaches the tests; the
    tests see its code empty), in a warm docker two-process run."""
    task = probe_task(tmp_path / "view", VIEW_CANDIDATE, VIEW_TESTS)
    with Grader(docker, warm=True) as grader:
        result = grader.grade(GradeRequest(task, Phase.REFERENCE))
        stats = _stats(grader)
    assert stats.warm_runs == 1 and stats.fallbacks == 0, stats
    assert result.isolation == "two-process"
    assert result.passed, (result.problems, result.run.stdout.text[-3000:])


LEFTOVER_CANDIDATE = '''
import os

MARK = "verify-leftover"


def leftovers():
    """What an earlier run left where this process looks: files, its variable."""
    found = []
    for folder in ("/tmp", "/dev/shm", "/workspace", "."):
        try:
            names = os.listdir(folder)
        except OSError:
            continue
        found += [f"{folder}/{name}" for name in names if MARK in name]
    if "VERIFY_LEFTOVER" in os.environ:
        found.append("$VERIFY_LEFTOVER")
    return found


def plant():
    """Leave files in every writable folder, a variable, and a daemon that outlives the call."""
    for folder in ("/tmp", "/dev/shm", "/workspace"):
        try:
            with open(f"{folder}/{MARK}-candidate", "w") as fh:
                fh.write("left by the candidate")
        except OSError:
            pass
    os.environ["VERIFY_LEFTOVER"] = "1"
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.setsid()
        daemon = os.fork()
        if daemon == 0:
            os.execvp("sleep", ["sleep", "300"])
        os.write(w, str(daemon).encode())
        os._exit(0)
    os.close(w)
    os.waitpid(pid, 0)
    daemon = int(os.read(r, 32))
    os.close(r)
    return daemon


def alive(pid):
    """Whether the daemon ``pid`` (in the candidate's pid namespace) is alive."""
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True
'''

LEFTOVER_TESTS = '''
import os
import time
from probe import alive, leftovers, plant

MARK = "verify-leftover"


def _sleepers():
    """Processes in this run's view that run sleep (the candidate's daemon, if any)."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as fh:
                    if fh.read().startswith(b"sleep"):
                        out.append(pid)
            except OSError:
                pass
    return out


def test_nothing_of_an_earlier_run_is_left():
    assert leftovers() == []
    mine = [f"{d}/{n}" for d in ("/tmp", "/dev/shm", ".") for n in os.listdir(d) if MARK in n]
    assert mine == []
    assert _sleepers() == []
    assert "VERIFY_LEFTOVER" not in os.environ
    # Now leave what the next run must not find: on both sides.
    daemon = plant()
    for _ in range(100):  # its grandchild may not have exec'd sleep yet
        if _sleepers():
            break
        time.sleep(0.05)
    # Seen in this run's pid namespace where the candidate's nested sandbox is inside it (it
    # started cold); a warm node's candidate parent forked it into a pid namespace of its own,
    # where it is alive. Either way the node must not find it after the run (not recycled).
    assert _sleepers() or alive(daemon), "the candidate's daemon runs"
    assert leftovers(), "the candidate finds what it left in this run"
    for folder in ("/tmp", "/dev/shm", "."):
        with open(f"{folder}/{MARK}-tests", "w") as fh:
            fh.write("left by the tests")
    os.environ["VERIFY_LEFTOVER"] = "1"
'''


def test_nothing_of_a_warm_two_process_run_reaches_the_next(tmp_path: Path) -> None:
    """Two runs in one container (one node of the shape): the first leaves files in /tmp,
    /dev/shm and the work folder on both sides, a variable and a daemon of the candidate's; the
    second finds none of it. The node was not recycled, so the daemon died with its run."""
    task = probe_task(tmp_path / "leftover", LEFTOVER_CANDIDATE, LEFTOVER_TESTS)
    with DockerSandbox(max_containers=1) as box, Grader(box, warm=True) as grader:
        first = grader.grade(GradeRequest(task, Phase.REFERENCE))
        second = grader.grade(GradeRequest(task, Phase.REFERENCE))
        stats = _stats(grader)
        containers = box.container_stats()
    for result in (first, second):
        assert result.isolation == "two-process"
        assert result.passed, (result.problems, result.run.stdout.text[-3000:])
    assert stats.warm_runs == 2 and stats.fallbacks == 0 and stats.warm_candidates == 2, stats
    assert (containers["started"], containers["recycled"]) == (1, 0), containers


def test_the_candidate_cannot_replace_the_test_folders_warm(docker: Sandbox, tmp_path: Path) -> None:
    """As the cold docker path: the test folders are empty read-only mount points in the warm
    candidate's view, so it cannot plant its own tests where the tests' side looks."""
    from test_docker_two_process import DETACH_CANDIDATE, DETACH_TESTS

    task = probe_task(tmp_path / "detach", DETACH_CANDIDATE, DETACH_TESTS)
    with Grader(docker, warm=True) as grader:
        result = grader.grade(GradeRequest(task, Phase.REFERENCE))
        stats = _stats(grader)
    assert stats.warm_runs == 1 and stats.fallbacks == 0, stats
    assert result.passed, [(t.id, t.message[-500:]) for t in result.tests]


@pytest.mark.bwrap
def test_identical_verdicts_warm_docker_and_warm_bwrap(docker: Sandbox) -> None:
    """Honest candidates (reference, starter, a mutant) of every Python sample task get the
    same verdicts in warm docker two-process runs as in warm bwrap ones."""
    tasks = [parity.roomy(load_task(p.parent)) for p in sorted((ROOT / "sample_tasks").glob("*/task.toml"))]
    requests = [req for task in tasks if task.kind == "pytest"
                for req in parity.honest_requests(task, mutants=1)]
    with create_sandbox("bwrap") as bwrap, Grader(bwrap, warm=True) as on_bwrap, \
            Grader(docker, warm=True) as on_docker:
        there = {(r.task_id, r.label): r for r in on_bwrap.grade_many(requests, jobs=2)}
        here = {(r.task_id, r.label): r for r in on_docker.grade_many(requests, jobs=2)}
        stats = _stats(on_docker)
    # (+1 a task with a mutant: the grader's one reference run collecting its declared tests)
    collecting = len({r.task.id for r in requests if r.phase in EXPECTING_PHASES})
    assert stats.warm_runs == len(requests) + collecting and stats.fallbacks == 0, stats
    assert there.keys() == here.keys()
    for key in sorted(there):
        assert here[key].isolation == there[key].isolation == "two-process", key
        assert parity.verdict(here[key]) == parity.verdict(there[key]), (
            key, here[key].problems, there[key].problems)
