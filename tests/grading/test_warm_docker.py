"""Warm grading on docker gives the verdicts of cold grading.

On docker a pooled container serves one run and is destroyed; "warm" there means its waiting
process has imported pytest (and its plugins, and the task's preloads) before the job arrives
(``verify_cli/harness/warm/docker_warm.py``). Every comparison grades the same request cold and warm
in the same backend, and checks (the runner's counters) that the warm run really was warm.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from verify_cli.grading import Grader, GradeRequest, GradeResult, Phase
from verify_cli.grading.warm import WarmStats
from verify_cli.kinds.pytest_command import parse_pytest_words
from verify_cli.sandbox.base import Sandbox, Verdict
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks import load_task
from verify_cli.tasks.loader import TaskLoadFailure, load_task_set

REPO = Path(__file__).resolve().parents[2]
ENV = {"PATH": "/usr/local/bin:/usr/bin:/bin", "VERIFY_RESULTS_DIR": "/results"}
POOL_FILL_S = 120.0

pytestmark = pytest.mark.docker


# --- which commands go warm (no docker needed) -------------------------------------------------


@pytest.mark.parametrize("command, parsed", [
    ('python -m pytest -q --junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests',
     ("module", "python", ("-q", "--junitxml=/results/junit.xml", "tests"))),
    ("/usr/bin/python3 -m pytest tests", ("module", "/usr/bin/python3", ("tests",))),
    ("pytest -q tests", ("script", "pytest", ("-q", "tests"))),
])
def test_commands_the_container_runs_warm(command: str, parsed: Any) -> None:
    assert parse_pytest_words(command, ENV) == parsed


@pytest.mark.parametrize("command", [
    "python -m pytest tests && echo done",
    "python -m pytest $IMAGE_ONLY_VARIABLE",  # the image may set it: only the shell knows
    "venv/bin/python -m pytest tests",  # relative to a work folder that is not there yet
    "python -X dev -m pytest tests",
    "node --test tests",
])
def test_commands_that_stay_cold(command: str) -> None:
    assert parse_pytest_words(command, ENV) is None


# --- the same verdicts -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    with create_sandbox("docker", pool_size=1, mode="single-use") as sandbox:
        yield sandbox


@pytest.fixture(scope="module")
def cold(box: Sandbox) -> Grader:
    return Grader(box)


@pytest.fixture(scope="module")
def warm(box: Sandbox) -> Iterator[Grader]:
    with Grader(box, warm=True) as grader:
        yield grader


def _stats(grader: Grader) -> WarmStats:
    stats = grader.warm_stats
    return WarmStats(**vars(stats)) if stats is not None else WarmStats()


def _evidence(r: GradeResult) -> tuple[Any, ...]:
    return (r.status, r.score, r.passed, r.run.verdict, r.run.exit_code, r.run.signal,
            sorted((t.id, t.outcome.value) for t in r.tests),
            any("no valid harness record" in p for p in r.problems))


def grade_both(box: Sandbox, cold: Grader, warm: Grader, req: GradeRequest, *,
               expect_warm: bool = True, prime: bool = True) -> tuple[GradeResult, GradeResult]:
    """Grade ``req`` cold and warm. The first run of a new pool key runs cold and fills the pool
    (``prime``); the compared warm run must then have been warm."""
    if expect_warm and prime:
        warm.grade(req)  # primes the warm pool of this key
        box.wait_until_warm(POOL_FILL_S)  # type: ignore[attr-defined]
    before = _stats(warm)
    warm_result = warm.grade(req)
    after = _stats(warm)
    cold_result = cold.grade(req)
    if expect_warm:
        assert after.warm_runs == before.warm_runs + 1, (after, box._warm_failures)  # type: ignore[attr-defined]
    else:
        assert after.warm_runs == before.warm_runs
    return cold_result, warm_result


def _task_dirs() -> list[Any]:
    """Both phases of every task that goes warm; of the tasks that stay cold, one per reason
    (kind), reference only: for those the warm grader's run is a cold run, and each further
    node task would prove again, with two cold container runs, that a node task stays cold."""
    out = []
    cold_reasons: set[str] = set()
    for parent in (REPO / "sample_tasks", REPO / "tests" / "fixtures" / "defective"):
        for item in load_task_set(parent):
            if isinstance(item, TaskLoadFailure):
                continue
            phases: tuple[Phase, ...] = (Phase.REFERENCE, Phase.STARTER)
            if not _is_warm_eligible(item.root):
                if item.kind in cold_reasons:
                    continue
                cold_reasons.add(item.kind)
                phases = (Phase.REFERENCE,)
            out += [pytest.param(item.root, phase, id=f"{item.id}-{phase.value}") for phase in phases]
    return out


def _is_warm_eligible(root: Path) -> bool:
    task = load_task(root)
    return (task.kind == "pytest" and task.language == "python"
            and parse_pytest_words(task.test.command, ENV) is not None)


def test_the_cases_cover_every_warm_task_and_each_reason_to_stay_cold() -> None:
    cases = [(p.values[0], p.values[1]) for p in _task_dirs()]
    cold = [root for root, _ in cases if not _is_warm_eligible(root)]
    assert sorted(load_task(r).kind for r in cold) == ["command", "node"]
    warm = {root for root, _ in cases if _is_warm_eligible(root)}
    assert len(warm) >= 15 and len(cases) == 2 * len(warm) + len(cold)


@pytest.mark.parametrize("root, phase", _task_dirs())
def test_every_task_gets_the_same_outcomes_warm_and_cold(box: Sandbox, cold: Grader,
                                                         warm: Grader, root: Path,
                                                         phase: Phase) -> None:
    task = load_task(root)
    req = GradeRequest(task, phase, seed=3 if phase is Phase.REFERENCE else None)
    cold_result, warm_result = grade_both(box, cold, warm, req,
                                          expect_warm=_is_warm_eligible(root))
    assert _evidence(warm_result) == _evidence(cold_result), (warm_result.problems,
                                                              cold_result.problems)
    if root.parent.name == "sample_tasks" and phase is Phase.REFERENCE:
        assert warm_result.passed and not warm_result.problems, warm_result.problems


PROBE_TESTS = '''\
import json
import os
import sys


def test_probe():
    env = {k: v for k, v in os.environ.items() if k != "HOSTNAME"}
    listing = {d: sorted(os.listdir(d)) for d in ("/tmp", "/results", "/workspace")}
    print("PROBE " + json.dumps({
        "env": env, "cwd": os.getcwd(), "path": sys.path, "argv": sys.argv,
        "orig_argv": sys.orig_argv, "executable": sys.executable, "listing": listing,
        "flags": list(sys.flags), "hash": hash("verify"), "main": sys.modules["__main__"].__name__,
    }, sort_keys=True))
'''


def _probe(result: GradeResult) -> dict[str, Any]:
    for line in result.run.stdout.text.splitlines():
        if "PROBE " in line:
            return dict(json.loads(line.partition("PROBE ")[2]))
    raise AssertionError(result.run.stdout.text[-2000:] + result.run.stderr.text[-2000:])


@pytest.mark.parametrize("command", [
    'python -m pytest -q -s -p no:cacheprovider --junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests',
    'pytest -q -s -p no:cacheprovider --junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests',
])
@pytest.mark.parametrize("seed", [None, 7])
def test_the_command_sees_what_a_cold_run_sees(box: Sandbox, cold: Grader, warm: Grader,
                                               make_task: Callable[..., Path], command: str,
                                               seed: int | None) -> None:
    def mutate(doc: dict[str, Any]) -> None:
        doc["test"]["command"] = command

    root = make_task("probe", mutate=mutate, files={
        "tests/test_probe.py": PROBE_TESTS, "tests/test_solution.py": None})
    req = GradeRequest(load_task(root), Phase.REFERENCE, seed=seed)
    cold_result, warm_result = grade_both(box, cold, warm, req)
    assert _evidence(warm_result) == _evidence(cold_result)
    assert _probe(warm_result) == _probe(cold_result)


HOSTILE = '''\
import mod  # noqa: F401


def test_ok():
    assert True
'''


@pytest.mark.slow
@pytest.mark.parametrize("code, limits, flags, verdict", [
    ("import time\nwhile True:\n    time.sleep(0.1)\n", {"wall_seconds": 3}, "", Verdict.TIMEOUT),
    ("chunks = []\nwhile True:\n    chunks.append(b'x' * (32 << 20))\n", {"memory_mb": 256}, "",
     Verdict.MEMORY_LIMIT),
    ("import os\nfor _ in range(100):\n    os.write(1, b'x' * (1 << 20))\n", {}, "-s",
     Verdict.OUTPUT_LIMIT),
], ids=["timeout", "memory-bomb", "100MB-output"])
def test_limits_give_the_same_verdicts_warm_and_cold(
        box: Sandbox, cold: Grader, warm: Grader, make_task: Callable[..., Path], code: str,
        limits: dict[str, Any], flags: str, verdict: Verdict) -> None:
    def mutate(doc: dict[str, Any]) -> None:
        doc["editable"] = ["mod.py"]
        doc["test"]["command"] = (f'python -m pytest -q -p no:cacheprovider {flags} '
                                  f'--junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests')
        doc["limits"].update(limits)

    root = make_task("hostile", mutate=mutate, files={
        "starter/solution.py": None, "solution/solution.py": None, "tests/test_solution.py": None,
        "starter/mod.py": "", "solution/mod.py": "", "tests/test_hostile.py": HOSTILE})
    task = load_task(root)
    clean = GradeRequest(task, Phase.PROBE, candidate={"mod.py": b""})
    warm.grade(clean)  # primes the warm pool of this task's limits
    box.wait_until_warm(POOL_FILL_S)  # type: ignore[attr-defined]
    req = GradeRequest(task, Phase.PROBE, candidate={"mod.py": code.encode()})
    cold_result, warm_result = grade_both(box, cold, warm, req, prime=False)
    assert cold_result.run.verdict is verdict, cold_result.run.message
    assert _evidence(warm_result) == _evidence(cold_result)


def test_commands_that_are_not_plain_pytest_run_cold(box: Sandbox, cold: Grader, warm: Grader,
                                                     make_task: Callable[..., Path]) -> None:
    def mutate(doc: dict[str, Any]) -> None:
        doc["test"]["command"] = ('python -m pytest -q -p no:cacheprovider '
                                  '--junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests && true')

    root = make_task("chained", mutate=mutate)
    req = GradeRequest(load_task(root), Phase.REFERENCE)
    cold_result, warm_result = grade_both(box, cold, warm, req, expect_warm=False)
    assert warm_result.passed and _evidence(warm_result) == _evidence(cold_result)
