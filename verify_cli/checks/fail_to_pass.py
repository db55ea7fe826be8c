"""check-tasks for repository tasks: prove the FAIL_TO_PASS and PASS_TO_PASS lists.

Every FAIL_TO_PASS test fails on the starter and passes in every reference run; every
PASS_TO_PASS test passes on the starter and in every reference run; every listed id is one the
runs report. Each violation names the test by the id task.toml lists (a pytest node id).
"""

from __future__ import annotations

from collections.abc import Sequence

from verify_cli.checks.report import CheckResult, CheckStatus
from verify_cli.grading.grader import GradeResult, GradeStatus
from verify_cli.grading.junit import junit_id_of_node_id
from verify_cli.tasks.model import Task

_SHOWN = 5


def _names(ids: Sequence[str]) -> str:
    more = f" and {len(ids) - _SHOWN} more" if len(ids) > _SHOWN else ""
    return ", ".join(ids[:_SHOWN]) + more


def _passed_ids(run: GradeResult, *, kept: bool) -> set[str]:
    """The tests of ``run`` that pass as SWE-bench counts them; ``kept``: those that do not fail
    (PASS_TO_PASS: a skipped test is kept)."""
    return {t.id for t in run.tests if (not t.outcome.listed_failure if kept else t.outcome.listed_pass)}


def _list_check(name: str, ids: Sequence[str], references: Sequence[GradeResult], starter: GradeResult,
                *, starter_must_pass: bool) -> CheckResult:
    graded = [r for r in references if r.status is GradeStatus.GRADED]
    starter_ok = starter.status is GradeStatus.GRADED
    reported = {t.id for r in [*graded, *([starter] if starter_ok else [])] for t in r.tests}
    unknown, on_starter, on_reference = [], [], []
    for node_id in ids:
        jid = junit_id_of_node_id(node_id)
        if graded and jid not in reported:
            unknown.append(node_id)
            continue
        if starter_ok and (jid in _passed_ids(starter, kept=starter_must_pass)) != starter_must_pass:
            on_starter.append(node_id)
        failing = sum(jid not in _passed_ids(r, kept=starter_must_pass) for r in graded)
        if failing:
            on_reference.append(f"{node_id} ({failing} of {len(graded)} runs)")
    problems: list[str] = []
    if on_starter:
        problems.append(("fail" if starter_must_pass else "pass") + f" on the starter: {_names(on_starter)}")
    if on_reference:
        problems.append(f"do not pass on the reference: {_names(on_reference)}")
    if unknown:
        problems.append(f"are reported by no run (not collected, or misspelt): {_names(unknown)}")
    named = tuple(dict.fromkeys([*on_starter, *(s.rsplit(" (", 1)[0] for s in on_reference), *unknown]))
    if problems:
        return CheckResult(name, CheckStatus.FAIL, f"{len(named)} of {len(ids)} {name.upper().replace('-', '_')} "
                           f"tests are wrong: they " + "; ".join(problems), named)
    if not starter_ok:
        return CheckResult(name, CheckStatus.ERROR, "the starter run failed in the sandbox: "
                           + "; ".join(starter.problems))
    if not graded:
        return CheckResult(name, CheckStatus.ERROR, "no reference run was graded")
    return CheckResult(name, CheckStatus.PASS, f"{len(ids)} test(s) " + (
        "pass on the starter and the reference" if starter_must_pass
        else "fail on the starter and pass on the reference"))


def fail_to_pass_checks(task: Task, references: Sequence[GradeResult], starter: GradeResult) -> list[CheckResult]:
    """The ``fail-to-pass`` and ``pass-to-pass`` checks of a task that lists its tests (none
    for other tasks)."""
    out: list[CheckResult] = []
    if task.test.fail_to_pass:
        out.append(_list_check("fail-to-pass", task.test.fail_to_pass, references, starter,
                               starter_must_pass=False))
    if task.test.pass_to_pass:
        out.append(_list_check("pass-to-pass", task.test.pass_to_pass, references, starter,
                               starter_must_pass=True))
    return out


