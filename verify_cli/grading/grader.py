"""Grade one phase of a task in a sandbox: evidence in, per-test outcomes and a score out.

Built for a library caller that grades thousands of candidates at once: :class:`Grader` is
thread-safe, :meth:`Grader.grade_many` streams results as they complete with bounded work in
flight, and :meth:`Grader.agrade` serves asyncio. An infrastructure failure is a status of its
own (``infra_error``) and never a score.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

from verify_cli.grading.junit import JUnitParseError, Outcome, TestOutcome, parse_junit
from verify_cli.grading.scoring import score as policy_score
from verify_cli.grading.workspace import Phase, lay_out
from verify_cli.sandbox.base import Limits, RunResult, RunSpec, Sandbox, Verdict
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import glob_matches


class GradeStatus(StrEnum):
    GRADED = "graded"
    INFRA_ERROR = "infra_error"  # the sandbox failed: no score, retry or mask


@dataclass(frozen=True)
class GradeRequest:
    """What to grade. ``expected_tests`` are ids a sound run must report (from the reference run);
    any of them absent from this run counts as failed. ``seed`` shuffles test order and pins
    ``PYTHONHASHSEED`` (None: runner order, hash seed 0)."""

    task: Task
    phase: Phase
    candidate: Mapping[str, bytes] | None = None
    seed: int | None = None
    expected_tests: frozenset[str] | None = None
    label: str = ""


@dataclass(frozen=True)
class GradeResult:
    task_id: str
    phase: Phase
    status: GradeStatus
    score: float | None
    passed: bool
    tests: tuple[TestOutcome, ...]
    run: RunResult
    problems: tuple[str, ...] = ()
    ignored_files: tuple[str, ...] = ()
    seed: int | None = None
    label: str = ""
    seconds: float = 0.0

    @property
    def failed_tests(self) -> list[TestOutcome]:
        return [t for t in self.tests if not t.outcome.ok]

    def outcome_of(self, test_id: str) -> Outcome | None:
        for t in self.tests:
            if t.id == test_id:
                return t.outcome
        return None

    def to_dict(self, *, with_run: bool = True) -> dict[str, object]:
        d: dict[str, object] = {
            "task_id": self.task_id, "phase": self.phase.value, "status": self.status.value,
            "score": self.score, "passed": self.passed, "seed": self.seed, "label": self.label,
            "problems": list(self.problems), "ignored_files": list(self.ignored_files),
            "tests": [t.to_dict() for t in self.tests], "seconds": round(self.seconds, 4),
        }
        if with_run:
            d["run"] = self.run.to_dict()
        return d


def task_limits(task: Task) -> Limits:
    lim = task.limits
    return Limits(wall_seconds=lim.wall_seconds, memory_mb=lim.memory_mb, processes=lim.processes,
                  output_bytes=lim.output_bytes)


def run_environment(task: Task, seed: int | None) -> dict[str, str]:
    env = {"PYTHONHASHSEED": str(seed if seed is not None else 0)}
    if seed is not None:
        env["VERIFY_SHUFFLE_SEED"] = str(seed)
    if task.test.framework == "pytest":
        env["PYTEST_PLUGINS"] = "verify_shuffle"
        # Plugins that happen to be installed where the runtime lives (xdist, benchmark...) must
        # not change grading or slow every run; a task that needs one names it with -p.
        env["PYTEST_DISABLE_PLUGIN_AUTOLOAD"] = "1"
    return env


def collect_outcomes(task: Task, run: RunResult) -> tuple[list[TestOutcome], list[str]]:
    """Per-test outcomes from the run's JUnit files, and problems found on the way."""
    problems: list[str] = []
    files = {name: data for name, data in sorted(run.results.items())
             if glob_matches(task.test.results, name)}
    if not files:
        problems.append(f"no results file matching {task.test.results!r} was written to $VERIFY_RESULTS_DIR")
        return [], problems
    tests: list[TestOutcome] = []
    for name, data in files.items():
        try:
            tests.extend(parse_junit(data))
        except JUnitParseError as e:
            problems.append(f"results file {name}: {e}")
    return tests, problems


def judge(task: Task, req: GradeRequest, run: RunResult, started: float, ignored: tuple[str, ...]) -> GradeResult:
    """Turn a run's evidence into a GradeResult under the trust rules of DESIGN.md."""
    common = dict(task_id=task.id, phase=req.phase, run=run, ignored_files=ignored, seed=req.seed,
                  label=req.label)
    if run.verdict.is_infrastructure:
        return GradeResult(status=GradeStatus.INFRA_ERROR, score=None, passed=False, tests=(),
                           problems=(f"sandbox {run.verdict.value}: {run.message}",),
                           seconds=time.monotonic() - started, **common)  # type: ignore[arg-type]
    tests, problems = collect_outcomes(task, run)
    if req.expected_tests:
        have = {t.id for t in tests}
        for tid in sorted(req.expected_tests - have):
            tests.append(TestOutcome(tid, Outcome.MISSING, message="expected test absent from the results"))
    all_passed = bool(tests) and all(t.outcome.ok for t in tests)
    if not tests and not problems:
        problems.append("the results hold no test case")
    if run.verdict not in (Verdict.OK, Verdict.NONZERO_EXIT):
        problems.append(f"the run ended with {run.verdict.value}: {run.message}")
    elif all_passed and run.verdict is Verdict.NONZERO_EXIT:
        problems.append(f"exit code {run.exit_code} contradicts the results (every test passed)")
    elif run.verdict is Verdict.OK and tests and not all_passed:
        problems.append("exit code 0 contradicts the results (some tests did not pass)")
    # Evidence that cannot be trusted scores nothing; consistent evidence scores by policy.
    trusted = run.verdict in (Verdict.OK, Verdict.NONZERO_EXIT) and not (
        all_passed and run.verdict is Verdict.NONZERO_EXIT) and not any(
        p.startswith("results file") for p in problems)
    value = policy_score(task.scoring, tests) if trusted else 0.0
    return GradeResult(status=GradeStatus.GRADED, score=value, passed=trusted and all_passed,
                       tests=tuple(tests), problems=tuple(problems),
                       seconds=time.monotonic() - started, **common)  # type: ignore[arg-type]


class Grader:
    """Grades requests in one sandbox backend. Safe to share between threads."""

    def __init__(self, sandbox: Sandbox, *, work_root: Path | None = None) -> None:
        self.sandbox = sandbox
        self.work_root = work_root

    def grade(self, req: GradeRequest) -> GradeResult:
        """Lay out the phase, run the task's test command, judge the evidence."""
        started = time.monotonic()
        task = req.task
        root = Path(tempfile.mkdtemp(prefix=f"verify-{req.phase.value}-", dir=self.work_root))
        try:
            laid = lay_out(task, req.phase, root, req.candidate)
            spec = RunSpec(command=["/bin/sh", "-c", task.test.command], workdir=root,
                           limits=task_limits(task), env=run_environment(task, req.seed),
                           image=task.environment.image, runtime=task.environment.runtime,
                           labels={"verify-cli.task": task.id, "verify-cli.phase": req.phase.value})
            try:
                run = self.sandbox.run(spec)
            except Exception as e:  # a backend bug must not become a score
                run = RunResult(Verdict.INFRA_ERROR, self.sandbox.name, message=f"{type(e).__name__}: {e}")
            return judge(task, req, run, started, laid.ignored)
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def grade_many(self, requests: Iterable[GradeRequest], *, jobs: int = 2,
                   on_result: Callable[[GradeResult], None] | None = None) -> Iterator[GradeResult]:
        """Grade ``requests`` on ``jobs`` threads, yielding results as they complete (unordered).

        At most ``2 * jobs`` requests are in flight, so an endless generator of candidates
        streams through in bounded memory.
        """
        it = iter(requests)
        with ThreadPoolExecutor(max_workers=max(1, jobs), thread_name_prefix="grade") as pool:
            pending: set[Future[GradeResult]] = set()
            exhausted = False
            while True:
                while not exhausted and len(pending) < 2 * max(1, jobs):
                    try:
                        pending.add(pool.submit(self.grade, next(it)))
                    except StopIteration:
                        exhausted = True
                if not pending:
                    return
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for fut in done:
                    result = fut.result()
                    if on_result is not None:
                        on_result(result)
                    yield result

    async def agrade(self, req: GradeRequest) -> GradeResult:
        """``grade`` for asyncio callers (runs in a worker thread)."""
        return await asyncio.to_thread(self.grade, req)
