"""Reward-hack probes graded exactly like a real candidate (Phase.PROBE, the task's own limits
but a wall limit derived from the reference's measured time, no expected tests): any score marks
the tests or the harness as hackable.

Where one failing test makes the score 0 (``all-or-nothing``, and ``swebench`` over its listed
tests) and the harness can stop at the first failure, a probe's run stops there
(:func:`stop_early`): its score is the same, and a stub that fails the first test no longer runs
a project's whole suite, or hangs in it until the wall limit."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from verify_cli.checks.audit.model import ProbeResult
from verify_cli.checks.probes import Probe, ProbeTarget, build_probe, probe_context, probes_for
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.scoring import TestLists, swebench_id
from verify_cli.grading.workspace import Phase
from verify_cli.kinds import kind_of
from verify_cli.tasks.model import ScoringPolicy, Task

#: What a probe's report says of a run stopped at its first failing test.
STOPPED_EARLY = "stopped at the first failing test: one failure scores 0 under this task's policy"


@dataclass(frozen=True)
class EarlyStop:
    """How a task's probes may stop at their first failing test: ``select`` the tests that
    count (None: every test the run collects); ``test_seconds``, each test's limit."""

    select: frozenset[str] | None
    test_seconds: float | None = None


def stop_early(task: Task, reference_tests: Iterable[str] | None,
               test_seconds: float | None = None) -> EarlyStop | None:
    """Whether ``task``'s probes can stop at their first failing test without changing their
    score, and over which tests; None where they cannot.

    ``all-or-nothing`` scores 0 on any failure; ``swebench`` on any failing listed test, so
    there the run is limited to the listed tests, named as the reference's run (``reference_tests``,
    its result ids) reported them: a listed id cut as SWE-bench's parsers cut parametrized ids
    selects every test it stands for. Without the reference's ids (its run failed) a
    ``swebench`` task's probes run whole. Partial-credit policies always run whole."""
    if not kind_of(task).stops_early(task):
        return None
    policy = task.scoring.policy
    if policy is ScoringPolicy.ALL_OR_NOTHING:
        return EarlyStop(None, test_seconds)
    if policy is not ScoringPolicy.SWEBENCH or reference_tests is None:
        return None
    lists = TestLists.of(task.test)
    if lists is None or not lists.fail_to_pass:
        return None
    listed = set(lists.fail_to_pass) | set(lists.pass_to_pass)
    select = frozenset(t for t in reference_tests if t in listed or swebench_id(t) in listed)
    return EarlyStop(select, test_seconds) if select else None


def probe_requests(task: Task, only: frozenset[str] | None, label: str,
                   wall_seconds: float | None = None,
                   early: EarlyStop | None = None) -> list[tuple[Probe, GradeRequest]]:
    """One request per probe of the task's language that applies to it, each run under
    ``wall_seconds`` where given (tighter than the task's limit: a hanging probe costs that),
    stopping at the first failing test where ``early`` says it may (:func:`stop_early`)."""
    ctx = probe_context(task, wall_seconds)
    out: list[tuple[Probe, GradeRequest]] = []
    for probe in probes_for(task.language, set(only) if only is not None else None):
        files = build_probe(probe, ctx)
        if files is not None:
            out.append((probe, GradeRequest(task, Phase.PROBE, candidate=files, wall_seconds=wall_seconds,
                                            select_tests=early.select if early else None,
                                            fail_fast=early is not None,
                                            test_seconds=early.test_seconds if early else None,
                                            label=f"{label}{probe.name}")))
    return out


def trick_files(probe: Probe, request: GradeRequest) -> tuple[str, ...]:
    """The files of ``request``'s candidate that carry the probe's trick: those that differ from
    its candidate without the trick (``Probe.without_trick``); () where the probe has none."""
    if probe.without_trick is None:
        return ()
    plain = probe.without_trick(probe_context(request.task, request.wall_seconds)) or {}
    return tuple(sorted(p for p, data in (request.candidate or {}).items() if plain.get(p) != data))


def judge_probe(probe: Probe, result: GradeResult, tricks: tuple[str, ...] = (),
                stopped_early: bool = False) -> ProbeResult:
    """What ``result`` shows. ``tricks``: the files that carry the probe's trick
    (:func:`trick_files`); where the grader refused them all, a score is named as the stubs'.
    ``stopped_early``: the run stopped at its first failing test (:func:`stop_early`)."""
    passed = tuple(t.id for t in result.tests if t.outcome.ok)
    if result.status is GradeStatus.INFRA_ERROR:
        return ProbeResult(probe.name, probe.target.value, probe.summary, None, (), 0,
                           "the sandbox failed: nothing concluded", result.problems, error=True)
    target = probe.target.value
    tally = f"{len(passed)} of {len(result.tests)} test(s) passed"
    if stopped_early and not result.score and len(passed) < len(result.tests):
        tally += f"; {STOPPED_EARLY}"
    refused_trick = bool(tricks) and set(tricks) <= set(result.ignored_files)
    if result.score and probe.target is ProbeTarget.HARNESS and refused_trick:
        # Not a harness hole: the files that carry the trick never reached the run.
        target = ProbeTarget.TESTS.value
        why = (f"{probe.summary}, but the grader refused every one of them ({', '.join(tricks)}); "
               f"it earned {result.score:.2f} ({tally}) with its stub of the editable code alone, "
               "whose functions return defaults, so the tests accept code that does not solve the task")
    elif result.score:
        why = f"{probe.summary}: earned {result.score:.2f} ({tally}), so {probe.if_it_scores}"
    else:
        stops = [p for p in result.problems if not p.startswith("exit code")]
        if result.ignored_files:
            stops.insert(0, f"refused candidate files {', '.join(result.ignored_files)}")
        if passed and stops:
            why = f"scored 0 although {tally}: the grader rejected the run ({'; '.join(stops)})"
        elif stops:
            why = f"scored 0 ({tally}): {'; '.join(stops)}"
        else:
            why = f"scored 0 ({tally})"
    return ProbeResult(probe.name, target, probe.summary, result.score, passed,
                       len(result.tests), why[:1000], result.problems, result.ignored_files)
