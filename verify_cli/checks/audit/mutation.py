"""Mutation check: mutants of the reference's editable files, each graded like a candidate.

A mutant is killed when a test fails (or the run crashes or times out) and survives when every
test passes. Where the task's kind traces coverage (pytest), a traced baseline run tells which
tests execute each mutated statement: only those run (a mutant no test executes survives without
a run), and, where the kind can stop early, the run stops at its first failing test. Other kinds
run every test.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from verify_cli.checks.audit.coverage import Coverage, parse_coverage, statement_lines
from verify_cli.checks.audit.model import AuditOptions, MutantResult, MutantStatus, MutationReport
from verify_cli.checks.mutation import LANGUAGES, Mutant, MutantSet, generate_mutants
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.junit import Outcome
from verify_cli.grading.workspace import Phase, is_repository_test_file, solution_as_candidate
from verify_cli.kinds.registry import kind_of
from verify_cli.sandbox.base import Verdict
from verify_cli.tasks.file_states import is_removed
from verify_cli.tasks.model import Task
from verify_cli.tasks.paths import matches_any

#: A mutant's wall limit: this many times the baseline run, plus a margin (within the task's).
TIMEOUT_FACTOR = 4.0
TIMEOUT_MARGIN = 2.0
MIN_TIMEOUT = 5.0
#: A test's limit in a run that stops at its first failure: TIMEOUT_FACTOR times the slowest
#: test of the reference's run, plus this margin, at least MIN_TEST_TIMEOUT.
TEST_TIMEOUT_MARGIN = 1.0
MIN_TEST_TIMEOUT = 2.0
#: How the pytest harness fails a test cut by its per-test limit (its plugin's own constant).
TEST_TIMEOUT_MESSAGE = "the test ran past its time limit (VERIFY_TEST_TIMEOUT)"


def editable_sources(task: Task) -> dict[str, str]:
    """The reference's editable text files, as a candidate would ship them: the source files its
    solution (or gold patch) writes, never a test file of the project (a repository task's editable
    globs may reach its tests; mutating them would measure nothing)."""
    out: dict[str, str] = {}
    for rel, data in solution_as_candidate(task).items():
        # A file the reference removes stays removed: a mutant's layout starts from its removals.
        if matches_any(task.editable, rel) and not is_repository_test_file(task, rel) and not is_removed(data):
            try:
                out[rel] = data.decode("utf-8")
            except UnicodeDecodeError:
                continue
    return out


def traces_coverage(task: Task, options: AuditOptions) -> bool:
    return options.select_by_coverage and kind_of(task).traces_coverage(task)


def baseline_request(task: Task, options: AuditOptions, label: str,
                     mutants: MutantSet | None = None) -> GradeRequest:
    """The unmutated reference, laid out like a mutant, traced for coverage where possible:
    given the sampled ``mutants``, only the functions that hold one of their statements (a
    project's module runs untraced elsewhere, where a line tracer would slow every test)."""
    files = editable_sources(task)
    coverage = tuple(p for p in files if p.endswith(".py")) if traces_coverage(task, options) else ()
    wanted: dict[str, set[int]] = {}
    if coverage and mutants is not None:
        for m in mutants.mutants:
            wanted.setdefault(m.path, set()).update(statement_lines(m.original_source, m.line, m.col))
    lines = tuple((p, tuple(sorted(wanted.get(p, ())))) for p in coverage) if wanted else ()
    return GradeRequest(task, Phase.MUTANT, candidate={k: v.encode() for k, v in files.items()},
                        coverage_files=coverage, coverage_lines=lines, label=label)


def derived_wall_seconds(task: Task, reference_seconds: float) -> float:
    """The wall limit of a run audit makes of ``task`` (a mutant, a probe): TIMEOUT_FACTOR times
    the reference's measured time plus TIMEOUT_MARGIN, at least MIN_TIMEOUT, never above the
    task's own limit (an imported repository task's 900 s would let one hanging run cost 15 minutes)."""
    wall = max(MIN_TIMEOUT, TIMEOUT_FACTOR * reference_seconds + TIMEOUT_MARGIN)
    return min(wall, task.limits.wall_seconds)


def derived_test_seconds(reference: GradeResult, wall_seconds: float) -> float | None:
    """The per-test limit of a run audit makes that stops at its first failure (a mutant, a
    probe), from ``reference``'s graded run: a test that hangs then ends the run in seconds
    instead of holding it to ``wall_seconds``. None where the run reported no test durations."""
    durations = [t.duration for t in reference.tests if t.outcome.ok]
    if reference.status is not GradeStatus.GRADED or not durations:
        return None
    limit = max(MIN_TEST_TIMEOUT, TIMEOUT_FACTOR * max(durations) + TEST_TIMEOUT_MARGIN)
    return limit if limit < wall_seconds else None


def make_mutants(task: Task, options: AuditOptions) -> MutantSet | None:
    """The sampled mutants of the task's editable files; None for a language without operators."""
    if task.language not in LANGUAGES:
        return None
    return generate_mutants(editable_sources(task), language=task.language, seed=options.seed,
                            max_mutants=options.max_mutants, max_per_operator=options.max_per_operator)


@dataclass
class MutationPlan:
    """What the baseline run settled for one task's mutants."""

    task: Task
    mutants: MutantSet
    baseline: GradeResult
    coverage: Coverage | None
    quarantined: frozenset[str]  # tests that fail on the unmutated reference: they judge nothing
    baseline_tests: frozenset[str]
    wall_seconds: float
    fail_fast: bool
    #: With ``fail_fast``: each test's limit (:func:`derived_test_seconds`).
    test_seconds: float | None = None

    def selection(self, mutant: Mutant) -> frozenset[str] | None:
        """The tests to run for ``mutant`` (None: all of them)."""
        if self.coverage is None:
            return None
        lines = statement_lines(mutant.original_source, mutant.line, mutant.col)
        tests = self.coverage.tests_for(mutant.path, lines)
        if tests is None:
            return None if not self.quarantined else self.baseline_tests - self.quarantined
        return tests - self.quarantined

    def request(self, mutant: Mutant, label: str) -> GradeRequest | None:
        """The mutant's grading request; None when no test executes it."""
        selected = self.selection(mutant)
        if selected is not None and not selected:
            return None
        files = {k: v.encode() for k, v in editable_sources(self.task).items()}
        files[mutant.path] = mutant.mutated_source.encode()
        return GradeRequest(self.task, Phase.MUTANT, candidate=files, select_tests=selected,
                            fail_fast=self.fail_fast, wall_seconds=self.wall_seconds,
                            test_seconds=self.test_seconds if self.fail_fast else None, label=label)


def plan_mutants(task: Task, mutants: MutantSet, baseline: GradeResult,
                 options: AuditOptions) -> MutationPlan | str:
    """The plan for ``task``'s mutants, or why they cannot be judged."""
    if baseline.status is GradeStatus.INFRA_ERROR:
        return f"the baseline run failed in the sandbox: {'; '.join(baseline.problems)}"
    passing = frozenset(t.id for t in baseline.tests if t.outcome.ok)
    if not passing:
        return ("the unmutated reference passes no test here: "
                + ("; ".join(baseline.problems) or "every test failed"))
    quarantined = frozenset(t.id for t in baseline.tests if not t.outcome.ok)
    coverage = parse_coverage(baseline.run.results) if traces_coverage(task, options) else None
    wall = derived_wall_seconds(task, baseline.run.wall_seconds)
    return MutationPlan(task, mutants, baseline, coverage, quarantined, passing, wall,
                        options.fail_fast and kind_of(task).stops_early(task),
                        derived_test_seconds(baseline, wall))


def judge_mutant(plan: MutationPlan, mutant: Mutant, result: GradeResult | None,
                 selected: frozenset[str] | None) -> MutantResult:
    """Killed, survived, timed out or lost, from the mutant's graded run (None: not run)."""
    common = dict(id=mutant.id, path=mutant.path, operator=mutant.operator, line=mutant.line,
                  description=mutant.description, diff=mutant.diff(),
                  selected_tests=None if selected is None else len(selected))
    if result is None:
        return MutantResult(status=MutantStatus.NOT_COVERED,
                            message="no test executes this statement", **common)  # type: ignore[arg-type]
    if result.status is GradeStatus.INFRA_ERROR:
        return MutantResult(status=MutantStatus.ERROR, message="; ".join(result.problems),
                            seconds=result.seconds, **common)  # type: ignore[arg-type]
    # Tests that ran and failed; a test missing from the results (not run after a fail-fast stop,
    # or lost to a crash) is no evidence of what it would have caught.
    failed = tuple(t.id for t in result.tests if t.outcome in (Outcome.FAILED, Outcome.ERROR)
                   and t.id not in plan.quarantined)
    if result.run.verdict is Verdict.TIMEOUT or any(TEST_TIMEOUT_MESSAGE in t.message for t in result.tests
                                                    if t.id in failed):
        status = MutantStatus.TIMEOUT
    elif result.passed:
        status = MutantStatus.SURVIVED
    elif failed or result.run.verdict not in (Verdict.OK, Verdict.NONZERO_EXIT) or not result.tests:
        status = MutantStatus.KILLED
    elif all(t.outcome.ok or t.id in plan.quarantined for t in result.tests):
        status = MutantStatus.SURVIVED  # only quarantined tests failed
    else:
        status = MutantStatus.KILLED  # tests went missing: the run broke
    return MutantResult(status=status, killed_by=failed if status.killed else (),
                        seconds=result.seconds, message="; ".join(result.problems)[:500],
                        **common)  # type: ignore[arg-type]


def equivalent_result(mutant: Mutant) -> MutantResult:
    """A mutant proven to behave as the reference: never run, never counted."""
    return MutantResult(id=mutant.id, path=mutant.path, operator=mutant.operator, line=mutant.line,
                        description=mutant.description, diff=mutant.diff(),
                        status=MutantStatus.EQUIVALENT, reason="bytecode",
                        message="compiles to the same bytecode as the reference")


def summarise(plan: MutationPlan | None, mutants: MutantSet, results: Iterable[MutantResult],
              *, skipped: str = "") -> MutationReport:
    ranked = sorted(results, key=lambda m: (m.path, m.line, m.id))
    ordered = [m for m in ranked if m.status is not MutantStatus.EQUIVALENT]
    observed = [m for m in ranked if m.status is MutantStatus.EQUIVALENT]  # equivalent by their traces
    report = MutationReport(mutants=ordered, dropped_uncompilable=mutants.dropped_uncompilable,
                            by_operator=dict(mutants.by_operator), drawn_first=mutants.drawn_first, skipped=skipped,
                            equivalent=[equivalent_result(m) for m in mutants.equivalent] + observed)
    if plan is None:
        return report
    report.fail_fast = plan.fail_fast
    report.quarantined = sorted(plan.quarantined)
    report.selection = ("tests covering the mutated statement (traced reference run)"
                        if plan.coverage is not None else "all tests")
    kills = dict.fromkeys(sorted(plan.baseline_tests), 0)
    for m in ordered:
        for tid in m.killed_by:
            if tid in kills:
                kills[tid] += 1
    report.per_test_kills = kills
    report.seconds = sum(m.seconds for m in ordered)
    return report
