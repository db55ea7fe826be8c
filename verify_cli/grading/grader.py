"""Grade one phase of a task in a sandbox: evidence in, per-test outcomes and a score out.

Built for a library caller that grades thousands of candidates at once: :class:`Grader` is
thread-safe, :meth:`Grader.grade_many` streams results as they complete with bounded work in
flight, and :meth:`Grader.agrade` serves asyncio. An infrastructure failure is a status of its
own (``infra_error``) and never a score.
"""

from __future__ import annotations

import asyncio
import hashlib
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, replace
from enum import StrEnum
from pathlib import Path

from verify_cli.environments import Environments, spec_of
from verify_cli.errors import EnvironmentBuildError, UsageError
from verify_cli.grading.junit import JUnitParseError, Outcome, TestOutcome, parse_junit
from verify_cli.grading.scoring import TestLists, match_listed_ids
from verify_cli.grading.scoring import score as policy_score
from verify_cli.grading.seal import new_seal_key
from verify_cli.grading.two_process import (
    IN_PROCESS,
    NO_CANDIDATE_FILE,
    IsolationPlan,
    candidate_process,
    plan_isolation,
)
from verify_cli.grading.warm import WarmRunner, WarmStats
from verify_cli.grading.workspace import Phase, lay_out
from verify_cli.kinds.registry import kind_of
from verify_cli.sandbox.base import Limits, RunResult, RunSpec, Sandbox, Verdict
from verify_cli.sandbox.environment import scratch_root
from verify_cli.tasks.model import Isolation, Task
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
    #: Harness options, honoured by the kinds whose harness has them (pytest; the others ignore
    #: them): run only these test ids;
    #: stop at the first failing test; record per-test line coverage of these work-folder files
    #: (``verify-coverage.json`` in the run's results).
    select_tests: frozenset[str] | None = None
    fail_fast: bool = False
    #: With ``fail_fast``: a test that runs longer than this many seconds fails (and so ends the
    #: run), where a hang would otherwise hold it to the wall limit.
    test_seconds: float | None = None
    coverage_files: tuple[str, ...] = ()
    #: With ``coverage_files``: per file, the lines that matter; only the functions (code objects)
    #: holding one of them are traced line by line (a whole project's tests under a line tracer
    #: run many times slower). Empty: every function of the files.
    coverage_lines: tuple[tuple[str, tuple[int, ...]], ...] = ()
    #: A tighter wall-clock limit than the task's (never a looser one).
    wall_seconds: float | None = None
    #: Two-process runs (the stand-in's) record every message crossing to and from the candidate
    #: into ``verify-call-trace.jsonl`` in the run's results (audit's observed equivalence).
    trace_calls: bool = False


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
    #: "two-process" or "in-process", and the guarantees that did not hold for this run (or
    #: why it ran in-process).
    isolation: str = IN_PROCESS
    isolation_notes: tuple[str, ...] = ()
    #: Where the run happened when an executor spread the work over several machines (the Ray
    #: executor: ``ip/node-id``); empty for runs in this process.
    node: str = ""
    #: The identity of the task's built environment the run ran in (:mod:`verify_cli.environments`);
    #: empty where the task declares none.
    environment: str = ""

    @property
    def image_digest(self) -> str | None:
        """The content digest of the image the run ran in (docker), else None."""
        return self.run.image_digest

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
            "isolation": self.isolation, "isolation_notes": list(self.isolation_notes),
        }
        if self.node:
            d["node"] = self.node
        if self.environment:
            d["environment"] = self.environment
        if self.run.image_digest:
            d["image_digest"] = self.run.image_digest
        if with_run:
            d["run"] = self.run.to_dict()
        return d


def task_limits(task: Task) -> Limits:
    lim = task.limits
    return Limits(wall_seconds=lim.wall_seconds, memory_mb=lim.memory_mb, processes=lim.processes,
                  output_bytes=lim.output_bytes)


def run_environment(task: Task, seed: int | None) -> dict[str, str]:
    """The variables every run of ``task`` gets: the hash seed and shuffle, and its kind's."""
    # Empty unless the backend runs the candidate in a sandbox of its own (two-process): then
    # it names the runner that starts a program there (see docs/wire-protocol.md).
    env = {"PYTHONHASHSEED": str(seed if seed is not None else 0), "VERIFY_CANDIDATE_EXEC": ""}
    if seed is not None:
        env["VERIFY_SHUFFLE_SEED"] = str(seed)
    env.update(kind_of(task).run_environment(task))
    return env


def is_sealed(task: Task) -> bool:
    """Whether runs of ``task`` get a seal key that the grader holds their results against."""
    return kind_of(task).needs_seal_key(task)


def request_environment(req: GradeRequest, seal_key: str | None = None) -> dict[str, str]:
    """The variables a run of ``req`` gets: run_environment plus the harness options and seal key."""
    env = run_environment(req.task, req.seed)
    if req.trace_calls:
        env["VERIFY_TRACE_CALLS"] = "1"
    env.update(kind_of(req.task).request_environment(req.task, req, seal_key))
    return env


def request_limits(req: GradeRequest) -> Limits:
    limits = task_limits(req.task)
    if req.wall_seconds is not None and req.wall_seconds < limits.wall_seconds:
        limits = replace(limits, wall_seconds=max(0.1, req.wall_seconds))
    return limits


#: What a test's failure says where it opened a symbolic link on a folder the tests share with
#: the candidate (ELOOP: the work folder and /tmp are nosymfollow in the tests' view): Python's
#: strerror, node's code.
LINK_REFUSED = ("Too many levels of symbolic links", "ELOOP")
LINK_NOTE = ("a test failed opening a symbolic link in the work folder or /tmp: two-process grading never "
             "follows links there in the tests' view (one the candidate planted could point at the tests' own "
             "files); ship files, not links, or follow them on the candidate's side (docs/trust.md)")


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


def judge(task: Task, req: GradeRequest, run: RunResult, started: float, ignored: tuple[str, ...],
          *, seal_key: str | None = None, isolation: IsolationPlan | None = None) -> GradeResult:
    """Turn a run's evidence into a GradeResult under the trust rules of DESIGN.md.

    With ``seal_key`` (kinds that seal their results), the JUnit outcomes count only as far as
    the kind's signed record of the run agrees with them (:meth:`Kind.check_seal
    <verify_cli.kinds.base.Kind.check_seal>`).
    """
    common = dict(task_id=task.id, phase=req.phase, run=run, ignored_files=ignored, seed=req.seed,
                  label=req.label, isolation=isolation.mode if isolation else IN_PROCESS,
                  isolation_notes=isolation.notes if isolation else ())
    if NO_CANDIDATE_FILE in run.results and isolation is not None and isolation.two_process:
        # The candidate server never answered: nothing of the candidate had run yet.
        reason = run.results[NO_CANDIDATE_FILE].decode("utf-8", "replace")[:500]
        run = replace(run, verdict=Verdict.INFRA_ERROR, message=f"two-process grading: {reason}")
        common["run"] = run
    image = task.environment.image
    if run.verdict is Verdict.SETUP_ERROR and image and repr(image) in run.message:
        # The sandbox could not use the image the task names (absent, unfit): say where.
        run = replace(run, message=f"{run.message} ({task.task_file}: /environment/image)")
        common["run"] = run
    if run.verdict.is_infrastructure:
        return GradeResult(status=GradeStatus.INFRA_ERROR, score=None, passed=False, tests=(),
                           problems=(f"sandbox {run.verdict.value}: {run.message}",),
                           seconds=time.monotonic() - started, **common)  # type: ignore[arg-type]
    kind = kind_of(task)
    tests, problems = collect_outcomes(task, run)
    tests = kind.outcomes(task, tests)
    sealed = True
    if seal_key:
        sealed = kind.check_seal(task, run, seal_key, tests, problems)
    listed = TestLists.of(task.test)
    if listed is not None:  # ids a SWE-bench row lists truncated, matched as its harness does (after
        tests = match_listed_ids(listed, tests)  # the seal, which knows the runner's own ids)
    if req.expected_tests:
        have = {t.id for t in tests}
        for tid in sorted(req.expected_tests - have):
            tests.append(TestOutcome(tid, Outcome.MISSING, message="expected test absent from the results"))
    all_passed = bool(tests) and all(t.outcome.ok for t in tests)
    if isolation is not None and isolation.two_process and any(
            not t.outcome.ok and any(m in (t.message or "") for m in LINK_REFUSED) for t in tests):
        common["isolation_notes"] = (*common["isolation_notes"], LINK_NOTE)  # type: ignore[misc]
    if not tests and not problems:
        problems.append("the results hold no test case")
    if run.verdict not in (Verdict.OK, Verdict.NONZERO_EXIT):
        problems.append(f"the run ended with {run.verdict.value}: {run.message}")
    elif all_passed and run.verdict is Verdict.NONZERO_EXIT:
        problems.append(f"exit code {run.exit_code} contradicts the results (every test passed)")
    elif run.verdict is Verdict.OK and tests and not all_passed:
        problems.append("exit code 0 contradicts the results (some tests did not pass)")
    # Evidence that cannot be trusted scores nothing; consistent evidence scores by policy.
    trusted = sealed and run.verdict in (Verdict.OK, Verdict.NONZERO_EXIT) and not (
        all_passed and run.verdict is Verdict.NONZERO_EXIT) and not any(
        p.startswith("results file") for p in problems)
    lists = TestLists.of(task.test)
    value = policy_score(task.scoring, tests, lists) if trusted else 0.0
    own = kind.score(task, tests, run) if trusted else None
    if own is not None:
        value = own
    if lists is not None and task.scoring.policy.uses_test_lists:
        all_passed = lists.all_pass(tests)  # tests outside the lists do not count (SWE-bench)
    return GradeResult(status=GradeStatus.GRADED, score=value, passed=trusted and all_passed,
                       tests=tuple(tests), problems=tuple(problems),
                       seconds=time.monotonic() - started, **common)  # type: ignore[arg-type]


#: How a grade's problems name a task environment that did not build (check-tasks reads it).
ENVIRONMENT_ERROR = "environment-error"


def environment_error(req: GradeRequest, backend: str, error: EnvironmentBuildError, started: float) -> GradeResult:
    """The grade of a run that could not start because the task's environment did not build:
    unscored (the task's fault, never the candidate's), the cause in its first problem."""
    run = RunResult(Verdict.SETUP_ERROR, backend, message=str(error))
    problems = (f"{ENVIRONMENT_ERROR}: environment {error.identity} did not build: {error.cause}",
                *((f"build log: {error.log}",) if error.log else ()))
    return GradeResult(task_id=req.task.id, phase=req.phase, status=GradeStatus.INFRA_ERROR, score=None,
                       passed=False, tests=(), run=run, problems=problems, seed=req.seed, label=req.label,
                       seconds=time.monotonic() - started, environment=error.identity)


def refuse_in_process_candidate(req: GradeRequest, sandbox: Sandbox, plan: IsolationPlan) -> None:
    """Raise :class:`~verify_cli.errors.UsageError` where ``sandbox`` refuses to grade this
    candidate (:attr:`Sandbox.refuses_candidates`): a candidate of a task that grades
    two-process elsewhere, which this backend would grade in-process."""
    if (req.phase is Phase.CANDIDATE and sandbox.refuses_candidates and not plan.two_process
            and not req.coverage_files and kind_of(req.task).two_process_runtime(req.task) is not None
            and req.task.isolation is not Isolation.IN_PROCESS):
        raise UsageError(f"{req.task.id}: {sandbox.refuses_candidates}")


def _expectation_key(task: Task) -> tuple[str, str]:
    """What a task's declared tests depend on: its id, test command and test files (by content,
    so that a copy of the task, as an agent episode's visible-tests task is, shares them)."""
    digest = hashlib.sha256(task.test.command.encode())
    for rel, path in sorted(task.test_files().items()):
        digest.update(b"\0" + rel.encode() + b"\0")
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"\1unreadable")
    return task.id, digest.hexdigest()


#: The phases held to the tests the task declares (the reference and starter define or ignore them).
EXPECTING_PHASES = frozenset({Phase.CANDIDATE, Phase.MUTANT, Phase.PROBE})


class Grader:
    """Grades requests in one sandbox backend. Safe to share between threads.

    ``warm=True`` runs tasks whose kind can go warm in warm workers where the backend hosts them
    (:mod:`verify_cli.grading.warm`): the same verdicts without an interpreter start per run.
    Call :meth:`close` (or use the Grader as a context manager) to stop the workers.
    """

    def __init__(self, sandbox: Sandbox, *, work_root: Path | None = None,
                 warm: bool = False, environments: Environments | None = None) -> None:
        self.sandbox = sandbox
        self.work_root = work_root
        self.warm = warm
        #: Builds (once) and finds the tasks' declared environments for this backend.
        self.environments = environments or Environments(sandbox)
        self._warm: WarmRunner | None = None
        self._warm_lock = threading.Lock()
        #: Tests each task declares (collected once from its pristine reference), by task.
        self._expected: dict[tuple[str, str], frozenset[str]] = {}
        self._expected_locks: dict[tuple[str, str], threading.Lock] = {}
        self._expected_lock = threading.Lock()

    def _warm_runner(self) -> WarmRunner | None:
        if not self.warm:
            return None
        with self._warm_lock:
            if self._warm is None:
                self._warm = WarmRunner(self.sandbox)
            return self._warm

    @property
    def warm_stats(self) -> WarmStats | None:
        """Counters of the warm workers (runs warm, runs cold, fallbacks), once any were used."""
        runner = self._warm
        return runner.stats if runner is not None else None

    def reserve(self, jobs: int) -> None:
        """Size the warm pools for ``jobs`` runs at once, ahead of grading (``grade_many`` does
        it for its own ``jobs``; a caller that grades one request at a time from ``jobs`` threads
        calls this first). Does nothing without ``warm``."""
        runner = self._warm_runner()
        if runner is not None:
            runner.reserve(max(1, jobs))

    def close(self) -> None:
        """Stop the warm workers, if any (grading still works afterwards, cold)."""
        with self._warm_lock:
            runner, self._warm, self.warm = self._warm, None, False
        if runner is not None:
            runner.close()

    def __enter__(self) -> Grader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def expected_tests(self, task: Task) -> frozenset[str] | None:
        """The tests ``task`` declares: those its pristine reference reports, collected once per
        task by this grader (a reference run) and kept. None while no reference run could be had
        (it failed in the sandbox: asked again next time); empty where the reference did not
        pass (then no run is held to a set)."""
        return self._expectation(task)[0]

    def _expectation(self, task: Task) -> tuple[frozenset[str] | None, GradeResult | None]:
        """:meth:`expected_tests`, and the reference's result where the sandbox failed it."""
        key = _expectation_key(task)
        with self._expected_lock:
            if key in self._expected:
                return self._expected[key], None
            lock = self._expected_locks.setdefault(key, threading.Lock())
        with lock:  # one reference run per task, however many candidates wait for it
            with self._expected_lock:
                if key in self._expected:
                    return self._expected[key], None
            reference = self._grade(GradeRequest(task, Phase.REFERENCE, label="expected-tests"))
            if reference.status is not GradeStatus.GRADED:
                return None, reference
            # Only a reference that passes declares its tests: a failing one may report a
            # collection error in their place (check-tasks calls such a task defective).
            found = frozenset(t.id for t in reference.tests if t.outcome is not Outcome.MISSING) \
                if reference.passed else frozenset()
            with self._expected_lock:
                self._expected[key] = found
            return found, None

    def grade(self, req: GradeRequest) -> GradeResult:
        """Lay out the phase, run the task's test command, judge the evidence.

        A candidate, mutant or probe is held to the tests the task declares (``expected_tests``;
        where the request names none, :meth:`expected_tests` collects them once from the
        reference): one its run does not report counts as failed, never as absent. Where the
        sandbox failed that reference run, the request is an ``infra_error`` too (it could not
        be graded soundly) and the next request asks again."""
        # A mutant stopped at its first failure is judged by the tests that ran; any other
        # phase is held to the declared tests even when it stops early (a missing one fails).
        if (req.phase in EXPECTING_PHASES and req.expected_tests is None and req.select_tests is None
                and not (req.fail_fast and req.phase is Phase.MUTANT)):
            expected, failure = self._expectation(req.task)
            if failure is not None:
                return replace(failure, phase=req.phase, seed=req.seed, label=req.label, ignored_files=(),
                               problems=tuple(f"collecting the task's declared tests: {p}"
                                              for p in failure.problems))
            if expected:  # None or empty: nothing to hold the run to
                req = replace(req, expected_tests=expected)
        return self._grade(req)

    def _grade(self, req: GradeRequest) -> GradeResult:
        started = time.monotonic()
        task = req.task
        kind = kind_of(task)
        if kind.needs_image and not (self.sandbox.runs_in_image or self.sandbox.runs_over_root):
            # Such a kind runs itself in a container or over an image's root: nothing to build here.
            declared = spec_of(task) if task.environment.declared else None
            return environment_error(req, self.sandbox.name, EnvironmentBuildError(
                declared.id if declared is not None else task.id,
                f"kind '{kind.name}' runs in its environment's image: grade {task.id} with --sandbox docker "
                f"or bwrap (its trials on {self.sandbox.name} are not built)"), started)
        try:
            realised = self.environments.realise(task)
        except EnvironmentBuildError as e:
            return environment_error(req, self.sandbox.name, e, started)
        if realised is not None and realised.python == "" and not kind.runs_itself(task) and kind.needs_python(task):
            return environment_error(req, self.sandbox.name, EnvironmentBuildError(
                realised.identity, f"its image has no Python interpreter, and kind '{kind.name}' runs one "
                f"({kind.test_command(task).split(chr(10))[0][:120]}): install python3 in the image, or grade "
                "the task with a kind that needs none (command, node)"), started)
        if kind.runs_itself(task):
            image = realised.image if realised and realised.image else task.environment.image
            # the layer only where there is one: a plugin kind written before it keeps its signature
            over = {"layer": realised.layer} if realised is not None and realised.layer is not None else {}
            own = kind.run_phase(task, req.phase, req.candidate, sandbox=self.sandbox, image=image, **over)
            result = judge(task, req, own.run, started, own.ignored,
                           isolation=IsolationPlan(own.isolation or IN_PROCESS, own.notes))
            return replace(result, environment=realised.identity) if realised else result
        try:
            root = Path(tempfile.mkdtemp(prefix=f"verify-{req.phase.value}-",
                                        dir=self.work_root if self.work_root is not None else scratch_root()))
        except OSError as e:  # the host's scratch disk, never the candidate's answer
            return self._unlaid(req, started, f"cannot create the run's work folder: {e}")
        seal_key = new_seal_key() if kind.needs_seal_key(task) else None
        try:
            try:
                laid = lay_out(task, req.phase, root, req.candidate)
            except OSError as e:  # a candidate file that cannot be written is ignored inside
                return self._unlaid(req, started, f"cannot lay out the work folder: {e}")
            plan = plan_isolation(task, self.sandbox, coverage=bool(req.coverage_files))
            refuse_in_process_candidate(req, self.sandbox, plan)
            env = request_environment(req, seal_key)
            candidate = None
            if plan.two_process and plan.runtime is not None:
                env.update(plan.runtime.trusted_env(task, root, env))
                candidate = candidate_process(task, plan, env, root)
            spec = RunSpec(command=["/bin/sh", "-c", kind.test_command(task)], workdir=root,
                           limits=request_limits(req), env=env,
                           image=realised.image if realised and realised.image else task.environment.image,
                           runtime=task.environment.runtime,
                           labels={"verify-cli.task": task.id, "verify-cli.phase": req.phase.value},
                           candidate=candidate, layer=realised.layer if realised else None)
            try:
                runner = self._warm_runner()
                run = runner.run(task, req.phase, spec) if runner else self.sandbox.run(spec)
            except Exception as e:  # a backend bug must not become a score
                run = RunResult(Verdict.INFRA_ERROR, self.sandbox.name, message=f"{type(e).__name__}: {e}")
            result = judge(task, req, run, started, laid.ignored, seal_key=seal_key, isolation=plan)
            return replace(result, environment=realised.identity) if realised else result
        finally:
            shutil.rmtree(root, ignore_errors=True)

    def _unlaid(self, req: GradeRequest, started: float, message: str) -> GradeResult:
        """The ``infra_error`` of a request whose work folder could not be made or filled."""
        run = RunResult(Verdict.INFRA_ERROR, self.sandbox.name, message=message)
        return GradeResult(task_id=req.task.id, phase=req.phase, status=GradeStatus.INFRA_ERROR, score=None,
                           passed=False, tests=(), run=run, problems=(f"sandbox infra_error: {message}",),
                           seed=req.seed, label=req.label, seconds=time.monotonic() - started)

    def grade_many(self, requests: Iterable[GradeRequest], *, jobs: int = 2,
                   on_result: Callable[[GradeResult], None] | None = None) -> Iterator[GradeResult]:
        """Grade ``requests`` on ``jobs`` threads, yielding results as they complete (unordered).

        At most ``2 * jobs`` requests are in flight, so an endless generator of candidates
        streams through in bounded memory.
        """
        it = iter(requests)
        self.reserve(jobs)
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
