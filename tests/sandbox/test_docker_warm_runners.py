"""The built-in runners (``calls`` and ``stdio`` tasks: ``python -m verify_calls``) and warm
candidates on docker's warm nodes (``sandbox/docker/warm_nodes.py``, mode "runner";
``harness/warm/docker_node_candidate.py``).

A runner's run forks from a node that imported the runner once, its candidate from the node's
candidate parent, and its verdicts are a cold run's: the same candidates pass and fail, by the
same tests, as when every run starts its runner cold (``VERIFY_LEVERS_OFF=docker-warm-runner``:
the path before warm runner nodes). A candidate parent that dies costs no grade; a memory bomb
is graded as a cold candidate's.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.sandbox.test_docker_nodes import _SKIP
from verify_cli.grading.grader import Grader, GradeRequest
from verify_cli.grading.workspace import Phase
from verify_cli.sandbox.plumbing.levers import LEVERS_OFF_ENV
from verify_cli.tasks.loader import load_task

pytestmark = [pytest.mark.docker, pytest.mark.skipif(_SKIP is not None, reason=_SKIP or "")]

if _SKIP is None:
    from verify_cli.sandbox.docker import DockerSandbox

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "kinds"
#: Per kind: the task, a right candidate and a wrong one (its editable file).
CANDIDATES = {
    "calls": ("solution.py", b"def double(x):\n    return 2 * x\n",
              b"def double(x):\n    return 2 * x + (x < 0)\n"),
    "stdio": ("main.py", b"import sys\nfor line in sys.stdin:\n    print(2 * int(line))\n",
              b"import sys\nfor line in sys.stdin:\n    n = int(line)\n    print(2 * n + (n < 0))\n"),
}


@pytest.fixture(scope="module")
def box() -> Iterator[DockerSandbox]:
    sandbox = DockerSandbox(max_containers=1, idle_timeout_s=60)
    yield sandbox
    sandbox.close()


def _grades(box: DockerSandbox, kind: str) -> tuple[list[tuple[str, float, tuple[str, ...]]], object]:
    task = load_task(FIXTURES / kind / "task")
    name, right, wrong = CANDIDATES[kind]
    out = []
    with Grader(box, warm=True) as grader:
        for code in (right, wrong, right):
            r = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={name: code}))
            failed = tuple(sorted(t.id for t in r.failed_tests))
            out.append((r.status, r.score, failed))
        stats = grader.warm_stats
    return out, stats


@pytest.mark.parametrize("kind", sorted(CANDIDATES))
def test_a_runner_task_runs_warm_on_docker_nodes_with_the_cold_verdicts(
        box: DockerSandbox, kind: str, monkeypatch: pytest.MonkeyPatch) -> None:
    warm, stats = _grades(box, kind)
    assert stats is not None and stats.warm_runs >= 3 and stats.cold_runs == 0, stats  # type: ignore[attr-defined]
    assert stats.fallbacks == 0, stats  # type: ignore[attr-defined]
    assert [w[:2] for w in warm] == [("graded", 1.0), ("graded", warm[1][1]), ("graded", 1.0)], warm
    assert warm[1][1] < 1.0 and warm[1][2], warm  # the wrong one failed, by name
    monkeypatch.setenv(LEVERS_OFF_ENV, "docker-warm-runner")
    cold, cold_stats = _grades(box, kind)
    assert cold_stats is not None and cold_stats.warm_runs == 0, cold_stats  # type: ignore[attr-defined]
    assert cold == warm


def _kill_in_nodes(pattern: str) -> int:
    """SIGKILL every process of this test process's nodes whose command line holds ``pattern``
    (as a candidate parent killed by the kernel or by hand would be); how many were killed."""
    import docker
    from verify_cli.sandbox.docker.containers import OWNER_LABEL, owner

    client = docker.from_env()
    script = ("import os, signal\nn = 0\nfor p in os.listdir('/proc'):\n    if p.isdigit():\n"
              "        try:\n            c = open(f'/proc/{p}/cmdline', 'rb').read()\n"
              "        except OSError:\n            continue\n"
              f"        if {pattern.encode()!r} in c and b'python3 -c' not in c:\n"
              "            os.kill(int(p), signal.SIGKILL); n += 1\nprint(n)\n")
    killed = 0
    for container in client.containers.list(filters={"label": f"{OWNER_LABEL}={owner()}"}):
        out = container.exec_run(["python3", "-c", script], user="1000:1000")
        killed += int(out.output.decode().strip() or 0)
    return killed


def test_a_candidate_parent_killed_between_runs_costs_no_grade(box: DockerSandbox) -> None:
    """The node's candidate parent dies between two runs (the OOM killer, by hand): the next
    run is graded right (its candidate starts cold, never scored as the parent's fault), and a
    new parent serves the run after."""
    task = load_task(FIXTURES / "calls" / "task")
    name, right, wrong = CANDIDATES["calls"]
    with Grader(box, warm=True) as grader:
        first = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={name: right}))
        assert _kill_in_nodes("verify_candidate_parent.py") >= 1
        after = [grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={name: code}))
                 for code in (right, wrong, right)]
        stats = grader.warm_stats
    assert first.passed and [r.passed for r in after] == [True, False, True], [r.problems for r in after]
    assert all(r.status.value == "graded" for r in after)
    assert stats is not None and stats.fallbacks == 0, stats
    # The run after the kill started its candidate cold; the later ones warm again.
    assert stats.warm_candidates >= 3 and stats.cold_candidates >= 1, stats


BOMB = b"def double(x):\n    hoard = []\n    while True:\n        hoard.append(bytearray(8 << 20))\n"


def test_a_warm_candidates_memory_bomb_is_graded_as_a_cold_ones(
        box: DockerSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """A candidate that eats the node's memory fails its calls, warm as cold, and the next
    candidate in the same pool is graded right."""
    task = load_task(FIXTURES / "calls" / "task")
    name, right, _ = CANDIDATES["calls"]
    results = {}
    for how in ("warm", "cold"):
        if how == "cold":
            monkeypatch.setenv(LEVERS_OFF_ENV, "docker-warm-candidate")
        with Grader(box, warm=True) as grader:
            bomb = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={name: BOMB}))
            after = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={name: right}))
            stats = grader.warm_stats
        assert stats is not None and (stats.warm_candidates if how == "warm" else stats.cold_candidates) >= 1, stats
        assert bomb.status.value == "graded" and not bomb.passed and bomb.score == 0.0, (how, bomb.problems)
        assert after.passed, (how, after.problems)
        results[how] = sorted(t.id for t in bomb.failed_tests)
    assert results["warm"] == results["cold"]


BUSY = (b"import time\n\ndef double(x):\n    t = time.process_time()\n"
        b"    while time.process_time() - t < 0.4:\n        pass\n    return 2 * x\n")


def test_a_warm_candidates_cpu_counts_in_the_runs_as_a_cold_ones(
        box: DockerSandbox, monkeypatch: pytest.MonkeyPatch) -> None:
    """The run's CPU seconds include its candidate's, warm as cold (three calls of 0.4 s each)."""
    task = load_task(FIXTURES / "calls" / "task")
    name = CANDIDATES["calls"][0]
    for how in ("warm", "cold"):
        if how == "cold":
            monkeypatch.setenv(LEVERS_OFF_ENV, "docker-warm-candidate")
        with Grader(box, warm=True) as grader:
            result = grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={name: BUSY}))
            stats = grader.warm_stats
        assert stats is not None and (stats.warm_candidates if how == "warm" else stats.cold_candidates) >= 1, stats
        assert result.passed and result.run is not None, (how, result.problems)
        assert result.run.cpu_seconds >= 1.1, (how, result.run.cpu_seconds)


#: A right answer whose process keeps writing short lines to its stdout and stderr for a second
#: (a thread, under the output limit), long after its run's tests have ended: the node's protocol
#: stream is where a warm candidate's output goes, so nothing it writes may land after its run's
#: result.
CHATTY = (b"import os, threading, time\n"
          b"def _chatter():\n"
          b"    end = time.monotonic() + 1.0\n"
          b"    while time.monotonic() < end:\n"
          b"        for fd in (1, 2):\n"
          b"            try:\n"
          b"                os.write(fd, b'chatter\\n')\n"
          b"            except OSError:\n"
          b"                pass\n"
          b"        time.sleep(0.0002)\n"
          b"threading.Thread(target=_chatter, daemon=True).start()\n"
          b"def double(x):\n    return 2 * x\n")


def test_a_candidate_that_writes_after_its_run_costs_no_grade_of_its_own_or_the_next(box: DockerSandbox) -> None:
    task = load_task(FIXTURES / "calls" / "task")
    name, right, wrong = CANDIDATES["calls"]
    with Grader(box, warm=True) as grader:
        results = [grader.grade(GradeRequest(task, Phase.CANDIDATE, candidate={name: code}))
                   for code in (CHATTY, right, CHATTY, wrong, right)]
        stats = grader.warm_stats
    assert [(r.status, r.score == 1.0) for r in results] == [
        ("graded", True), ("graded", True), ("graded", True), ("graded", False), ("graded", True)], [
        (r.status, r.score, r.problems, r.run.message) for r in results]
    assert stats is not None and stats.fallbacks == 0 and stats.warm_candidates >= 5, stats
    for r in (results[1], results[3], results[4]):  # none of the chatter reached a later run
        assert "chatter" not in r.run.stdout.text and "chatter" not in r.run.stderr.text
