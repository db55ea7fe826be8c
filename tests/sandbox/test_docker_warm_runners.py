"""The built-in runners (``calls`` and ``stdio`` tasks: ``python -m verify_calls``) on docker's
warm nodes (``sandbox/docker/warm_nodes.py``, mode "runner").

A runner's run forks from a node that imported the runner once, and its verdicts are a cold
run's: the same candidates pass and fail, by the same tests, as when every run starts its
runner cold (``VERIFY_LEVERS_OFF=docker-warm-runner``: the path before warm runner nodes).
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
