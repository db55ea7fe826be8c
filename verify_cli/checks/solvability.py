"""check-tasks: prove each task sound (solvable, non-trivial, reliable) by grading it repeatedly.

For every task: the reference passes every test in each of ``repeats`` fresh sandboxes with
shuffled test order and varied hash seeds; the starter fails at least one test; no test changes
outcome between repeats; the reference leaves headroom under the wall limit.

Repeats are what catch a flaky test: one that fails a run with probability ``p`` shows in ``n``
runs with probability ``1 - (1 - p)**n`` (:func:`detection_power`). The default repeat count is
the smallest that catches a one-in-four flaky test with 95% probability (11 runs: 95.8%). They
run in two waves: the first ``first_wave`` repeats with the starter, then the rest only for the
tasks whose reference passed every first-wave run; once the reference has failed, the task is
defective and more runs would only add detail. A reference that failed two-process is re-run once
in-process; where that says every failure is a two-process gap (not gradeable two-process), the
rest of the repeats are made too, since only a failure in every one of them is a gap (a flaky
test can fail the first wave and pass the re-run).
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from verify_cli.checks.cache import ResultCache, cache_key
from verify_cli.checks.editable import editable_reach
from verify_cli.checks.fail_to_pass import fail_to_pass_checks
from verify_cli.checks.flaky_power import (
    DEFAULT_REPEATS,
    FLAKE_RATE,
    TARGET_POWER,
    FlakinessPower,
    detection_power,
    repeats_for_power,
)
from verify_cli.checks.git_history import git_history_findings
from verify_cli.checks.report import ENVIRONMENT_CHECK, CheckResult, CheckStatus, TaskReport, TaskVerdict
from verify_cli.checks.two_process_gaps import Gap, GapFindings, find_gaps
from verify_cli.environments import spec_of
from verify_cli.grading.batch import BatchGrader
from verify_cli.grading.grader import ENVIRONMENT_ERROR, GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.junit import Outcome
from verify_cli.grading.scoring import TestLists
from verify_cli.grading.two_process import TWO_PROCESS
from verify_cli.grading.workspace import Phase
from verify_cli.kinds.registry import kind_of
from verify_cli.tasks.loader import TaskLoadFailure
from verify_cli.tasks.model import Isolation, Task

HEADROOM_FACTOR = 3.0

__all__ = [
    "DEFAULT_REPEATS",
    "FIRST_WAVE",
    "FLAKE_RATE",
    "TARGET_POWER",
    "CheckOptions",
    "FlakinessPower",
    "Progress",
    "check_tasks",
    "detection_power",
    "evaluate",
    "repeats_for_power",
]

#: Repeats run before deciding whether a task needs the rest.
FIRST_WAVE = 3
#: The label suffix of the one in-process re-run of a reference that failed two-process.
IN_PROCESS_RECHECK = "in-process"


@dataclass(frozen=True)
class CheckOptions:
    """``repeats`` reference runs per task; the first ``first_wave`` of them decide whether the
    rest are needed (they are not once the reference has failed)."""

    repeats: int = DEFAULT_REPEATS
    jobs: int = 2
    first_wave: int = FIRST_WAVE
    #: Repository tasks (those listing FAIL_TO_PASS/PASS_TO_PASS): judge every collected test for
    #: flakiness, not only the listed ones (SWE-bench's own curation judges the listed ones).
    flaky_all_tests: bool = False

    @property
    def power(self) -> FlakinessPower:
        return FlakinessPower(self.repeats)


@dataclass(frozen=True)
class Progress:
    """One step of check-tasks: ``done`` of ``total`` sandbox runs finished."""

    done: int
    total: int
    task_id: str
    phase: str


ProgressCallback = Callable[[Progress], None]


def _load_failure_report(failure: TaskLoadFailure) -> TaskReport:
    return TaskReport(task_id=failure.id, path=str(failure.root), domain="?", language="?",
                      checks=[CheckResult("schema", CheckStatus.FAIL, str(failure.error))])


def first_line(message: str) -> str:
    """A failure message's first non-blank line, and the candidate's frame where it names one."""
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    if not lines:
        return ""
    frame = next((ln for ln in lines[1:] if ln.startswith("in the candidate's code:")), "")
    return lines[0][:200] + (f" ({frame[len('in the '):][:200]})" if frame else "")


def _summarise_failures(r: GradeResult, limit: int = 3, only: set[str] | None = None) -> str:
    failed = [t for t in r.tests if not t.outcome.ok and (only is None or t.id in only)]
    parts = [f"{t.id} {t.outcome.value}" for t in failed[:limit]]
    if failed and failed[0].message:
        parts[0] += f": {first_line(failed[0].message)}"
    if len(failed) > limit:
        parts.append(f"and {len(failed) - limit} more")
    parts.extend(r.problems)
    return "; ".join(parts) or "did not pass"


def _gap_check(findings: GapFindings, runs: int) -> CheckResult:
    """The honest verdict on tests that pass in-process and fail only two-process."""
    by_idiom: dict[str, list[Gap]] = {}
    for gap in findings.gaps:
        by_idiom.setdefault(gap.idiom, []).append(gap)
    parts = []
    for idiom, gaps in sorted(by_idiom.items()):
        shown = ", ".join(g.test_id for g in gaps[:2]) + (f" and {len(gaps) - 2} more" if len(gaps) > 2 else "")
        parts.append(f"the test uses {idiom} ({shown}; two-process: {gaps[0].failure})")
    remedies = sorted({g.remedy for g in findings.gaps})
    return CheckResult("two-process", CheckStatus.NOT_GRADEABLE,
                       f"not gradeable two-process: {'; '.join(parts)}. The reference passes these "
                       f"in-process (re-run once after {runs} two-process run(s)). Remedy: "
                       + "; or ".join(remedies))


def _passed(run: GradeResult, tid: str) -> bool:
    return any(t.id == tid and t.outcome.ok for t in run.tests)


def grader_nondeterministic(references: Sequence[GradeResult], flaky: Sequence[str],
                           same_seed_runs: Sequence[GradeResult]) -> list[str]:
    """Of the tests that changed outcome between two-process repeats, those the grader's
    nondeterminism explains: each two-process run that did not pass one fails it again every
    time it is re-run two-process under the same seed (:data:`SAME_ORDER_REPEATS` times: the
    same test order, so the failure is the order's, not chance's) and passes it in-process under
    that seed (so it is two-process grading's, not the task's). A randomly flaky test passes one
    of those re-runs or fails in-process too. ``same_seed_runs``: graded re-runs, two-process
    and in-process, by their seeds."""
    again: dict[int | None, list[GradeResult]] = {}
    in_process: dict[int | None, list[GradeResult]] = {}
    for r in same_seed_runs:
        if r.status is GradeStatus.GRADED:
            (again if r.isolation == TWO_PROCESS else in_process).setdefault(r.seed, []).append(r)
    out: list[str] = []
    for tid in flaky:
        failing = [r for r in references if r.status is GradeStatus.GRADED and r.isolation == TWO_PROCESS
                   and not _passed(r, tid)]
        if failing and all(
                len(again.get(r.seed, ())) >= SAME_ORDER_REPEATS and not any(_passed(x, tid) for x in again[r.seed])
                and in_process.get(r.seed) and all(_passed(x, tid) for x in in_process[r.seed])
                for r in failing):
            out.append(tid)
    return out


def evaluate(task: Task, references: Sequence[GradeResult], starter: GradeResult,
             in_process: GradeResult | None = None,
             order_rechecks: Sequence[GradeResult] = (), *, flaky_all_tests: bool = False) -> list[CheckResult]:
    """The checks of one task from its graded runs (pure: no sandbox here).

    ``in_process`` is the reference re-run once in-process after failing two-process: the
    tests that pass there and failed only two-process are not the reference's fault
    (:mod:`verify_cli.checks.two_process_gaps`); they get the ``two-process`` check's
    not-gradeable verdict instead of ``reference-passes`` failing. ``order_rechecks`` are
    in-process re-runs under the seeds of two-process runs where a test that changed outcome
    failed, in-process and two-process again: a test that fails again two-process and passes
    in-process under each such seed is the grader's nondeterminism (``grader-nondeterminism``,
    not gradeable two-process), never called flaky (:func:`grader_nondeterministic`).

    A task that lists its tests (FAIL_TO_PASS / PASS_TO_PASS) is judged flaky on the listed
    tests only, as SWE-bench curates (an unrelated flaky test of a project's suite does not
    discard the task), unless ``flaky_all_tests``.
    """
    checks = [CheckResult("schema", CheckStatus.PASS)]
    unbuilt = next((r for r in [*references, starter] if r.problems and r.problems[0].startswith(ENVIRONMENT_ERROR)),
                   None)
    if unbuilt is not None:  # nothing ran: the environment's cause is the whole report
        return [*checks, CheckResult(ENVIRONMENT_CHECK, CheckStatus.FAIL,
                                     "; ".join(unbuilt.problems)[len(ENVIRONMENT_ERROR) + 2:])]
    graded = [r for r in references if r.status is GradeStatus.GRADED]
    findings = _gap_findings(task, references, in_process)
    gap_ids = {g.test_id for g in findings.gaps} if findings else set()
    # Every two-process failure is a gap: the two-process evidence says nothing of the reference.
    only_gaps = _only_gaps(findings)
    infra = [r for r in references if r.status is GradeStatus.INFRA_ERROR]
    if infra:
        checks.append(CheckResult("infrastructure", CheckStatus.ERROR,
                                  f"{len(infra)} of {len(references)} reference runs failed in the sandbox: "
                                  f"{infra[0].problems[0] if infra[0].problems else ''}"))
    # Tests the reference ever reported: absent from any one run counts as failed there.
    collected = {t.id for r in graded for t in r.tests}
    outcomes: dict[str, set[Outcome]] = {tid: set() for tid in collected}
    for r in graded:
        have = {t.id: t.outcome for t in r.tests}
        for tid in collected:
            outcomes[tid].add(have.get(tid, Outcome.MISSING))

    no_results = [r for r in graded if any(p.startswith("no results file") for p in r.problems)]
    if no_results and not only_gaps:
        checks.append(CheckResult("results", CheckStatus.FAIL,
                                  f"{no_results[0].problems[0]} "
                                  f"({len(no_results)} of {len(graded)} reference runs)"))

    # A test that failed two-process in every run and passes in-process is a gap, not a flake;
    # one that changes outcome between two-process runs is still flaky.
    judged = _listed_ids(task) if task.test.has_test_lists and not flaky_all_tests else None
    flaky = sorted(tid for tid, seen in outcomes.items()
                   if len(seen) > 1 and (tid not in gap_ids or Outcome.PASSED in seen)
                   and (judged is None or tid in judged))
    same_order = [*([in_process] if in_process is not None else []), *order_rechecks]
    grader_made = set(grader_nondeterministic(references, flaky, same_order)) if flaky else set()
    if grader_made:
        flaky = [tid for tid in flaky if tid not in grader_made]
        more = f" and {len(grader_made) - 3} more" if len(grader_made) > 3 else ""
        shown = ", ".join(sorted(grader_made)[:3]) + more
        checks.append(CheckResult(
            "grader-nondeterminism", CheckStatus.NOT_GRADEABLE,
            f"{len(grader_made)} test(s) changed outcome between two-process repeats of the same reference: "
            f"{shown}. Under the seed (the test order) of every two-process run that failed them they fail "
            "two-process again and pass in-process. "
            "That is the two-process grader's nondeterminism, not a flaky task; grade it in-process "
            '(isolation = "in-process" in task.toml) and report the test to verify-cli'))
    if flaky:
        details = ", ".join(f"{tid} ({'/'.join(sorted(o.value for o in outcomes[tid]))})" for tid in flaky[:3])
        checks.append(CheckResult("flaky", CheckStatus.FAIL,
                                  f"{len(flaky)} test(s) changed outcome between repeats: {details}"))
    elif len(graded) > 1:
        checks.append(CheckResult("flaky", CheckStatus.PASS))

    # A run whose only failures are the grader's nondeterminism is not the reference's failure.
    failing = [r for r in graded if (not r.passed or collected - {t.id for t in r.tests})
               and not (grader_made and {t.id for t in r.tests if not t.outcome.ok} | (
                   collected - {t.id for t in r.tests}) <= grader_made)]
    if graded and not failing:
        checks.append(CheckResult("reference-passes", CheckStatus.PASS))
    elif only_gaps:
        assert findings is not None and in_process is not None
        checks.append(CheckResult("reference-passes", CheckStatus.PASS,
                                  f"passes all {len(in_process.tests)} tests in-process; "
                                  f"{len(findings.gaps)} fail only two-process"))
        checks.append(_gap_check(findings, len(graded)))
    elif graded:
        first = failing[0]
        if findings is not None and findings.still_failing:
            still = set(findings.still_failing)
            first = next((r for r in failing if still & {t.id for t in r.failed_tests}), first)
            checks.append(CheckResult("reference-passes", CheckStatus.FAIL,
                                      f"reference fails in {len(failing)} of {len(graded)} runs and "
                                      f"in-process too (seed {first.seed}): "
                                      f"{_summarise_failures(first, only=still - gap_ids)}"))
            if findings.gaps:
                checks.append(_gap_check(findings, len(graded)))
        else:
            if findings is not None and findings.gaps:
                checks.append(_gap_check(findings, len(graded)))
            why = ""
            if in_process is not None and in_process.status is not GradeStatus.GRADED:
                why = " (the in-process re-run that would tell a two-process gap failed in the sandbox)"
            checks.append(CheckResult("reference-passes", CheckStatus.FAIL,
                                      f"reference fails in {len(failing)} of {len(graded)} runs "
                                      f"(seed {first.seed}): {_summarise_failures(first)}{why}"))

    if starter.status is GradeStatus.INFRA_ERROR:
        checks.append(CheckResult("starter-fails", CheckStatus.ERROR,
                                  f"starter run failed in the sandbox: {'; '.join(starter.problems)}"))
    elif starter.passed:
        checks.append(CheckResult("starter-fails", CheckStatus.FAIL,
                                  f"starter already passes all {len(starter.tests)} tests: the task is trivial"))
    else:
        checks.append(CheckResult("starter-fails", CheckStatus.PASS,
                                  f"starter fails {len(starter.failed_tests)} of {len(starter.tests)} tests"))

    checks.extend(fail_to_pass_checks(task, graded, starter))  # repository tasks' FAIL_TO_PASS / PASS_TO_PASS
    history = git_history_findings(task)  # a starter's .git: nothing beyond the base commit's history
    if history is not None:
        checks.append(CheckResult("git-history", CheckStatus.PASS if history.clean else CheckStatus.FAIL,
                                  "" if history.clean else history.describe()))

    for name, reason, defect in kind_of(task).findings(task):
        checks.append(CheckResult(name, CheckStatus.FAIL if defect else CheckStatus.WARN, reason))

    reach = [] if kind_of(task).runs_itself(task) else editable_reach(task)  # the workdir, not the folder
    if reach:
        checks.append(CheckResult("editable", CheckStatus.WARN, "; ".join(r.describe() for r in reach)))
    else:
        checks.append(CheckResult("editable", CheckStatus.PASS))

    if graded:
        worst = max(r.run.wall_seconds for r in graded)
        limit = task.limits.wall_seconds
        if worst * HEADROOM_FACTOR > limit:
            checks.append(CheckResult("headroom", CheckStatus.WARN,
                                      f"reference took {worst:.2f}s of a {limit:g}s limit "
                                      f"(less than {HEADROOM_FACTOR:g}x headroom)"))
        else:
            checks.append(CheckResult("headroom", CheckStatus.PASS,
                                      f"{worst:.2f}s of {limit:g}s"))
    return checks


def _listed_ids(task: Task) -> set[str]:
    lists = TestLists.of(task.test)
    return set(lists.fail_to_pass) | set(lists.pass_to_pass) if lists is not None else set()


def _report(task: Task, references: list[GradeResult], starter: GradeResult,
            in_process: GradeResult | None = None, order_rechecks: Sequence[GradeResult] = (), *,
            flaky_all_tests: bool = False) -> TaskReport:
    graded = [r for r in references if r.status is GradeStatus.GRADED]
    ref_time = statistics.median(r.run.wall_seconds for r in graded) if graded else None
    extra = [*([in_process] if in_process is not None else []), *order_rechecks]
    runs: list[dict[str, Any]] = [r.to_dict() for r in [*references, starter, *extra]]
    return TaskReport(task_id=task.id, path=str(task.root), domain=task.domain, language=task.language,
                      checks=evaluate(task, references, starter, in_process, order_rechecks,
                                      flaky_all_tests=flaky_all_tests),
                      reference_seconds=ref_time,
                      runs=runs, isolation=starter.isolation, isolation_notes=list(starter.isolation_notes))


def _needs_in_process_run(runs: Sequence[GradeResult]) -> GradeResult | None:
    """The two-process reference run of the lowest seed that was graded and did not pass, if
    any: such a reference is re-run once in-process (under that seed) before the task is called
    defective. By seed, not by completion order, so the re-run is the same on every machine."""
    failed = [r for r in runs if r.phase is Phase.REFERENCE and r.isolation == TWO_PROCESS
              and r.status is GradeStatus.GRADED and not r.passed]
    return min(failed, key=lambda r: r.seed if r.seed is not None else -1, default=None)


def _gap_findings(task: Task, references: Sequence[GradeResult],
                  in_process: GradeResult | None) -> GapFindings | None:
    graded = [r for r in references if r.status is GradeStatus.GRADED]
    if in_process is None or in_process.status is not GradeStatus.GRADED or not graded:
        return None
    return find_gaps(task, graded, in_process)


def _only_gaps(findings: GapFindings | None) -> bool:
    """Every two-process failure is a gap (fails every two-process run, passes in-process)."""
    return findings is not None and bool(findings.gaps) and not (findings.still_failing or findings.inconsistent)


#: The label suffix of the in-process re-runs that tell the grader's nondeterminism from a flaky task.
ORDER_RECHECK = "same-order"
#: At most this many such re-runs per task.
MAX_ORDER_RECHECKS = 3
#: Two-process re-runs under each such seed: every one must fail the test again before its
#: failures are called the grader's. A test failing one run in four at random fails all four
#: with probability 1/256 (one re-run let a random flake pass as the grader's one time in five).
SAME_ORDER_REPEATS = 4


def _order_recheck_seeds(runs: Sequence[GradeResult]) -> list[int]:
    """The seeds of the two-process reference runs that failed a test another two-process run
    passed (at most MAX_ORDER_RECHECKS): each is re-run, in-process and two-process."""
    refs = [r for r in runs if r.phase is Phase.REFERENCE and r.status is GradeStatus.GRADED
            and r.isolation == TWO_PROCESS]
    passed_somewhere = {t.id for r in refs for t in r.tests if t.outcome.ok}
    seeds: list[int] = []
    for r in sorted(refs, key=lambda r: r.seed if r.seed is not None else -1):
        failed = {t.id for t in r.tests if not t.outcome.ok}
        if r.seed is None or not failed & passed_somewhere or r.seed in seeds:
            continue
        seeds.append(r.seed)
    return seeds[:MAX_ORDER_RECHECKS]


def _needs_more_runs(runs: Sequence[GradeResult]) -> bool:
    """Whether the remaining repeats can still change the verdict: every first-wave reference
    run was graded and passed (with the same tests), so a rarer failure may still be hiding."""
    refs = [r for r in runs if r.phase is Phase.REFERENCE]
    if not refs or any(r.status is not GradeStatus.GRADED or not r.passed for r in refs):
        return False
    return len({frozenset(t.id for t in r.tests) for r in refs}) == 1


#: A sandbox's cache identity for a run on an image (``Sandbox.cache_identity``,
#: ``Executor.cache_identity``): what a cached verdict depends on beyond the task's content.
CacheIdentity = Callable[[str | None], str]


def check_cache_key(task: Task, backend_id: str | CacheIdentity, options: CheckOptions) -> str:
    """The result cache's key for ``task`` checked with ``options`` on ``backend_id`` (a fixed
    string, or the sandbox's identity for the task's image)."""
    identity = backend_id(task.environment.image) if callable(backend_id) else backend_id
    spec = spec_of(task)  # what the environment declares, the files it names included
    return cache_key("check-tasks", task.content_hash(), identity, f"environment={spec.digest if spec else ''}",
                     f"repeats={options.repeats}", f"first_wave={options.first_wave}",
                     *(["flaky_all_tests"] if options.flaky_all_tests else []))


def _environment_order(task: Task) -> str:
    spec = spec_of(task)
    return spec.digest if spec is not None else ""


def check_tasks(items: Iterable[Task | TaskLoadFailure], grader: BatchGrader, options: CheckOptions,
                *, cache: ResultCache | None = None, backend_id: str | CacheIdentity = "",
                on_progress: ProgressCallback | None = None) -> list[TaskReport]:
    """Check every task; reports come back in the order of ``items``. With a ``cache``, a task
    whose content and ``backend_id`` (say, ``executor.cache_identity``) are unchanged is not
    run again."""
    ordered: list[Task | TaskLoadFailure] = list(items)
    reports: dict[int, TaskReport] = {}
    todo: list[tuple[int, Task, str]] = []
    for i, item in enumerate(ordered):
        if isinstance(item, TaskLoadFailure):
            reports[i] = _load_failure_report(item)
            continue
        key = check_cache_key(item, backend_id, options) if cache else ""
        hit = cache.get(key) if cache else None
        if hit is not None:
            report = TaskReport.from_dict(hit)
            report.cached = True
            reports[i] = report
        else:
            todo.append((i, item, key))

    # Tasks that share an environment are graded together: a warm worker serves one environment
    # (its interpreter), and interleaving them would start and evict workers all along.
    todo.sort(key=lambda item: _environment_order(item[1]))
    results: dict[int, list[GradeResult]] = {i: [] for i, _, _ in todo}
    first = min(options.repeats, max(1, options.first_wave))
    wave1: list[GradeRequest] = []
    for i, task, _ in todo:
        for seed in range(1, first + 1):
            wave1.append(GradeRequest(task, Phase.REFERENCE, seed=seed, label=str(i)))
        wave1.append(GradeRequest(task, Phase.STARTER, seed=None, label=str(i)))
    total = len(todo) * (options.repeats + 1)
    done = 0

    rechecks: dict[int, GradeResult] = {}
    order_rechecks: dict[int, list[GradeResult]] = {i: [] for i, _, _ in todo}

    def run(requests: list[GradeRequest]) -> None:
        nonlocal done
        for r in grader.grade_many(requests, jobs=options.jobs):
            done += 1
            index, _, kind = r.label.partition("/")
            if kind == IN_PROCESS_RECHECK:
                rechecks[int(index)] = r
            elif kind == ORDER_RECHECK:
                order_rechecks[int(index)].append(r)
            else:
                results[int(index)].append(r)
            if on_progress:
                on_progress(Progress(done, total, r.task_id, r.phase.value + (f" ({kind})" if kind else "")))

    run(wave1)
    wave2: list[GradeRequest] = []
    for i, task, _ in todo:
        failed = _needs_in_process_run(results[i])
        if failed is not None:
            wave2.append(GradeRequest(replace(task, isolation=Isolation.IN_PROCESS), Phase.REFERENCE,
                                      seed=failed.seed, label=f"{i}/{IN_PROCESS_RECHECK}"))
            total += 1
        if _needs_more_runs(results[i]):
            for seed in range(first + 1, options.repeats + 1):
                wave2.append(GradeRequest(task, Phase.REFERENCE, seed=seed, label=str(i)))
        elif options.repeats > first:
            total -= options.repeats - first
            if on_progress:
                on_progress(Progress(done, total, task.id, "no more repeats needed"))
    run(wave2)
    # "Not gradeable two-process" needs its failures in every repeat, not just the first wave:
    # a test failing one run in four at random can fail three runs in a row and pass the one
    # in-process re-run (a CI run saw it so). A real gap fails the rest too; a flake passes one.
    wave3: list[GradeRequest] = []
    for i, task, _ in todo:
        refs = [r for r in results[i] if r.phase is Phase.REFERENCE]
        if len(refs) >= options.repeats or not _only_gaps(_gap_findings(task, refs, rechecks.get(i))):
            continue
        made = {r.seed for r in refs}
        more = [seed for seed in range(1, options.repeats + 1) if seed not in made]
        wave3 += [GradeRequest(task, Phase.REFERENCE, seed=seed, label=str(i)) for seed in more]
        total += len(more)
    run(wave3)
    # Before a test that changed outcome between two-process repeats is called flaky: the same
    # reference under the seed (the test order) of each two-process run that failed it, again
    # two-process and in-process. Failing again two-process and passing in-process every time,
    # its failures were the grader's, not the task's (grader_nondeterministic).
    wave4: list[GradeRequest] = []
    for i, task, _ in todo:
        before = len(wave4)
        seeds = _order_recheck_seeds(results[i])
        for seed in seeds:
            wave4 += [GradeRequest(task, Phase.REFERENCE, seed=seed, label=f"{i}/{ORDER_RECHECK}")
                      for _ in range(SAME_ORDER_REPEATS)]
            known = rechecks.get(i)
            if known is None or known.seed != seed:  # the in-process re-run of that seed, if not made
                wave4.append(GradeRequest(replace(task, isolation=Isolation.IN_PROCESS), Phase.REFERENCE,
                                          seed=seed, label=f"{i}/{ORDER_RECHECK}"))
        total += len(wave4) - before
    run(wave4)
    for i, task, key in todo:
        runs = results[i]
        refs = sorted((r for r in runs if r.phase is Phase.REFERENCE), key=lambda r: r.seed or 0)
        starter = next(r for r in runs if r.phase is Phase.STARTER)
        report = _report(task, refs, starter, rechecks.get(i),
                         sorted(order_rechecks[i], key=lambda r: r.seed or 0),
                         flaky_all_tests=options.flaky_all_tests)
        reports[i] = report
        if cache is not None and report.verdict not in (TaskVerdict.ERROR, TaskVerdict.ENVIRONMENT_ERROR):
            cache.put(key, report.to_dict())
    return [reports[i] for i in range(len(ordered))]
