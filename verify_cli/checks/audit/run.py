"""``audit``: measure how far each task's tests can be trusted.

Per task: a mutation score (with the surviving mutants and what each test kills), flaky tests
over ``reruns`` fresh reference runs, a battery of reward-hack probes, and, where a task has
them, the tests' rates on labelled correct and incorrect solutions. Everything is graded through
:class:`~verify_cli.grading.Grader`, in two waves: the traced baseline runs, then everything else
(reruns, probes, labelled solutions and the mutants the baselines planned) in one parallel stream.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from verify_cli.checks.audit.flakiness import flakiness_report, rerun_requests
from verify_cli.checks.audit.labelled import judge_labelled, labelled_requests
from verify_cli.checks.audit.model import (
    AuditOptions,
    LabelledReport,
    MutantResult,
    MutantStatus,
    MutationReport,
    TaskAudit,
)
from verify_cli.checks.audit.mutation import (
    MutationPlan,
    baseline_request,
    derived_test_seconds,
    derived_wall_seconds,
    judge_mutant,
    make_mutants,
    plan_mutants,
    summarise,
)
from verify_cli.checks.audit.observed import (
    Trace,
    judge_observed,
    mutant_request,
    read_trace,
    reference_request,
    traceable,
)
from verify_cli.checks.audit.probing import judge_probe, probe_requests, stop_early, trick_files
from verify_cli.checks.mutation import MutantSet
from verify_cli.checks.probes import probes_for
from verify_cli.checks.two_process_gaps import find_gaps
from verify_cli.grading.batch import BatchGrader
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.two_process import TWO_PROCESS
from verify_cli.grading.workspace import Phase
from verify_cli.tasks.loader import TaskLoadFailure
from verify_cli.tasks.model import Isolation, Task

#: At most this many waiting probes run at once beside the main stream.
MAX_IDLE_JOBS = 16


@dataclass(frozen=True)
class AuditProgress:
    """``done`` of ``total`` sandboxed runs finished; ``what`` names the last one."""

    done: int
    total: int
    task_id: str
    what: str


AuditProgressCallback = Callable[[AuditProgress], None]


@dataclass
class _TaskState:
    task: Task
    audit: TaskAudit
    mutants: MutantSet | None = None
    plan: MutationPlan | None = None
    mutant_results: list[MutantResult] = field(default_factory=list)
    mutants_done_at: float | None = None  # time.monotonic() of the last mutant result
    reruns: list[GradeResult] = field(default_factory=list)
    reference_trace: Trace | None = None
    baseline: GradeResult | None = None
    #: The reference's measured run time (an untraced timing run's): the probes' wall limit is
    #: derived from it.
    reference_seconds: float | None = None
    #: The timing run itself: which tests a probe may stop at, and each test's limit there.
    reference_run: GradeResult | None = None


class _Stream:
    """Grades labelled requests, routes each result to its handler, reports progress."""

    def __init__(self, grader: BatchGrader, jobs: int, on_progress: AuditProgressCallback | None) -> None:
        self.grader = grader
        self.jobs = jobs
        self.on_progress = on_progress
        self.done = 0
        self.total = 0
        self._handlers: dict[str, tuple[str, Callable[[GradeResult], None]]] = {}
        self._n = 0
        self._lock = threading.RLock()

    def add(self, request: GradeRequest, what: str, handler: Callable[[GradeResult], None]) -> GradeRequest:
        self._n += 1
        label = f"{self._n}:{request.label}"
        self._handlers[label] = (what, handler)
        return replace(request, label=label)

    def tick(self, task_id: str, what: str) -> None:
        with self._lock:
            self.done += 1
            if self.on_progress:
                self.on_progress(AuditProgress(self.done, self.total, task_id, what))

    def run(self, requests: Iterable[GradeRequest], jobs: int | None = None) -> None:
        for result in self.grader.grade_many(requests, jobs=jobs or self.jobs):
            with self._lock:
                what, handler = self._handlers.pop(result.label)
                handler(result)
            self.tick(result.task_id, what)

    def run_beside(self, requests: list[GradeRequest]) -> threading.Thread | None:
        """Grade ``requests`` (runs that wait, not compute) on their own threads, now."""
        if not requests:
            return None
        thread = threading.Thread(target=self.run, args=(requests, min(len(requests), MAX_IDLE_JOBS)),
                                  name="audit-idle", daemon=True)
        thread.start()
        return thread


def audit_tasks(items: Iterable[Task | TaskLoadFailure], grader: BatchGrader, options: AuditOptions,
                *, on_progress: AuditProgressCallback | None = None) -> list[TaskAudit]:
    """Audit every task; reports come back in the order of ``items``."""
    ordered = list(items)
    states: list[_TaskState | TaskAudit] = []
    for item in ordered:
        if isinstance(item, TaskLoadFailure):
            states.append(TaskAudit(item.id, str(item.root), "?", defects=[f"does not load: {item.error}"]))
        else:
            states.append(_TaskState(item, TaskAudit(item.id, str(item.root), item.language,
                                                     isolation=item.isolation)))
    live = [s for s in states if isinstance(s, _TaskState)]
    stream = _Stream(grader, options.jobs, on_progress)

    # What each task needs, counted up front for the progress bar.
    wave1: list[GradeRequest] = []
    wave2: list[GradeRequest] = []
    idle: list[GradeRequest] = []
    for state in live:
        task = state.task
        if options.mutants:
            state.mutants = make_mutants(task, options)
            if state.mutants is None:
                state.audit.mutation = MutationReport(skipped=f"no mutation operators for {task.language}")
            elif not state.mutants.mutants:
                state.audit.mutation = summarise(None, state.mutants, [],
                                                 skipped="no mutant could be made of the editable files")
            else:
                stream.total += len(state.mutants.mutants)
                wave1.append(stream.add(baseline_request(task, options, task.id, state.mutants), "baseline",
                                        _on_baseline(state, options)))
        if options.flaky and options.reruns > 0:
            for req in rerun_requests(task, options.reruns, task.id):
                wave2.append(stream.add(req, "rerun", state.reruns.append))
        if options.probes:
            state.audit.probes = []
            stream.total += len(probe_requests(task, options.probe_names, task.id))  # built after wave 1
            # Timed untraced: the mutants' baseline traces coverage, which can make it many times
            # slower (a project's whole test file under sys.settrace) and the probes' limit as loose.
            wave1.append(stream.add(GradeRequest(task, Phase.REFERENCE, label=task.id), "reference timing",
                                    _on_timing(state)))
        if options.labelled:
            runs = labelled_requests(task, task.id)
            if runs:
                state.audit.labelled = LabelledReport()
            for kind, name, req in runs:
                wave2.append(stream.add(req, f"labelled {kind}/{name}", _on_labelled(state, kind, name)))
    stream.total += len(wave1) + len(wave2) + len(idle)

    stream.run(wave1)
    for state in live:  # probes under a wall limit derived from the reference's measured time
        if state.audit.probes is None:
            continue
        measured = state.reference_seconds
        wall = derived_wall_seconds(state.task, measured) if measured is not None else None
        timing = state.reference_run
        early = None
        if options.fail_fast:
            early = stop_early(state.task, [t.id for t in timing.tests] if timing else None,
                               derived_test_seconds(timing, wall) if timing and wall else None)
        for probe, req in probe_requests(state.task, options.probe_names, state.task.id, wall, early):
            (idle if probe.idle else wave2).append(
                stream.add(req, f"probe {probe.name}",
                           _on_probe(state, probe, trick_files(probe, req), early is not None)))
    beside = stream.run_beside(idle)
    for state in live:  # mutants no test executes survive without a run
        if state.plan is None and state.mutants is not None:
            stream.total -= len(state.mutants.mutants)  # the baseline failed: none will run
        if state.plan is not None:
            for mutant in state.plan.mutants.mutants:
                planned = state.plan.request(mutant, state.task.id)
                if planned is None:
                    state.mutant_results.append(judge_mutant(state.plan, mutant, None, frozenset()))
                    stream.tick(state.task.id, "mutant (not covered)")
                else:
                    wave2.append(stream.add(planned, "mutant", _on_mutant(state, mutant, planned.select_tests)))
    mutants_started = time.monotonic()
    stream.run(wave2)
    if beside is not None:
        beside.join()
    if options.observed_equivalence:
        _observe_survivors(live, stream)
    _recheck_in_process(live, stream, options)

    for state in live:
        if state.plan is not None and state.mutants is not None:
            state.audit.mutation = summarise(state.plan, state.mutants, state.mutant_results)
            if state.mutants_done_at is not None:
                state.audit.mutation.wall_seconds = max(0.0, state.mutants_done_at - mutants_started)
        if options.flaky and options.reruns > 0:
            state.audit.flakiness = flakiness_report(state.reruns)
            if state.audit.flakiness.errors:
                state.audit.problems.append(
                    f"{state.audit.flakiness.errors} of {options.reruns} reruns failed in the sandbox")
        if state.audit.probes:
            order = {p.name: i for i, p in enumerate(probes_for(state.task.language))}
            state.audit.probes.sort(key=lambda p: order.get(p.name, 0))
            lost = [p.name for p in state.audit.probes if p.error]
            if lost:
                state.audit.problems.append(f"probe(s) lost to the sandbox: {', '.join(lost)}")
    return [s.audit if isinstance(s, _TaskState) else s for s in states]


def _two_process_evidence(state: _TaskState, options: AuditOptions) -> list[GradeResult]:
    """The two-process reference runs the audit's reference failures come from."""
    runs = [r for r in state.reruns if r.status is GradeStatus.GRADED] if options.flaky else []
    if not runs and state.baseline is not None:
        runs = [state.baseline]
    return [r for r in runs if r.isolation == TWO_PROCESS]


def _recheck_in_process(live: list[_TaskState], stream: _Stream, options: AuditOptions) -> None:
    """A reference that failed tests two-process is re-run once in-process: the tests that pass
    there are two-process gaps (the test uses something the boundary does not carry), reported
    as such, never as the reference's failures."""
    pending: list[tuple[_TaskState, list[GradeResult], list[GradeResult]]] = []
    requests: list[GradeRequest] = []
    for state in live:
        if state.audit.flakiness is None and options.flaky and options.reruns > 0:
            state.audit.flakiness = flakiness_report(state.reruns)
        evidence = _two_process_evidence(state, options)
        if not evidence or not state.audit.reference_failures:
            continue
        landed: list[GradeResult] = []
        pending.append((state, evidence, landed))
        requests.append(stream.add(GradeRequest(replace(state.task, isolation=Isolation.IN_PROCESS),
                                                Phase.REFERENCE, seed=evidence[0].seed, label=state.task.id),
                                   "reference (in-process re-run)", landed.append))
    if not requests:
        return
    stream.total += len(requests)
    stream.run(requests)
    for state, evidence, landed in pending:
        if landed and landed[0].status is GradeStatus.GRADED:
            state.audit.two_process_gaps = list(find_gaps(state.task, evidence, landed[0]).gaps)


def _observe_survivors(live: list[_TaskState], stream: _Stream) -> None:
    """Survivors of traceable tasks: a traced reference run, then a traced run of each, judged
    equivalent (observed) when the traces match (checks/audit/observed.py)."""
    waiting = [s for s in live if s.plan is not None and traceable(s.task)
               and any(m.status is MutantStatus.SURVIVED for m in s.mutant_results)]
    if not waiting:
        return
    references = []
    for state in waiting:
        assert state.plan is not None
        references.append(stream.add(reference_request(state.plan, state.task.id), "reference (traced)",
                                     _on_reference(state)))
    stream.total += len(references)
    stream.run(references)
    confirms = []
    for state in waiting:
        if state.plan is None or state.reference_trace is None:
            continue
        by_id = {m.id: m for m in state.plan.mutants.mutants}
        for i, m in enumerate(state.mutant_results):
            if m.status is MutantStatus.SURVIVED and m.id in by_id:
                confirms.append(stream.add(mutant_request(state.plan, by_id[m.id], state.task.id),
                                           "survivor (traced)", _on_traced_survivor(state, i)))
    stream.total += len(confirms)
    stream.run(confirms)


def _on_reference(state: _TaskState) -> Callable[[GradeResult], None]:
    def handle(result: GradeResult) -> None:
        state.reference_trace = read_trace(state.task, result)
    return handle


def _on_traced_survivor(state: _TaskState, index: int) -> Callable[[GradeResult], None]:
    def handle(result: GradeResult) -> None:
        state.mutant_results[index] = judge_observed(state.task, state.mutant_results[index],
                                                     state.reference_trace, result)
    return handle


def _on_baseline(state: _TaskState, options: AuditOptions) -> Callable[[GradeResult], None]:
    def handle(result: GradeResult) -> None:
        if state.mutants is None:
            return
        if result.status is GradeStatus.GRADED:
            state.baseline = result
            state.audit.baseline_failures = sorted(t.id for t in result.tests if not t.outcome.ok)
        plan = plan_mutants(state.task, state.mutants, result, options)
        if isinstance(plan, str):
            state.audit.mutation = summarise(None, state.mutants, [], skipped=plan)
            if not state.audit.baseline_failures:  # else a finding: the reference fails its tests
                state.audit.problems.append(f"mutation check: {plan}")
        else:
            state.plan = plan
    return handle


def _on_timing(state: _TaskState) -> Callable[[GradeResult], None]:
    def handle(result: GradeResult) -> None:
        if result.status is GradeStatus.GRADED:
            state.reference_seconds = result.run.wall_seconds
            state.reference_run = result
    return handle


def _on_mutant(state: _TaskState, mutant: Any, selected: frozenset[str] | None) -> Callable[[GradeResult], None]:
    def handle(result: GradeResult) -> None:
        if state.plan is not None:
            state.mutant_results.append(judge_mutant(state.plan, mutant, result, selected))
            state.mutants_done_at = time.monotonic()
    return handle


def _on_probe(state: _TaskState, probe: Any, tricks: tuple[str, ...],
              stopped_early: bool) -> Callable[[GradeResult], None]:
    def handle(result: GradeResult) -> None:
        if state.audit.probes is not None:
            state.audit.probes.append(judge_probe(probe, result, tricks, stopped_early))
    return handle


def _on_labelled(state: _TaskState, kind: str, name: str) -> Callable[[GradeResult], None]:
    def handle(result: GradeResult) -> None:
        if state.audit.labelled is not None:
            state.audit.labelled.runs.append(judge_labelled(kind, name, result))
    return handle
