"""Grading: a phase of a task, run in a sandbox, judged into per-test outcomes and a score."""

from verify_cli.grading.grader import Grader, GradeRequest, GradeResult, GradeStatus, judge
from verify_cli.grading.junit import Outcome, TestOutcome, parse_junit
from verify_cli.grading.workspace import Phase, lay_out, solution_as_candidate

__all__ = ["GradeRequest", "GradeResult", "GradeStatus", "Grader", "Outcome", "Phase", "TestOutcome",
           "judge", "lay_out", "parse_junit", "solution_as_candidate"]
