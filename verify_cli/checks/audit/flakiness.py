"""Flakiness: the reference rerun in fresh sandboxes, each with its own test order and hash seed.

Rerun ``i`` (1-based) shuffles the test order with seed ``i`` and sets ``PYTHONHASHSEED=i``. A
test that both passes and fails across reruns is flaky: it is quarantined in the report (listed
with its flip rate, never hidden).
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import pairwise

from verify_cli.checks.audit.model import FlakinessReport, TestFlips
from verify_cli.grading.grader import GradeRequest, GradeResult, GradeStatus
from verify_cli.grading.junit import Outcome
from verify_cli.grading.workspace import Phase
from verify_cli.tasks.model import Task


def rerun_requests(task: Task, reruns: int, label: str) -> list[GradeRequest]:
    return [GradeRequest(task, Phase.REFERENCE, seed=i, label=label) for i in range(1, reruns + 1)]


def flakiness_report(results: Sequence[GradeResult]) -> FlakinessReport:
    """Per-test pass counts and flip rates over the graded reruns (in seed order)."""
    graded = sorted((r for r in results if r.status is GradeStatus.GRADED), key=lambda r: r.seed or 0)
    ids = sorted({t.id for r in graded for t in r.tests})
    tests: list[TestFlips] = []
    for tid in ids:
        seq = [(r.outcome_of(tid) or Outcome.MISSING).ok for r in graded]
        flips = sum(a != b for a, b in pairwise(seq))
        rate = flips / (len(seq) - 1) if len(seq) > 1 else 0.0
        tests.append(TestFlips(tid, sum(seq), len(seq), rate))
    return FlakinessReport(reruns=len(results), tests=tests,
                           errors=sum(r.status is GradeStatus.INFRA_ERROR for r in results),
                           seconds=sum(r.seconds for r in results))
