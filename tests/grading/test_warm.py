"""Warm grading gives the verdicts of cold grading, and no run can reach the next one.

Every comparison grades the same request twice, cold and warm, in bubblewrap, and checks that
the warm run really was warm (the pool's counters), so that no assertion passes vacuously.
"""

from __future__ import annotations

import concurrent.futures
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.grading.test_warm_candidate import LEAKS
from verify_cli.grading import Grader, GradeRequest, GradeResult, Phase
from verify_cli.grading.grader import EXPECTING_PHASES
from verify_cli.grading.warm import WarmStats
from verify_cli.kinds.pytest_command import parse_pytest_command
from verify_cli.sandbox.base import Sandbox, Verdict
from verify_cli.sandbox.process import runtime_path
from verify_cli.sandbox.registry import create_sandbox
from verify_cli.tasks import load_task
from verify_cli.tasks.loader import TaskLoadFailure, load_task_set

REPO = Path(__file__).resolve().parents[2]
ENV = {"PATH": runtime_path(), "VERIFY_RESULTS_DIR": "/results"}


# --- which commands go warm (no sandbox needed) ----------------------------------------------


@pytest.mark.parametrize("command, args", [
    ('python -m pytest -q -p no:cacheprovider --junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests',
     ("-q", "-p", "no:cacheprovider", "--junitxml=/results/junit.xml", "tests")),
    ("python3 -m pytest tests hidden_tests --junitxml=${VERIFY_RESULTS_DIR}/j.xml",
     ("tests", "hidden_tests", "--junitxml=/results/j.xml")),
    ("python -m pytest -k 'not slow and x'", ("-k", "not slow and x")),
])
def test_plain_pytest_commands_go_warm(command: str, args: tuple[str, ...]) -> None:
    inv = parse_pytest_command(command, ENV)
    assert inv is not None and inv.mode == "module" and inv.args == args


@pytest.mark.parametrize("command", [
    "python -m pytest tests && echo done",
    "python -m pytest tests | tee log",
    "python -m pytest tests/*.py",
    "python -m pytest tests > out.txt",
    "PYTHONPATH=src python -m pytest tests",
    "cd sub; python -m pytest",
    "python -m pytest $(cat args)",
    "python -m pytest `ls`",
    "python -m pytest $UNSET_VARIABLE",
    "python -X dev -m pytest tests",
    "python -m unittest discover",
    "node --test tests",
    "sh -c 'python -m pytest'",
    'python -m pytest "unterminated',
    "python -m pytest ~/tests",
])
def test_anything_else_stays_cold(command: str) -> None:
    assert parse_pytest_command(command, ENV) is None


# --- the same verdicts -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def box() -> Iterator[Sandbox]:
    # Only tests marked ``bwrap`` use it, and those are skipped where bwrap cannot run.
    with create_sandbox("bwrap") as sandbox:
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
            sorted((t.id, t.outcome.value) for t in r.tests))


def _is_warm_eligible(root: Path) -> bool:
    task = load_task(root)
    inv = parse_pytest_command(task.test.command, ENV)
    return task.kind == "pytest" and inv is not None


def grade_both(cold: Grader, warm: Grader, req: GradeRequest, *, expect_warm: bool = True,
               expect_fallback: bool = False, at_once: bool = False) -> tuple[GradeResult, GradeResult]:
    """Grade ``req`` cold and warm; the warm run must have been warm (or fallen back, if told).
    ``at_once``: the cold run beside the warm one (for runs that wait out a wall limit)."""
    if req.phase in EXPECTING_PHASES:  # a candidate's declared tests come from one reference run, first
        for grader in (cold, warm):
            grader.expected_tests(req.task)
    before = _stats(warm)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        cold_future = pool.submit(cold.grade, req) if at_once else None
        warm_result = warm.grade(req)
        after = _stats(warm)
        cold_result = cold_future.result() if cold_future is not None else cold.grade(req)
    if expect_fallback:
        assert after.fallbacks == before.fallbacks + 1, after
    elif expect_warm:
        assert after.warm_runs == before.warm_runs + 1, after
    return cold_result, warm_result


def _task_dirs() -> list[Any]:
    """Both phases of every task that loads and goes warm; of the tasks that stay cold, one per
    reason (kind), reference only: their warm grader's run is a cold run, and each further
    one would prove again that a task of that kind stays cold."""
    out = []
    cold_reasons: set[str] = set()
    for parent in (REPO / "sample_tasks", REPO / "tests" / "fixtures" / "defective"):
        for item in load_task_set(parent):
            if isinstance(item, TaskLoadFailure):
                continue  # "every task that loads"
            phases: tuple[Phase, ...] = (Phase.REFERENCE, Phase.STARTER)
            if not _is_warm_eligible(item.root):
                if item.kind in cold_reasons:
                    continue
                cold_reasons.add(item.kind)
                phases = (Phase.REFERENCE,)
            out += [pytest.param(item.root, phase, id=f"{item.id}-{phase.value}") for phase in phases]
    return out


def test_the_cases_cover_every_warm_task_and_each_reason_to_stay_cold() -> None:
    cases = [(p.values[0], p.values[1]) for p in _task_dirs()]
    cold = [root for root, _ in cases if not _is_warm_eligible(root)]
    assert sorted(load_task(r).kind for r in cold) == ["command", "node"]
    warm = {root for root, _ in cases if _is_warm_eligible(root)}
    assert len(warm) >= 15 and len(cases) == 2 * len(warm) + len(cold)


@pytest.mark.bwrap
@pytest.mark.parametrize("root, phase", _task_dirs())
def test_every_task_gets_the_same_outcomes_warm_and_cold(cold: Grader, warm: Grader, root: Path,
                                                         phase: Phase) -> None:
    task = load_task(root)
    # Seeded like check-tasks: the reference shuffled under a hash seed, the starter unseeded.
    req = GradeRequest(task, phase, seed=3 if phase is Phase.REFERENCE else None)
    cold_result, warm_result = grade_both(cold, warm, req, expect_warm=_is_warm_eligible(root))
    assert _evidence(warm_result) == _evidence(cold_result)


@pytest.mark.bwrap
@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_a_hash_order_flaky_test_flips_warm_exactly_as_cold(cold: Grader, warm: Grader,
                                                            seed: int) -> None:
    """Each run sees its own PYTHONHASHSEED, not the one a worker happened to start with."""
    task = load_task(REPO / "tests" / "fixtures" / "defective" / "flaky-test")
    req = GradeRequest(task, Phase.REFERENCE, seed=seed)
    cold_result, warm_result = grade_both(cold, warm, req)
    assert _evidence(warm_result) == _evidence(cold_result)


# --- nothing of one run reaches the next -------------------------------------------------------

STATE_TESTS = '''\
import builtins
import io
import json
import os
import threading

import mod  # noqa: F401  (the candidate's module: it may do anything when imported)


def test_json_is_untouched():
    assert json.dumps({"a": 1}) == '{"a": 1}'


def test_open_is_untouched():
    assert builtins.open is io.open


def test_working_directory_is_the_workspace():
    assert os.getcwd() == "/workspace"


def test_tmp_and_shm_are_fresh():
    import sys
    # Only the interpreter's own installation may show in /tmp (a checkout's venv under /tmp).
    allowed = {os.path.realpath(p).split("/")[2] for p in (sys.prefix, sys.base_prefix)
               if os.path.realpath(p).startswith("/tmp/")}
    assert set(os.listdir("/tmp")) <= allowed and os.listdir("/dev/shm") == []


def test_environment_is_the_harness_one():
    assert "LEAKED" not in os.environ


def test_no_thread_of_another_run():
    assert not [t for t in threading.enumerate() if t.name == "leaky"]


def test_no_listener_of_another_run():
    # The warm children keep their sandbox's network namespace (no fresh one per run): a socket
    # an earlier run listened on must be gone with its processes, and the tests never share a
    # network namespace with a two-process candidate.
    assert [f for f in leaks_found() if "listener" in f] == []


def test_no_ipc_object_of_another_run():
    assert "a System V shared memory segment" not in leaks_found()


def test_no_process_of_another_run():
    mine = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as fh:
                mine.append(fh.read())
        except OSError:
            pass
    assert b"sleep\\x00987\\x00" not in mine
''' + LEAKS

CORRUPTING_CANDIDATE = LEAKS + '''\
import builtins
import json
import os
import subprocess
import threading
import time

_dumps = json.dumps
# Wrong for the tests' probe only (the harness's own record still serialises; a candidate that
# breaks json.dumps outright is the harness's business, not the warm worker's).
json.dumps = lambda obj, *a, **k: "corrupted" if obj == {"a": 1} else _dumps(obj, *a, **k)
_open = builtins.open
builtins.open = lambda *a, **k: _open(*a, **k)
os.environ["LEAKED"] = "1"
with _open("/tmp/leak", "w") as fh:
    fh.write("from the previous run")
with _open("/dev/shm/leak", "w") as fh:
    fh.write("from the previous run")
threading.Thread(target=lambda: time.sleep(3600), name="leaky", daemon=True).start()
subprocess.Popen(["sleep", "987"], start_new_session=True)  # a daemon of its own session
leave_ipc_object()
if os.fork() == 0:  # a daemon that listens on loopback and an abstract socket
    os.setsid()
    held = listen_on_leak_addresses()
    time.sleep(3600)
    os._exit(0)
time.sleep(0.2)  # listening before the tests look
os.chdir("/tmp")
'''


def _hostile_task(make_task: Callable[..., Path], candidate_limits: dict[str, Any] | None = None,
                  flags: str = "", isolation: str = "in-process") -> Path:
    def mutate(doc: dict[str, Any]) -> None:
        doc["editable"] = ["mod.py"]
        # These candidates attack the warm worker from inside the test process: in-process is
        # where that is possible (two-process, they only reach their own sandbox).
        doc["isolation"] = isolation
        doc["test"]["command"] = (
            f'python -m pytest -q -p no:cacheprovider {flags} '
            f'--junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests')
        doc["limits"].update(candidate_limits or {})

    return make_task("hostile", mutate=mutate, files={
        "starter/solution.py": None, "solution/solution.py": None, "tests/test_solution.py": None,
        "starter/mod.py": "", "solution/mod.py": "", "tests/test_state.py": STATE_TESTS})


def _candidate(task_root: Path, code: str) -> GradeRequest:
    return GradeRequest(load_task(task_root), Phase.CANDIDATE, candidate={"mod.py": code.encode()})


@pytest.mark.bwrap
@pytest.mark.parametrize("isolation", ["in-process", "two-process"])
def test_a_candidate_that_corrupts_global_state_does_not_affect_the_next_run(
        cold: Grader, warm: Grader, make_task: Callable[..., Path], isolation: str) -> None:
    root = _hostile_task(make_task, isolation=isolation)
    bad_cold, bad_warm = grade_both(cold, warm, _candidate(root, CORRUPTING_CANDIDATE))
    if isolation == "two-process":
        # The one difference: a warm candidate parent forks the candidate into a pid namespace
        # of its own, so the tests' /proc no longer lists the candidate's processes (a cold
        # candidate is a child of the tests' sandbox, and its daemon shows there).
        seen = "tests.test_state::test_no_process_of_another_run"
        assert (seen, "failed") in _evidence(bad_cold)[-1] and (seen, "passed") in _evidence(bad_warm)[-1]
        assert [t for t in _evidence(bad_warm)[-1] if t[0] != seen] == [
            t for t in _evidence(bad_cold)[-1] if t[0] != seen]
    else:
        assert _evidence(bad_warm) == _evidence(bad_cold)
    assert not bad_warm.passed  # the corruption is visible to its own run...
    # ...its listeners and IPC object too, but only where the tests share the candidate's
    # process (two-process: its own network and IPC namespaces, warm or cold)...
    shared = {"tests.test_state::test_no_listener_of_another_run",
              "tests.test_state::test_no_ipc_object_of_another_run"}
    for result in (bad_warm, bad_cold):
        outcomes = dict(_evidence(result)[-1])
        want = "failed" if isolation == "in-process" else "passed"
        assert {outcomes[t] for t in shared} == {want}, outcomes
    started = _stats(warm).workers_started
    clean_cold, clean_warm = grade_both(cold, warm, _candidate(root, ""))
    assert _stats(warm).workers_started == started  # ...the next run used the same worker...
    assert clean_warm.passed and clean_warm.score == 1.0, clean_warm.failed_tests  # ...untouched
    assert _evidence(clean_warm) == _evidence(clean_cold)


@pytest.mark.bwrap
@pytest.mark.parametrize("attack", [
    "import os\nos.kill(os.getppid(), 9)\n",
    "import os, signal\nos.kill(os.getppid(), signal.SIGSTOP)\n",
    "import os, signal\nos.kill(os.getppid(), signal.SIGTERM)\n",
])
def test_a_candidate_that_attacks_the_worker_is_rerun_cold(
        cold: Grader, warm: Grader, make_task: Callable[..., Path], attack: str) -> None:
    # A stopped parent never reaps the run: warm (the pool notices the silent worker once the
    # child has ended, and reruns cold) and cold, the run ends at the wall limit (a timeout in
    # both). 12 s, not the task's 30: time for the child to end on a loaded machine, not more.
    root = _hostile_task(make_task, {"wall_seconds": 12} if "SIGSTOP" in attack else None)
    req = _candidate(root, attack)
    cold_result, warm_result = grade_both(cold, warm, req, expect_fallback=True,
                                          at_once="SIGSTOP" in attack)
    if "SIGSTOP" in attack:
        # Both time out, graded 0. Whether pytest wrote its report before the wall limit killed
        # the run is the load's doing (CI once took over 12 s to start a cold pytest beside the
        # vLLM stage): outcomes are compared when both reported, else each is all missing or
        # the same as the other's.
        assert _evidence(warm_result)[:-1] == _evidence(cold_result)[:-1]
        assert warm_result.run.verdict is Verdict.TIMEOUT and warm_result.score == 0.0
        outcomes = [{o for _, o in _evidence(r)[-1]} for r in (warm_result, cold_result)]
        if {"missing"} not in outcomes:
            assert _evidence(warm_result) == _evidence(cold_result)
    else:
        assert _evidence(warm_result) == _evidence(cold_result)
    # The broken worker was replaced: the next run is warm again and clean.
    cold_next, warm_next = grade_both(cold, warm, _candidate(root, ""))
    assert warm_next.passed and _evidence(warm_next) == _evidence(cold_next)


@pytest.mark.bwrap
@pytest.mark.slow
@pytest.mark.parametrize("code, limits, flags, verdict", [
    ("import time\nwhile True:\n    time.sleep(0.1)\n", {"wall_seconds": 3}, "", Verdict.TIMEOUT),
    ("chunks = []\nwhile True:\n    chunks.append(b'x' * (32 << 20))\n", {"memory_mb": 256}, "",
     Verdict.MEMORY_LIMIT),
    ("import os\nfor _ in range(100):\n    os.write(1, b'x' * (1 << 20))\n", {}, "-s",
     Verdict.OUTPUT_LIMIT),
], ids=["timeout", "memory-bomb", "100MB-output"])
def test_limits_give_the_same_verdicts_warm_and_cold(
        cold: Grader, warm: Grader, make_task: Callable[..., Path], code: str,
        limits: dict[str, Any], flags: str, verdict: Verdict) -> None:
    root = _hostile_task(make_task, limits, flags)
    cold_result, warm_result = grade_both(cold, warm, _candidate(root, code))
    assert cold_result.run.verdict is verdict, cold_result.run.message
    assert _evidence(warm_result) == _evidence(cold_result)
    cold_next, warm_next = grade_both(cold, warm, _candidate(root, ""))
    assert warm_next.passed and _evidence(warm_next) == _evidence(cold_next)


@pytest.mark.bwrap
def test_commands_that_are_not_plain_pytest_run_cold(cold: Grader, warm: Grader,
                                                     make_task: Callable[..., Path]) -> None:
    def mutate(doc: dict[str, Any]) -> None:
        doc["test"]["command"] = ('python -m pytest -q -p no:cacheprovider '
                                  '--junitxml="$VERIFY_RESULTS_DIR/junit.xml" tests && true')

    root = make_task("chained", mutate=mutate)
    before = _stats(warm)
    req = GradeRequest(load_task(root), Phase.REFERENCE)
    cold_result, warm_result = grade_both(cold, warm, req, expect_warm=False)
    assert _stats(warm).warm_runs == before.warm_runs
    assert warm_result.passed and _evidence(warm_result) == _evidence(cold_result)


@pytest.mark.bwrap
def test_third_party_modules_the_reference_imports_are_preloaded_for_later_runs(
        cold: Grader, warm: Grader, make_task: Callable[..., Path]) -> None:
    root = make_task("uses-rich", files={"tests/test_solution.py": (
        "import rich.text\n\nfrom solution import total\n\n\n"
        "def test_sum():\n    assert total([1, 2]) == 3\n")})
    req = GradeRequest(load_task(root), Phase.REFERENCE, seed=5)
    grade_both(cold, warm, req)  # the reference imports rich: learned
    started = _stats(warm).workers_started
    cold_result, warm_result = grade_both(cold, warm, req)
    assert _stats(warm).workers_started == started + 1  # a worker that has rich imported
    assert warm_result.passed and _evidence(warm_result) == _evidence(cold_result)


@pytest.mark.bwrap
def test_a_memory_limit_below_the_warm_interpreter_runs_cold(
        cold: Grader, warm: Grader, make_task: Callable[..., Path]) -> None:
    root = _hostile_task(make_task, {"memory_mb": 16})
    before = _stats(warm)
    cold_result, warm_result = grade_both(cold, warm, _candidate(root, ""), expect_warm=False)
    after = _stats(warm)
    assert after.fallbacks == before.fallbacks and after.warm_runs == before.warm_runs
    assert _evidence(warm_result) == _evidence(cold_result)
