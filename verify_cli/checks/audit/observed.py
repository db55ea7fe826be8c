"""Observed equivalence: surviving mutants that behave as the reference on every tested input.

Under two-process grading (and in the ``calls`` runner) every call the tests make on the
candidate crosses the wire by value: the trusted side's stand-in can record each message, as
sent and as received (``VERIFY_TRACE_CALLS``; ``verify-call-trace.jsonl`` in the run's results).
After the mutant runs, a task with survivors gets one traced run of the unmutated reference and
one traced run of each surviving mutant, both over every test that judges mutants (the
quarantined ones left out), in the same order and hash seed, without stopping early.

A survivor is *equivalent (observed)* only on proof: both runs passed every test, both traces
are complete, and they are identical: the same requests with the same arguments, the same
answers by value (results, exceptions with their messages and tracebacks, and what the
candidate printed), and the same calls back into the tests' objects. Whatever the tests could
observe of the candidate is in that trace, so equal traces mean no test input tells the mutant
from the reference. Anything less (no trace: in-process runs, command-line and node tasks; a
truncated trace; a run that failed or was lost) leaves it a plain survivor. The one thing left
out of the comparison is the candidate's ``release`` of handles (garbage collection, which no
test observes) and the candidate's own request numbering, which releases shift.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any

from verify_cli.checks.audit.model import MutantResult, MutantStatus
from verify_cli.checks.audit.mutation import MutationPlan, editable_sources
from verify_cli.checks.mutation import Mutant
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.two_process import TWO_PROCESS
from verify_cli.grading.workspace import Phase
from verify_cli.kinds.registry import kind_of
from verify_cli.tasks.model import Task

#: The stand-in's trace file (the same name as verify_standin_trace.TRACE_FILE).
TRACE_FILE = "verify-call-trace.jsonl"


@dataclass(frozen=True)
class Trace:
    """A run's messages to and from the candidate, normalised for comparison."""

    records: tuple[str, ...]  # one canonical JSON text per message
    tests: tuple[str, ...]  # the test each record was made in (for the report)
    ran: tuple[tuple[str, str], ...] = ()  # the run's tests and outcomes


def traceable(task: Task) -> bool:
    """Whether a run of ``task`` can be traced (its kind says: the Python stand-in carries its
    calls; the stdio runner records each case's output, exit status and limits)."""
    return kind_of(task).traceable(task)


def _selection(plan: MutationPlan) -> frozenset[str] | None:
    return plan.baseline_tests if plan.quarantined else None


def _request(plan: MutationPlan, files: dict[str, str], label: str) -> GradeRequest:
    return GradeRequest(plan.task, Phase.MUTANT, candidate={k: v.encode() for k, v in files.items()},
                        select_tests=_selection(plan), fail_fast=False,
                        wall_seconds=plan.wall_seconds, label=label, trace_calls=True)


def reference_request(plan: MutationPlan, label: str) -> GradeRequest:
    """The unmutated reference over every judging test, traced."""
    return _request(plan, editable_sources(plan.task), label)


def mutant_request(plan: MutationPlan, mutant: Mutant, label: str) -> GradeRequest:
    """A surviving mutant over the same tests as :func:`reference_request`, traced."""
    files = editable_sources(plan.task)
    files[mutant.path] = mutant.mutated_source
    return _request(plan, files, label)


def read_trace(task: Task, result: GradeResult) -> Trace | None:
    """The run's trace, or None when there is none to trust (no file, truncated, unreadable,
    a run that was not two-process or did not pass)."""
    if result.status is not GradeStatus.GRADED or not result.passed or not result.tests:
        return None
    if result.isolation != TWO_PROCESS and kind_of(task).trace_needs_two_process(task):
        return None  # in-process: the candidate shared the process that wrote the file
    data = result.run.results.get(TRACE_FILE)
    if data is None:
        return None
    records: list[str] = []
    tests: list[str] = []
    try:
        for line in data.decode("utf-8").splitlines():
            entry = json.loads(line)
            if type(entry) is not dict or entry.get("truncated"):
                return None
            normal = _normalise(entry)
            if normal is not None:
                records.append(json.dumps(normal, sort_keys=True))
                tests.append(str(entry.get("test", "")))
    except (UnicodeDecodeError, ValueError):
        return None
    ran = tuple(sorted((t.id, t.outcome.value) for t in result.tests))
    return Trace(tuple(records), tuple(tests), ran)


def _normalise(entry: dict[str, Any]) -> dict[str, Any] | None:
    served = entry.get("served")
    if isinstance(served, dict):
        if served.get("op") == "release":
            return None
        return {"served": {k: v for k, v in served.items() if k != "id"}}
    return {k: v for k, v in entry.items() if k != "test"}


def first_difference(reference: Trace, mutant: Trace) -> str | None:
    """None when the traces (and the tests that ran) are identical; else where they part."""
    if reference.ran != mutant.ran:
        return "the runs' tests or outcomes differ"
    for i, (a, b) in enumerate(zip(reference.records, mutant.records, strict=False)):
        if a != b:
            return f"message {i + 1} (in {mutant.tests[i] or 'set-up'}) differs"
    if len(reference.records) != len(mutant.records):
        n = min(len(reference.records), len(mutant.records))
        return f"{len(mutant.records)} messages against the reference's {len(reference.records)} (same first {n})"
    return None


def judge_observed(task: Task, survivor: MutantResult, reference: Trace | None,
                   result: GradeResult) -> MutantResult:
    """``survivor`` as equivalent (observed) on proof from the traces; else as it was, with
    what the traced run showed in its message."""
    mutant = read_trace(task, result)
    if reference is None or mutant is None:
        return survivor
    where = first_difference(reference, mutant)
    if where is not None:
        note = f"observably different from the reference: {where}"
        return replace(survivor, message="; ".join(m for m in (survivor.message, note) if m))
    return replace(survivor, status=MutantStatus.EQUIVALENT, reason="observed", killed_by=(),
                   seconds=survivor.seconds + result.seconds,
                   message=f"no observable difference from the reference: {len(mutant.records)} "
                           f"traced crossings to and from the candidate over {len(result.tests)} tests, "
                           "identical")
