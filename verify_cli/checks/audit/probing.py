"""Reward-hack probes graded exactly like a real candidate (Phase.PROBE, the task's own limits,
no expected tests): any score marks the tests or the harness as hackable."""

from __future__ import annotations

from verify_cli.checks.audit.model import ProbeResult
from verify_cli.checks.probes import Probe, build_probe, probe_context, probes_for
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.workspace import Phase
from verify_cli.tasks.model import Task


def probe_requests(task: Task, only: frozenset[str] | None, label: str) -> list[tuple[Probe, GradeRequest]]:
    """One request per probe of the task's language that applies to it."""
    ctx = probe_context(task)
    out: list[tuple[Probe, GradeRequest]] = []
    for probe in probes_for(task.language, set(only) if only is not None else None):
        files = build_probe(probe, ctx)
        if files is not None:
            out.append((probe, GradeRequest(task, Phase.PROBE, candidate=files,
                                            label=f"{label}{probe.name}")))
    return out


def judge_probe(probe: Probe, result: GradeResult) -> ProbeResult:
    passed = tuple(t.id for t in result.tests if t.outcome.ok)
    if result.status is GradeStatus.INFRA_ERROR:
        return ProbeResult(probe.name, probe.target.value, probe.summary, None, (), 0,
                           "the sandbox failed: nothing concluded", result.problems, error=True)
    target = probe.target.value
    tally = f"{len(passed)} of {len(result.tests)} test(s) passed"
    if result.score:
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
