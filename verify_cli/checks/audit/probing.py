"""Reward-hack probes graded exactly like a real candidate (Phase.PROBE, the task's own limits
but a wall limit derived from the reference's measured time, no expected tests): any score marks
the tests or the harness as hackable."""

from __future__ import annotations

from verify_cli.checks.audit.model import ProbeResult
from verify_cli.checks.probes import Probe, ProbeTarget, build_probe, probe_context, probes_for
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.tasks.model import Task


def probe_requests(task: Task, only: frozenset[str] | None, label: str,
                   wall_seconds: float | None = None) -> list[tuple[Probe, GradeRequest]]:
    """One request per probe of the task's language that applies to it, each run under
    ``wall_seconds`` where given (tighter than the task's limit: a hanging probe costs that)."""
    ctx = probe_context(task, wall_seconds)
    out: list[tuple[Probe, GradeRequest]] = []
    for probe in probes_for(task.language, set(only) if only is not None else None):
        files = build_probe(probe, ctx)
        if files is not None:
            out.append((probe, GradeRequest(task, Phase.PROBE, candidate=files, wall_seconds=wall_seconds,
                                            label=f"{label}{probe.name}")))
    return out


def trick_files(probe: Probe, request: GradeRequest) -> tuple[str, ...]:
    """The files of ``request``'s candidate that carry the probe's trick: those that differ from
    its candidate without the trick (``Probe.without_trick``); () where the probe has none."""
    if probe.without_trick is None:
        return ()
    plain = probe.without_trick(probe_context(request.task, request.wall_seconds)) or {}
    return tuple(sorted(p for p, data in (request.candidate or {}).items() if plain.get(p) != data))


def judge_probe(probe: Probe, result: GradeResult, tricks: tuple[str, ...] = ()) -> ProbeResult:
    """What ``result`` shows. ``tricks``: the files that carry the probe's trick
    (:func:`trick_files`); where the grader refused them all, a score is named as the stubs'."""
    passed = tuple(t.id for t in result.tests if t.outcome.ok)
    if result.status is GradeStatus.INFRA_ERROR:
        return ProbeResult(probe.name, probe.target.value, probe.summary, None, (), 0,
                           "the sandbox failed: nothing concluded", result.problems, error=True)
    target = probe.target.value
    tally = f"{len(passed)} of {len(result.tests)} test(s) passed"
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
